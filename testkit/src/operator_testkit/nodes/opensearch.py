"""A real search engine for Monocle on the nodes: OpenSearch 2.19.6, built here from Maven Central's jars
on Debian bookworm's OpenJDK 17 (no distribution archive is downloaded, none is served here).

The recipe is the one ``docs/research/opensearch-from-maven.md`` records: the server and its runtime
dependencies in ``lib/``, four modules (HTTP and transport, the common analysers, painless, and
reindex for ``_delete_by_query``) with the descriptors and security policies their jars do not
carry, and ``java`` started as the distribution's launcher would start it. The image runs as
upstream's does, as uid 1000 of group 0 from ``/usr/share/opensearch``, and its entrypoint takes what
users configure upstream's image by: environment variables with a dot in their name as settings
(``discovery.type=single-node``), and ``OPENSEARCH_JAVA_OPTS`` for the JVM. It is also loaded under
the Elasticsearch names the Monocle operator's defaults ask for, since OpenSearch answers
Elasticsearch 7's API (its ``/`` reports 7.10.2); under those names it reads ``ES_JAVA_OPTS`` too,
and ``/usr/share/elasticsearch`` is the same directory.
What it lacks beside upstream's image: the security plugin and every other optional plugin.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, say
from operator_testkit.errors import ControlPlaneError
from operator_testkit.image import buildah_of, debian_image
from operator_testkit.nodes.images import CONTAINER, NodeImage, _commit
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "ELASTICSEARCH_NAMES",
    "OPENSEARCH_HOME",
    "OPENSEARCH_IMAGE",
    "OPENSEARCH_NAMES",
    "OPENSEARCH_UID",
    "OPENSEARCH_VERSION",
    "opensearch_image",
]

OPENSEARCH_VERSION = "2.19.6"
OPENSEARCH_IMAGE = f"localhost/operator-suite-opensearch:{OPENSEARCH_VERSION}"
OPENSEARCH_NAMES = (f"opensearchproject/opensearch:{OPENSEARCH_VERSION}",)
ELASTICSEARCH_NAMES = tuple(
    f"docker.elastic.co/elasticsearch/elasticsearch:{tag}" for tag in ("7.17.5", "7.17.10")
)
"""The Monocle operator's default Elasticsearch (7.17.5) and the version its tests bump to."""
OPENSEARCH_HOME = "/usr/share/opensearch"
OPENSEARCH_UID = 1000
"""Upstream's images (OpenSearch's and Elasticsearch's) run as 1000, group 0."""

_JAVA_PACKAGES = ("openjdk-17-jre-headless",)
_JAVA_HOOKS = ('--essential-hook=mkdir -p "$1/usr/share/man/man1"',)
"""The JRE's post-install links its manual page into man1, which a root without manuals lacks."""
_LOG4J_CORE = "2.25.4"
"""log4j-core, which the server's pom marks optional and which it needs to run: the version resolved
beside 2.19.6's log4j-api in the research."""
_MAVEN_TIMEOUT = 600

