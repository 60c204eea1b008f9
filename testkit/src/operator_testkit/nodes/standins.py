"""Stand-in images for what cannot be had here: Monocle's Elasticsearch, and Monocle itself (its API,
its crawler and its janitor). No registry is reached, and neither program can be built here, so each
is a small Python program on the suite's Debian base, loaded under the names the Monocle operator's
defaults, its samples and its tests ask for, and saying on its first line that it is a stand-in.

===========================================  ===================================================
image (loaded as)                            stands in for, and what it does
===========================================  ===================================================
localhost/operator-suite-elasticsearch-      Elasticsearch 7.17, one node (``discovery.type:
standin:1 (docker.elastic.co/elasticsearch/  single-node``): serves HTTP on 9200, ``/`` and
elasticsearch:7.17.5 and 7.17.10)            ``/_cluster/health`` (``wait_for_status``,
                                             ``timeout`` and ``local`` honoured, an unknown
                                             parameter refused with 400 as Elasticsearch does);
                                             red for its first second, then green; keeps a node
                                             file in its data volume and fails to start if it
                                             cannot write there; runs as uid 1000, as upstream's
localhost/operator-suite-monocle-standin:1   Monocle's one program, ``monocle``: ``api`` serves
(quay.io/change-metrics/monocle:1.8.0 and    ``/health`` on 8080, 200 once it has reached
1.9.0)                                       Elasticsearch; ``crawler`` serves ``/health`` on
                                             9001, 200 once it has reached the API; ``janitor
                                             update-idents --elastic URL --config PATH`` reads
                                             the config, reaches Elasticsearch and exits 0 (1
                                             when it cannot, in a minute); each reads its
                                             config.yaml and fails without one; runs as uid 1001
===========================================  ===================================================

What they do not imitate: no index, no document, no search, no identity is ever stored or changed; no
web UI; the crawler fetches nothing from anywhere. They prove the operator's side: the pods it asks
for start under its security contexts (non-root, read-only root filesystem), its probes pass, its
volumes and Services connect the components, and its update-idents Job runs to completion.

Both programs resolve a peer's name and connect to the address only if it lies in 127.0.0.0/8 or
198.18.0.0/15 (the pods', Services' and nodes' ranges): nothing they send can leave the machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, say
from operator_testkit.image import buildah_of, ensure_base
from operator_testkit.nodes.images import CONTAINER, NodeImage, _commit
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "ELASTICSEARCH_NAMES",
    "ELASTICSEARCH_STANDIN",
    "MONOCLE_NAMES",
    "MONOCLE_STANDIN",
    "elasticsearch_standin",
    "monocle_standin",
    "monocle_standins",
]

ELASTICSEARCH_STANDIN = "localhost/operator-suite-elasticsearch-standin:1"
ELASTICSEARCH_NAMES = tuple(
    f"docker.elastic.co/elasticsearch/elasticsearch:{tag}" for tag in ("7.17.5", "7.17.10")
)
"""The Monocle operator's default (7.17.5) and the version its tests bump to."""
MONOCLE_STANDIN = "localhost/operator-suite-monocle-standin:1"
MONOCLE_NAMES = tuple(f"quay.io/change-metrics/monocle:{tag}" for tag in ("1.8.0", "1.9.0"))
"""The Monocle operator's default (1.8.0) and the version its tests bump to."""

ELASTICSEARCH_UID = 1000
"""Upstream's image runs as 1000 (group 0); the operator's pod asks for the same."""
MONOCLE_UID = 1001
"""The uid the operator runs Monocle's pods as."""

