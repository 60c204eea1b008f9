"""A stand-in image for what cannot be had here: Monocle itself (its API, its crawler and its janitor).
No registry is reached and Monocle's Haskell program cannot be built here, so ``monocle`` is a small
Python program on the suite's Debian base, loaded under the names the Monocle operator's defaults, its
samples and its tests ask for, and saying on its first line that it is a stand-in. Monocle's search
engine is real: OpenSearch (:mod:`operator_testkit.nodes.opensearch`), and what the stand-in does to it
is real index operations, which a test reads back from the engine.

===========================================  ===================================================
image (loaded as)                            stands in for, and what it does
===========================================  ===================================================
localhost/operator-suite-monocle-standin:1   Monocle's one program, ``monocle``: ``api`` creates
(quay.io/change-metrics/monocle:1.8.0 and    each workspace's index (``monocle.changes.1.<name>``,
1.9.0)                                       as Monocle's API does at its start) and serves
                                             ``/health`` on 8080, 200 once they exist;
                                             ``crawler`` serves ``/health`` on 9001, 200 once it
                                             has reached the API; ``janitor`` takes
                                             Monocle's flags (``--elastic``, ``--config``,
                                             ``--workspace``, ``--crawler-name``,
                                             ``--commit-date``): ``update-idents`` counts each
                                             workspace's documents, ``wipe-crawler-data``
                                             deletes those whose ``crawler_name`` is the
                                             crawler, ``set-crawler-commit-date`` writes the
                                             document ``crawler-<name>`` with the date; each
                                             records its run in ``monocle.janitor`` and exits
                                             0 (1 when it cannot reach the engine in a
                                             minute); each reads its config.yaml and fails
                                             without one; runs as uid 1001
===========================================  ===================================================

What it does not imitate: no change, event or identity is fetched or rewritten as Monocle would (its
janitor's index operations are simple ones of its own, on the real engine); no web UI; the crawler
fetches nothing from anywhere. It proves the operator's side: the pods it asks for start under its
security contexts (non-root, read-only root filesystem), its probes pass, its volumes and Services
connect the components to the engine, and its update-idents Job runs to completion against it.

The program resolves a peer's name and connects to the address only if it lies in 127.0.0.0/8 or
198.18.0.0/15 (the pods', Services' and nodes' ranges): nothing it sends can leave the machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, say
from operator_testkit.image import buildah_of, ensure_base
from operator_testkit.nodes.images import CONTAINER, NodeImage, _commit
from operator_testkit.nodes.opensearch import opensearch_image
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "MONOCLE_NAMES",
    "MONOCLE_STANDIN",
    "monocle_images",
    "monocle_standin",
]

MONOCLE_STANDIN = "localhost/operator-suite-monocle-standin:1"
MONOCLE_NAMES = tuple(f"quay.io/change-metrics/monocle:{tag}" for tag in ("1.8.0", "1.9.0"))
"""The Monocle operator's default (1.8.0) and the version its tests bump to."""

MONOCLE_UID = 1001
"""The uid the operator runs Monocle's pods as."""

# Saying things, stopping on SIGTERM, reaching a peer only inside the machine's ranges, and answering
# HTTP with JSON. Python 3.11's standard library only (Debian's).
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