# Each group of jars, from its own Maven run: a module's jar already in lib/ is left out of it.
_SERVER = [
    ("org.opensearch", "opensearch", OPENSEARCH_VERSION),
    ("org.opensearch", "opensearch-plugin-classloader", OPENSEARCH_VERSION),
    ("org.apache.logging.log4j", "log4j-core", _LOG4J_CORE),
    ("org.locationtech.spatial4j", "spatial4j", "0.7"),
    ("org.locationtech.jts", "jts-core", "1.15.0"),
]
_MODULES = {
    # directory: (artifact, plugin class, description, the module it extends)
    "transport-netty4": (
        "transport-netty4-client",
        "org.opensearch.transport.Netty4Plugin",
        "Netty 4 HTTP and transport",
        "",
    ),
    "lang-painless": ("lang-painless", "org.opensearch.painless.PainlessPlugin", "Painless scripting", ""),
    # _delete_by_query, _update_by_query and _reindex (Monocle's janitor deletes a crawler's data so).
    "reindex": (
        "reindex-client",
        "org.opensearch.index.reindex.ReindexPlugin",
        "Reindex, update and delete by query",
        "",
    ),
    # analysis-common registers a painless extension, so it extends lang-painless.
    "analysis-common": (
        "analysis-common",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "Common analysers, tokenizers and filters",
        "lang-painless",
    ),
}
# The security manager is always on in 2.x, and a module's code has only the default grants without
# a policy: painless cannot make its script class loaders, and netty says it started while it refuses
# every connection (its executor cannot start a thread).
_POLICIES = {
    "lang-painless": """grant {
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.lang.RuntimePermission "createClassLoader";
};
""",
    # A reindex from a remote engine connects to it.
    "reindex": """grant {
  permission java.net.SocketPermission "*", "connect";
};
""",
    "transport-netty4": """grant {
  permission java.net.SocketPermission "*", "accept,connect";
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.lang.RuntimePermission "setContextClassLoader";
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
""",
}
_OPENSEARCH_YML = f"""# written by operator_testkit.nodes.opensearch
cluster.name: docker-cluster
network.host: 0.0.0.0
path.data: {OPENSEARCH_HOME}/data
path.logs: {OPENSEARCH_HOME}/logs
# What an Elasticsearch 7 client such as Monocle's checks: / reports 7.10.2.
compatibility.override_main_response_version: true
"""
# The distribution's defaults that matter in a container; the heap is the entrypoint's to set.
_JVM_OPTIONS = """-XX:+UseG1GC
-Dfile.encoding=UTF-8
-Djava.io.tmpdir=/tmp
-Djna.nosys=true
-XX:-OmitStackTraceInFastThrow
-Dio.netty.noUnsafe=true
-Dio.netty.noKeySetOptimization=true
-Dio.netty.recycler.maxCapacityPerThread=0
-Dio.netty.allocator.numDirectArenas=0
-Xss1m
-Djava.awt.headless=true
-XX:+ShowCodeDetailsInExceptionMessages
-Dopensearch.networkaddress.cache.ttl=60
-Dopensearch.networkaddress.cache.negative.ttl=10
-Dlog4j.shutdownHookEnabled=false
-Dlog4j2.disable.jmx=true
-Djava.locale.providers=SPI,COMPAT
-XX:+ExitOnOutOfMemoryError
"""
# The container's log is its standard output, as upstream's image has it.
_LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""
_ENTRYPOINT = f"""#!/bin/bash
# OpenSearch {OPENSEARCH_VERSION} from Maven Central's jars (operator_testkit.nodes.opensearch), started as
# upstream's image starts it: every environment variable with a dot in its name is a setting, and
# OPENSEARCH_JAVA_OPTS (or ES_JAVA_OPTS, under the Elasticsearch names) comes after the defaults.
set -euo pipefail
home={OPENSEARCH_HOME}
settings=()
while IFS='=' read -r -d '' name value; do
  if [[ $name =~ ^[a-z0-9_]+\\.[a-z0-9_.]+$ ]]; then settings+=("-E$name=$value"); fi
done < <(env -0)
if [[ ${{DISABLE_SECURITY_PLUGIN:-}} == true ]]; then
  echo "this image has no security plugin: DISABLE_SECURITY_PLUGIN changes nothing"
fi
mapfile -t defaults < <(grep -v -e '^#' -e '^$' "$home/config/jvm.options")
# shellcheck disable=SC2206 # the options are words, as the launcher splits them
extra=(${{OPENSEARCH_JAVA_OPTS:-}} ${{ES_JAVA_OPTS:-}})
echo "OpenSearch {OPENSEARCH_VERSION} from Maven Central's jars on $(java -version 2>&1 | head -n 1)," \\
  "as uid $(id -u); settings from the environment: ${{settings[*]:-(none)}}"
exec java -Xms1g -Xmx1g "${{defaults[@]}}" "${{extra[@]}}" \\
  -Dopensearch.path.home="$home" -Dopensearch.path.conf="$home/config" \\
  -Dopensearch.distribution.type=docker -Dopensearch.bundled_jdk=false \\
  -cp "$home/lib/*" org.opensearch.bootstrap.OpenSearch "${{settings[@]}}" "$@"
"""


def _pom(jars: list[tuple[str, str, str]]) -> str:
    dependencies = "".join(
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
        for group, artifact, version in jars
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>operator-suite.testkit</groupId><artifactId>opensearch-jars</artifactId>"
        f"<version>1</version><packaging>pom</packaging><dependencies>{dependencies}</dependencies>"
        "</project>\n"
    )