# What both programs share: saying things, stopping on SIGTERM, reaching a peer only inside the
# machine's ranges, and answering HTTP with JSON. Python 3.11's standard library only (Debian's).
_COMMON = r'''#!/usr/bin/python3
"""__WHAT__ (written by operator_testkit.nodes.standins; not the real program)."""

import http.client
import ipaddress
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REACHABLE = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("198.18.0.0/15"))


def say(line):
    print(line, flush=True)


def stop_on_sigterm():
    # PID 1 of a container ignores SIGTERM it has no handler for: a graceful delete would wait out
    # the whole grace period.
    def stop(number, frame):
        say("stand-in: SIGTERM, stopping")
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)


def http_get(url, timeout=5.0):
    """(status, body) of GET url; the host's address must lie in 127.0.0.0/8 or 198.18.0.0/15."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"only http://host[:port] URLs are served here, not {url!r}")
    port = parts.port or 80
    infos = socket.getaddrinfo(parts.hostname, port, socket.AF_INET, socket.SOCK_STREAM)
    addresses = sorted({info[4][0] for info in infos})
    inside = [a for a in addresses if any(ipaddress.ip_address(a) in net for net in REACHABLE)]
    if not inside:
        raise ValueError(f"{parts.hostname} is {addresses}, outside 127.0.0.0/8 and "
                         "198.18.0.0/15: not reached")
    # The checked address is the one connected to (no second lookup).
    connection = http.client.HTTPConnection(inside[0], port, timeout=timeout)
    try:
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        connection.request("GET", target, headers={"Host": parts.netloc})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def wait_for(what, attempt, seconds):
    """attempt() until it returns true or ``seconds`` pass; says why each failure failed, once."""
    deadline = time.monotonic() + seconds
    last = None
    while True:
        try:
            if attempt():
                say(f"stand-in: reached {what}")
                return True
            reason = "not ready yet"
        except (OSError, ValueError, http.client.HTTPException) as error:
            reason = str(error) or type(error).__name__
        if reason != last:
            say(f"stand-in: {what}: {reason}; trying again")
            last = reason
        if time.monotonic() >= deadline:
            return False
        time.sleep(1)


def serve(port, routes):
    """HTTP on every address at ``port``: routes maps a path to f(query) -> (status, JSON body)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            parts = urllib.parse.urlsplit(self.path)
            route = routes.get(parts.path)
            if route is None:
                status, body = 404, {"error": f"the stand-in serves no {parts.path}"}
            else:
                status, body = route(urllib.parse.parse_qs(parts.query, keep_blank_values=True))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            pass  # the kubelet's probes, every few seconds: not worth a line each

    server = ThreadingHTTPServer(("", port), Handler)
    server.daemon_threads = True
    say(f"stand-in: serving HTTP on port {port}")
    server.serve_forever()


def read_config(path):
    """The workspace names of Monocle's config.yaml; exits 1 when it cannot be read (as Monocle does).
    The first-level ``- name:`` items under ``workspaces:``, read line by line (Debian's python3 has no
    YAML parser): enough to show what was read, not a validation."""
    try:
        with open(path) as file:
            lines = file.read().splitlines()
    except OSError as error:
        say(f"stand-in: cannot read the config {path}: {error}")
        sys.exit(1)
    if "workspaces:" not in [line.rstrip() for line in lines]:
        say(f"stand-in: {path} has no top-level workspaces:")
        sys.exit(1)
    items = [line for line in lines if line.lstrip().startswith("- name:")]
    indent = min((len(line) - len(line.lstrip()) for line in items), default=0)
    names = [line.split(":", 1)[1].strip() for line in items if len(line) - len(line.lstrip()) == indent]
    say(f"stand-in: read {path}: workspaces {', '.join(names) or '(none)'}")
    return names

'''