def http_request(method, url, body=None, timeout=5.0):
    """(status, body) of a request with an optional JSON body; the host's address must lie in
    127.0.0.0/8 or 198.18.0.0/15."""
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
        headers = {"Host": parts.netloc}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection.request(method, target, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def http_get(url, timeout=5.0):
    return http_request("GET", url, timeout=timeout)


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

_MONOCLE = r"""
STANDS_IN_FOR = "Monocle (its API, crawler and janitor)"
API_PORT = 8080
CRAWLER_HEALTH_PORT = 9001
INDEX_PREFIX = "monocle.changes.1."
JANITOR_INDEX = "monocle.janitor"
USAGE = (
    "usage: monocle api | monocle crawler | monocle janitor update-idents|wipe-crawler-data|"
    "set-crawler-commit-date --elastic URL --config PATH [--workspace W] [--crawler-name C] "
    "[--commit-date D]"
)


def announce(what):
    say(f"STAND-IN for {STANDS_IN_FOR}: {what}; uid {os.getuid()}")


def elastic_ready(url):
    status, _ = http_get(url.rstrip("/") + "/_cluster/health?wait_for_status=yellow&timeout=2s")
    return status == 200


def ensure_indices(url, workspaces):
    # Each workspace's index, as Monocle's API makes it at its start (a 400 "already exists" is
    # fine); true once all exist.
    for workspace in workspaces:
        index = INDEX_PREFIX + workspace
        status, body = http_request("PUT", f"{url.rstrip('/')}/{index}", {"settings": {"index": {
            "number_of_shards": 1, "number_of_replicas": 0, "max_regex_length": 50000}}})
        if status == 200:
            say(f"stand-in: created the index {index}")
        elif not (status == 400 and b"resource_already_exists_exception" in body):
            raise ValueError(f"creating {index}: HTTP {status} {body[:200]!r}")
    return True


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
    announce("the API: makes each workspace's index, then /health on 8080; no web UI")
    workspaces = read_config(os.environ.get("MONOCLE_CONFIG", "/etc/monocle/config.yaml"))
    if not os.environ.get("CRAWLERS_API_KEY"):
        say("stand-in: CRAWLERS_API_KEY is not set: crawlers could not post")
    elastic = os.environ["MONOCLE_ELASTIC_URL"]
    reached = threading.Event()
    in_background(
        f"Elasticsearch at {elastic}",
        lambda: elastic_ready(elastic) and ensure_indices(elastic, workspaces),
        reached,
    )
    serve(API_PORT, {"/health": health_once(reached, "Elasticsearch")})


def crawler():
    announce(f"the crawler: /health on {CRAWLER_HEALTH_PORT} once the API answers; fetches nothing")
    read_config(os.environ.get("MONOCLE_CONFIG", "/etc/monocle/config.yaml"))
    api_url = os.environ["MONOCLE_PUBLIC_URL"].rstrip("/")
    reached = threading.Event()
    in_background(f"the API at {api_url}", lambda: http_get(api_url + "/health")[0] == 200, reached)
    serve(CRAWLER_HEALTH_PORT, {"/health": health_once(reached, "the API")})


def count(url, index):
    status, body = http_get(f"{url.rstrip('/')}/{index}/_count")
    return json.loads(body)["count"] if status == 200 else 0


class Refused(Exception):
    # A janitor command that cannot go on: the code it exits with (2: usage, 1: the engine).
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def janitor_start(arguments, required, optional=()):
    # The --flag value pairs, as Monocle's CLI takes them, the config's workspaces and the engine's
    # URL, once the engine answers.
    options = dict(zip(arguments[::2], arguments[1::2]))
    unknown = set(options) - set(required) - set(optional)
    if len(arguments) % 2 or not set(required) <= set(options) or unknown:
        say(USAGE)
        raise Refused(2)
    workspaces = read_config(options["--config"])
    elastic = options["--elastic"].rstrip("/")
    if not wait_for(f"Elasticsearch at {elastic}", lambda: elastic_ready(elastic), 60):
        say(f"stand-in: Elasticsearch at {elastic} did not answer in a minute")
        raise Refused(1)
    return options, workspaces, elastic


def done(elastic, command, said, **facts):
    # The run recorded in the engine, then said: 0, or 1 when it could not be recorded.
    body = {"command": command, **facts, "at": int(time.time())}
    status, answer = http_request("POST", f"{elastic}/{JANITOR_INDEX}/_doc?refresh=true", body)
    if status not in (200, 201):
        say(f"stand-in: could not record the run in {JANITOR_INDEX}: HTTP {status} {answer[:200]!r}")
        return 1
    say(f"stand-in: {said}; recorded in {JANITOR_INDEX}; done")
    return 0


def update_idents(arguments):
    announce("janitor update-idents: counts each workspace's documents and records its run")
    options, workspaces, elastic = janitor_start(arguments, ("--elastic", "--config"), ("--workspace",))
    if "--workspace" in options:
        workspaces = [w for w in workspaces if w == options["--workspace"]]
    counts = {workspace: count(elastic, INDEX_PREFIX + workspace) for workspace in workspaces}
    return done(elastic, "update-idents", f"documents per workspace {counts}", workspaces=counts)


CRAWLER = ("--elastic", "--config", "--workspace", "--crawler-name")


def wipe_crawler_data(arguments):
    announce("janitor wipe-crawler-data: deletes the documents of a crawler in a workspace")
    options, _, elastic = janitor_start(arguments, CRAWLER)
    index, crawler = INDEX_PREFIX + options["--workspace"], options["--crawler-name"]
    query = {"query": {"term": {"crawler_name": crawler}}}
    status, body = http_request("POST", f"{elastic}/{index}/_delete_by_query?refresh=true", query)
    if status != 200:
        say(f"stand-in: deleting {crawler}'s documents in {index}: HTTP {status} {body[:200]!r}")
        return 1
    deleted = json.loads(body).get("deleted", 0)
    said = f"deleted {deleted} documents of {crawler} in {index}"
    return done(elastic, "wipe-crawler-data", said, workspace=options["--workspace"], crawler=crawler)


def set_crawler_commit_date(arguments):
    announce("janitor set-crawler-commit-date: writes a crawler's commit date in its workspace")
    options, _, elastic = janitor_start(arguments, (*CRAWLER, "--commit-date"))
    index, crawler = INDEX_PREFIX + options["--workspace"], options["--crawler-name"]
    date = options["--commit-date"]
    document = {"crawler_metadata": {"crawler": crawler, "last_commit_at": date}}
    status, body = http_request("PUT", f"{elastic}/{index}/_doc/crawler-{crawler}?refresh=true", document)
    if status not in (200, 201):
        say(f"stand-in: writing {crawler}'s commit date in {index}: HTTP {status} {body[:200]!r}")
        return 1
    said = f"{crawler} in {index} fetches from {date} again"
    return done(elastic, "set-crawler-commit-date", said, workspace=options["--workspace"], crawler=crawler)


JANITOR = {
    "update-idents": update_idents,
    "wipe-crawler-data": wipe_crawler_data,
    "set-crawler-commit-date": set_crawler_commit_date,
}


def main(arguments):
    stop_on_sigterm()
    if arguments == ["api"]:
        api()
    elif arguments == ["crawler"]:
        crawler()
    elif arguments[:1] == ["janitor"] and len(arguments) > 1 and arguments[1] in JANITOR:
        try:
            sys.exit(JANITOR[arguments[1]](arguments[2:]))
        except Refused as refused:
            sys.exit(refused.code)
    else:
        announce(f"unknown command {arguments}")
        say(USAGE)
        sys.exit(2)


main(sys.argv[1:])
"""

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
            f"{name} is a stand-in for Monocle (its API makes the workspaces' indices in the real "
            "engine; update-idents counts their documents and records its run there)"
            for name in MONOCLE_NAMES
        ),
    )


def monocle_images(settings: ControlPlaneSettings | None = None) -> list[NodeImage]:
    """What a cluster needs loaded to run a Monocle instance: the real engine and the Monocle stand-in."""
    return [opensearch_image(settings), monocle_standin(settings)]