def _copy_dependencies(jars: list[tuple[str, str, str]], into: Path, work: Path, repository: Path) -> None:
    """The jars and their runtime dependencies from Maven Central, by Maven's own resolver."""
    maven = shutil.which("mvn")
    if maven is None:
        raise ControlPlaneError(
            "the OpenSearch image's jars come by Maven: apt-get install maven (make does)"
        )
    pom = work / f"{into.name}.pom.xml"
    pom.write_text(_pom(jars))
    log = work / f"{into.name}.maven.log"
    with log.open("w") as out:
        done = subprocess.run(
            [
                maven, "-B", "-q", "-Dstyle.color=never", "-f", str(pom),
                f"-Dmaven.repo.local={repository}", "dependency:copy-dependencies",
                "-DincludeScope=runtime", f"-DoutputDirectory={into}",
            ],
            stdout=out, stderr=out, timeout=_MAVEN_TIMEOUT, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise ControlPlaneError(
            f"Maven could not resolve OpenSearch's jars (the whole log is {log}):\n{tail}"
        )


def _descriptor(name: str, classname: str, description: str, extended: str) -> str:
    return (
        f"description={description}\nversion={OPENSEARCH_VERSION}\nname={name}\nclassname={classname}\n"
        f"java.version=11\nopensearch.version={OPENSEARCH_VERSION}\nextended.plugins={extended}\n"
        "has.native.controller=false\n"
    )


def _layout(home: Path, work: Path, repository: Path) -> None:
    """``home`` as the distribution lays it out: lib/, modules/, config/ and the entrypoint in bin/."""
    server = home / "lib"
    _copy_dependencies(_SERVER, server, work, repository)
    for name, (artifact, classname, description, extended) in _MODULES.items():
        resolved = work / name
        _copy_dependencies(
            [("org.opensearch.plugin", artifact, OPENSEARCH_VERSION)], resolved, work, repository
        )
        module = home / "modules" / name
        module.mkdir(parents=True)
        for jar in resolved.glob("*.jar"):
            if not (server / jar.name).exists():  # a jar twice on the class path is jar hell
                shutil.copy2(jar, module / jar.name)
        (module / "plugin-descriptor.properties").write_text(
            _descriptor(name, classname, description, extended)
        )
        if name in _POLICIES:
            (module / "plugin-security.policy").write_text(_POLICIES[name])
    config = home / "config"
    config.mkdir()
    (config / "opensearch.yml").write_text(_OPENSEARCH_YML)
    (config / "jvm.options").write_text(_JVM_OPTIONS)
    (config / "log4j2.properties").write_text(_LOG4J2)
    for empty in ("plugins", "data", "logs", "bin"):
        (home / empty).mkdir()
    entrypoint = home / "bin" / "opensearch-docker-entrypoint.sh"
    entrypoint.write_text(_ENTRYPOINT)
    entrypoint.chmod(0o755)


def opensearch_image(settings: ControlPlaneSettings | None = None) -> NodeImage:
    """OpenSearch 2.19.6 on Debian's OpenJDK 17, under its own name, upstream's, and the Elasticsearch
    names Monocle's operator asks for; built once per recipe, under a lock."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    root = debian_image(
        settings, buildah, "localhost/operator-suite-java", _JAVA_PACKAGES, "java", _JAVA_HOOKS
    )
    recipe = (root, _SERVER, _MODULES, _POLICIES, _OPENSEARCH_YML, _JVM_OPTIONS, _LOG4J2, _ENTRYPOINT)
    digest = hashlib.sha256(repr(recipe).encode()).hexdigest()[:12]
    built = f"{OPENSEARCH_IMAGE}-{digest}"
    directory = settings.cache_dir / f"opensearch-{OPENSEARCH_VERSION}-{digest}"

    def build() -> None:
        say(f"building {OPENSEARCH_IMAGE} from Maven Central's jars", "nodes")
        home = directory / "home"
        shutil.rmtree(home, ignore_errors=True)
        work = directory / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        _layout(home, work, settings.cache_dir / "maven-repository")
        owner = f"{OPENSEARCH_UID}:0"
        prepare = (
            f"useradd --uid {OPENSEARCH_UID} --gid 0 --home-dir {OPENSEARCH_HOME} --no-create-home opensearch"
            f" && chown -R {owner} {OPENSEARCH_HOME} && chmod -R g=u {OPENSEARCH_HOME}"
            f" && ln -s {OPENSEARCH_HOME} /usr/share/elasticsearch"
        )
        _commit(
            buildah,
            root,
            built,
            ("add", CONTAINER, str(home), OPENSEARCH_HOME),
            ("run", "--isolation", "chroot", CONTAINER, "--", "/bin/sh", "-c", prepare),
            (
                "config", "--user", f"{OPENSEARCH_UID}:0", "--workingdir", OPENSEARCH_HOME,
                "--entrypoint", f'["{OPENSEARCH_HOME}/bin/opensearch-docker-entrypoint.sh"]', "--cmd", "",
                "--port", "9200", "--port", "9300", CONTAINER,
            ),
        )  # fmt: skip

    build_once(directory, lambda: buildah.has_image(built), build)
    said = (
        f"OpenSearch {OPENSEARCH_VERSION} (built from Maven Central's jars; it answers Elasticsearch 7's API)"
    )
    return NodeImage(
        built,
        (OPENSEARCH_IMAGE, *OPENSEARCH_NAMES, *ELASTICSEARCH_NAMES),
        tuple(f"{name} is {said}" for name in (*OPENSEARCH_NAMES, *ELASTICSEARCH_NAMES)),
    )