_ELASTICSEARCH = r"""
STANDS_IN_FOR = "Elasticsearch 7.17 (one node)"
PORT = 9200
DATA = "/usr/share/elasticsearch/data"
STARTING_SECONDS = 1.0
STATUSES = ("red", "yellow", "green")
PARAMETERS = {"wait_for_status", "timeout", "local", "master_timeout", "level", "pretty"}
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0}
started = time.monotonic()


def status():
    # A single node with no index is green once it has started; red before, as a real one is.
    return "green" if time.monotonic() - started >= STARTING_SECONDS else "red"


def seconds(value):
    for unit in sorted(UNITS, key=len, reverse=True):
        if value.endswith(unit) and value[: -len(unit)].isdigit():
            return int(value[: -len(unit)]) * UNITS[unit]
    raise ValueError(value)


def refused(reason):
    return 400, {"error": {"type": "illegal_argument_exception", "reason": reason}, "status": 400}


def cluster_health(query):
    unknown = sorted(set(query) - PARAMETERS)
    if unknown:
        return refused(f"request [/_cluster/health] contains unrecognized parameters: {unknown}")
    wanted = query.get("wait_for_status", [None])[0]
    if wanted is not None and wanted not in STATUSES:
        return refused(f"unknown wait_for_status [{wanted}]")
    if query.get("local", ["false"])[0] not in ("", "true", "false"):
        return refused("local must be true or false")
    try:
        timeout = seconds(query.get("timeout", ["30s"])[0])
    except ValueError as error:
        return refused(f"cannot parse timeout [{error}]")
    deadline = time.monotonic() + timeout
    while wanted is not None and STATUSES.index(status()) < STATUSES.index(wanted):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    now = status()
    timed_out = wanted is not None and STATUSES.index(now) < STATUSES.index(wanted)
    body = {
        "cluster_name": CLUSTER,
        "status": now,
        "timed_out": timed_out,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        "active_primary_shards": 0,
        "active_shards": 0,
        "unassigned_shards": 0,
        "stand_in_for": STANDS_IN_FOR,
    }
    # Elasticsearch answers a wait that timed out with 408 and the health it has.
    return (408 if timed_out else 200), body


def root(query):
    return 200, {"name": NODE, "cluster_name": CLUSTER, "stand_in_for": STANDS_IN_FOR}


def main():
    stop_on_sigterm()
    say(f"STAND-IN for {STANDS_IN_FOR}: serves only / and /_cluster/health on {PORT}, stores nothing; "
        f"uid {os.getuid()}, discovery.type={os.environ.get('discovery.type', '(unset)')}, "
        f"ES_JAVA_OPTS={os.environ.get('ES_JAVA_OPTS', '(unset)')}")
    # Elasticsearch will not start on a data directory it cannot write; neither will this.
    node_file = os.path.join(DATA, "standin-node")
    try:
        earlier = os.path.exists(node_file)
        with open(node_file, "a") as file:
            file.write(f"{time.time():.0f} started as {NODE}\n")
    except OSError as error:
        say(f"stand-in: cannot write the data directory {DATA}: {error}")
        sys.exit(1)
    say(f"stand-in: data in {DATA} ({'kept from an earlier start' if earlier else 'new'})")
    serve(PORT, {"/": root, "/_cluster/health": cluster_health})


NODE = socket.gethostname()
CLUSTER = os.environ.get("cluster.name", "docker-cluster")
main()
"""

_MONOCLE = r"""
STANDS_IN_FOR = "Monocle (its API, crawler and janitor)"
API_PORT = 8080
CRAWLER_HEALTH_PORT = 9001
USAGE = "usage: monocle api | monocle crawler | monocle janitor update-idents --elastic URL --config PATH"


def announce(what):
    say(f"STAND-IN for {STANDS_IN_FOR}: {what}; uid {os.getuid()}")


def elastic_ready(url):
    status, _ = http_get(url.rstrip("/") + "/_cluster/health?wait_for_status=yellow&timeout=2s")
    return status == 200


def health_once(reached, what):
    def health(query):
        return (200, {"status": "ok"}) if reached.is_set() else (503, {"status": f"waiting for {what}"})

    return health


def in_background(what, attempt, reached):
    def run():
        if wait_for(what, attempt, float("inf")):
            reached.set()

    threading.Thread(target=run, daemon=True).start()


def api():
    announce("the API: /health on 8080 once Elasticsearch answers; no data, no web UI")
    read_config(os.environ.get("MONOCLE_CONFIG", "/etc/monocle/config.yaml"))
    if not os.environ.get("CRAWLERS_API_KEY"):
        say("stand-in: CRAWLERS_API_KEY is not set: crawlers could not post")
    elastic = os.environ["MONOCLE_ELASTIC_URL"]
    reached = threading.Event()
    in_background(f"Elasticsearch at {elastic}", lambda: elastic_ready(elastic), reached)
    serve(API_PORT, {"/health": health_once(reached, "Elasticsearch")})


def crawler():
    announce(f"the crawler: /health on {CRAWLER_HEALTH_PORT} once the API answers; fetches nothing")
    read_config(os.environ.get("MONOCLE_CONFIG", "/etc/monocle/config.yaml"))
    api_url = os.environ["MONOCLE_PUBLIC_URL"].rstrip("/")
    reached = threading.Event()
    in_background(f"the API at {api_url}", lambda: http_get(api_url + "/health")[0] == 200, reached)
    serve(CRAWLER_HEALTH_PORT, {"/health": health_once(reached, "the API")})


def update_idents(arguments):
    announce("janitor update-idents: reads the config, reaches Elasticsearch, changes nothing")
    options = dict(zip(arguments[::2], arguments[1::2]))
    if len(arguments) % 2 or set(options) != {"--elastic", "--config"}:
        say(USAGE)
        return 2
    workspaces = read_config(options["--config"])
    elastic = options["--elastic"]
    if not wait_for(f"Elasticsearch at {elastic}", lambda: elastic_ready(elastic), 60):
        say(f"stand-in: Elasticsearch at {elastic} did not answer in a minute")
        return 1
    say(f"stand-in: would re-apply the identities of {', '.join(workspaces) or 'no workspace'}; done")
    return 0


def main(arguments):
    stop_on_sigterm()
    if arguments == ["api"]:
        api()
    elif arguments == ["crawler"]:
        crawler()
    elif arguments[:2] == ["janitor", "update-idents"]:
        sys.exit(update_idents(arguments[2:]))
    else:
        announce(f"unknown command {arguments}")
        say(USAGE)
        sys.exit(2)


main(sys.argv[1:])
"""

ELASTICSEARCH_PROGRAM = _COMMON.replace("__WHAT__", "A stand-in for Elasticsearch 7.17") + _ELASTICSEARCH
MONOCLE_PROGRAM = _COMMON.replace("__WHAT__", "A stand-in for Monocle's monocle program") + _MONOCLE


def _standin(
    settings: ControlPlaneSettings,
    own: str,
    program: str,
    target: str,
    uid: int,
    config: tuple[str, ...],
    run: tuple[str, ...] = (),
) -> str:
    """The image ``own`` with ``program`` at ``target``, as ``uid``: built once per recipe, under a lock
    (another test run on this machine may be building the same one)."""
    buildah = buildah_of(settings)
    base = ensure_base(settings, buildah)
    digest = hashlib.sha256(repr((base, program, target, uid, config, run)).encode()).hexdigest()[:12]
    built = f"{own}-{digest}"
    directory = settings.cache_dir / "standins" / f"{own.rsplit('/', 1)[1].split(':')[0]}-{digest}"

    def build() -> None:
        say(f"building {own}", "nodes")
        source = directory / Path(target).name
        source.write_text(program)
        steps: list[tuple[str, ...]] = [("add", "--chmod", "0755", CONTAINER, str(source), target)]
        if run:
            steps.append(("run", "--isolation", "chroot", CONTAINER, "--", *run))
        steps.append((
            "config", "--user", f"{uid}:0", "--workingdir", "/",
            "--env", "PATH=/usr/local/bin:/usr/bin:/bin", "--env", "PYTHONDONTWRITEBYTECODE=1",
            *config, CONTAINER,
        ))  # fmt: skip
        _commit(buildah, base, built, *steps)

    build_once(directory, lambda: buildah.has_image(built), build)
    return built


def elasticsearch_standin(settings: ControlPlaneSettings | None = None) -> NodeImage:
    """The Elasticsearch stand-in, under the names Monocle's Elasticsearch is asked for by."""
    settings = settings or from_env(ControlPlaneSettings)
    data = "/usr/share/elasticsearch/data"
    built = _standin(
        settings,
        ELASTICSEARCH_STANDIN,
        ELASTICSEARCH_PROGRAM,
        "/usr/share/elasticsearch/bin/elasticsearch-standin",
        ELASTICSEARCH_UID,
        ("--entrypoint", '["/usr/share/elasticsearch/bin/elasticsearch-standin"]', "--cmd", "",
         "--port", "9200"),
        # The data directory as upstream's image has it: the uid's, group 0's, for any uid of group 0.
        ("/usr/bin/install", "-d", "-o", str(ELASTICSEARCH_UID), "-g", "0", "-m", "0775", data),
    )  # fmt: skip
    return NodeImage(
        built,
        (ELASTICSEARCH_STANDIN, *ELASTICSEARCH_NAMES),
        tuple(
            f"{name} is a stand-in for Elasticsearch (one node serving /_cluster/health, storing nothing)"
            for name in ELASTICSEARCH_NAMES
        ),
    )


def monocle_standin(settings: ControlPlaneSettings | None = None) -> NodeImage:
    """The Monocle stand-in, under the names Monocle's image is asked for by."""
    settings = settings or from_env(ControlPlaneSettings)
    built = _standin(
        settings,
        MONOCLE_STANDIN,
        MONOCLE_PROGRAM,
        "/usr/local/bin/monocle",
        MONOCLE_UID,
        ("--cmd", '["monocle", "api"]', "--port", "8080"),
    )
    return NodeImage(
        built,
        (MONOCLE_STANDIN, *MONOCLE_NAMES),
        tuple(
            f"{name} is a stand-in for Monocle (its API and crawler answer /health; "
            "update-idents reaches Elasticsearch and changes nothing)"
            for name in MONOCLE_NAMES
        ),
    )


def monocle_standins(settings: ControlPlaneSettings | None = None) -> list[NodeImage]:
    """Both stand-ins: what a cluster needs loaded to run a Monocle instance."""
    return [elasticsearch_standin(settings), monocle_standin(settings)]
