#!/usr/bin/env bash
# Build and run a single-node OpenSearch 2.19.6 from Maven Central jars only.
# Usage: ./opensearch.sh {resolve|layout|start|wait|verify|stop|all|clean}
set -euo pipefail

R=/tmp/opensearch-research
V=2.19.6
HOME_DIR=$R/home                 # OPENSEARCH_HOME
CONF=$HOME_DIR/config
DATA=$R/data
LOGS=$R/logs
JARS=$R/jars                     # raw copy-dependencies output
M2=${M2_REPO:-$R/m2repo}         # separate local repo => cold resolution is measurable
HTTP_PORT=${HTTP_PORT:-19200}
TRANSPORT_PORT=${TRANSPORT_PORT:-19300}
RUN_USER=${RUN_USER:-nobody}     # OpenSearch refuses to run as root
PIDFILE=$R/opensearch.pid

mvn_copy() { # profile outdir
  mvn -q -B -Dstyle.color=never -f "$R/pom.xml" -Dmaven.repo.local="$M2" -P"$1" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$2" | sed "s/\x1b\[0m//g"
}

resolve() {
  rm -rf "$JARS"; mkdir -p "$JARS"
  local t0=$(date +%s.%N)
  for p in lib transport-netty4 analysis-common lang-painless; do mvn_copy "$p" "$JARS/$p"; done
  local t1=$(date +%s.%N)
  echo "resolve: $(echo "$t1 - $t0" | bc) s"
}

descriptor() { # dir name classname description extended
  cat > "$1/plugin-descriptor.properties" <<EOF
description=$4
version=$V
name=$2
classname=$3
java.version=11
opensearch.version=$V
extended.plugins=$5
has.native.controller=false
EOF
}

layout() {
  rm -rf "$HOME_DIR"
  mkdir -p "$HOME_DIR"/{lib,modules,plugins,config,bin} "$DATA" "$LOGS"
  cp "$JARS"/lib/*.jar "$HOME_DIR/lib/"
  for m in transport-netty4 analysis-common lang-painless; do
    mkdir -p "$HOME_DIR/modules/$m"
    for j in "$JARS/$m"/*.jar; do
      # anything already on the server classpath must not be repeated in a module (jar hell)
      [ -e "$HOME_DIR/lib/$(basename "$j")" ] || cp "$j" "$HOME_DIR/modules/$m/"
    done
  done
  descriptor "$HOME_DIR/modules/transport-netty4" transport-netty4 org.opensearch.transport.Netty4Plugin \
    "Netty 4 HTTP and transport layer" ""
  descriptor "$HOME_DIR/modules/analysis-common" analysis-common org.opensearch.analysis.common.CommonAnalysisPlugin \
    "Common analyzers, tokenizers and filters" "lang-painless"
  descriptor "$HOME_DIR/modules/lang-painless" lang-painless org.opensearch.painless.PainlessPlugin \
    "Painless scripting language" ""
  write_policies
  write_config
  chown -R "$RUN_USER" "$DATA" "$LOGS" "$CONF"
}

write_policies() {
  # The security manager is always on in 2.x; module code gets only the default grants
  # unless its directory has a plugin-security.policy.
  cat > "$HOME_DIR/modules/lang-painless/plugin-security.policy" <<'POL'
grant {
  // whitelist loading in the painless SPI, and the per-script class loader
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.lang.RuntimePermission "createClassLoader";
};
POL
  cat > "$HOME_DIR/modules/transport-netty4/plugin-security.policy" <<'POL'
grant {
  // netty accepts HTTP/transport connections and opens outbound transport connections
  permission java.net.SocketPermission "*", "accept,connect";
  // netty reads the kernel's listen backlog
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  // netty's GlobalEventExecutor reads and sets its thread's context class loader; without
  // getClassLoader, promise listeners are never notified and shutdown hangs forever
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.lang.RuntimePermission "setContextClassLoader";
  // NIO selector provider workaround property written by netty
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
POL
}

write_config() {
  cat > "$CONF/opensearch.yml" <<EOF
cluster.name: research
node.name: node-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $HTTP_PORT
transport.port: $TRANSPORT_PORT
path.data: $DATA
path.logs: $LOGS
compatibility.override_main_response_version: true
EOF
  cat > "$CONF/jvm.options" <<EOF
# read by opensearch.sh (java itself never reads this file); one JVM flag per line
-Xms512m
-Xmx512m
-XX:+UseG1GC
-Dfile.encoding=UTF-8
-Djava.io.tmpdir=$R/tmp
-Djna.nosys=true
-Djna.tmpdir=$R/tmp
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
-Djava.security.manager=allow
EOF
  cat > "$CONF/log4j2.properties" <<'EOF'
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601}] %-5p %c{1.} [%node_name] %m%n
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:opensearch.logs.base_path}${sys:file.separator}${sys:opensearch.logs.cluster_name}.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601}] %-5p %c{1.} [%node_name] %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
rootLogger.appenderRef.file.ref = file
EOF
}

java_cmd() { # fills array JAVA_CMD
  mkdir -p "$R/tmp"; chown "$RUN_USER" "$R/tmp"
  local -a opts; mapfile -t opts < <(grep -v '^[[:space:]]*#' "$CONF/jvm.options" | grep -v '^[[:space:]]*$')
  JAVA_CMD=(java "${opts[@]}"
    -Dopensearch.path.home="$HOME_DIR" -Dopensearch.path.conf="$CONF"
    -Dopensearch.distribution.type=tar -Dopensearch.bundled_jdk=false
    -cp "$HOME_DIR/lib/*" org.opensearch.bootstrap.OpenSearch)
}

start() {
  java_cmd
  printf '%q ' "${JAVA_CMD[@]}" > "$R/last-command.txt"; echo >> "$R/last-command.txt"
  date +%s.%N > "$R/start-time"
  # drop root: OpenSearch aborts with "can not run opensearch as root"
  setsid setpriv --reuid="$RUN_USER" --regid=nogroup --clear-groups -- "${JAVA_CMD[@]}" > "$R/console.log" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  echo "started pid $(cat "$PIDFILE")"
}

wait_http() {
  local t0; t0=$(cat "$R/start-time")
  for i in $(seq 1 1200); do
    if curl -s -o /dev/null "127.0.0.1:$HTTP_PORT/"; then
      echo "http up after $(echo "$(date +%s.%N) - $t0" | bc) s; RSS now $(ps -o rss= -p "$(cat "$PIDFILE")") KiB"; return 0; fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { echo "process died"; tail -50 "$R/console.log"; return 1; }
    sleep 0.1
  done
  echo "timeout"; return 1
}

verify() {
  local u=127.0.0.1:$HTTP_PORT
  set -x
  curl -s "$u/"
  curl -s "$u/_cluster/health?pretty"
  curl -s -XPUT "$u/research-idx" -H 'Content-Type: application/json' \
    -d '{"settings":{"number_of_shards":1,"number_of_replicas":0}}'; echo
  curl -s -XPUT "$u/research-idx/_doc/1" -H 'Content-Type: application/json' -d '{"title":"hello opensearch","n":1}'; echo
  curl -s -XPUT "$u/research-idx/_doc/2?refresh=true" -H 'Content-Type: application/json' -d '{"title":"hello maven central","n":2}'; echo
  curl -s "$u/research-idx/_search?pretty" -H 'Content-Type: application/json' -d '{"query":{"match":{"title":"hello"}}}'
  # exercises lang-painless
  curl -s "$u/research-idx/_search?pretty" -H 'Content-Type: application/json' \
    -d '{"query":{"match_all":{}},"script_fields":{"twice":{"script":{"lang":"painless","source":"doc[\"n\"].value * 2"}}}}'
  # exercises analysis-common (a filter that is only in that module)
  curl -s "$u/_analyze?pretty" -H 'Content-Type: application/json' -d '{"tokenizer":"whitespace","filter":["lowercase","reverse"],"text":"Hello World"}'
  curl -s "$u/_cat/indices?v"
  curl -s "$u/_cat/plugins?v"
  set +x
  local pid; pid=$(pgrep -P "$(cat "$PIDFILE")" java || cat "$PIDFILE")
  echo "RSS: $(ps -o rss= -p "$pid") KiB (pid $pid)"
}

stop() {
  [ -f "$PIDFILE" ] || return 0
  local pid; pid=$(cat "$PIDFILE")
  kill "$pid" 2>/dev/null || true
  local t0; t0=$(date +%s.%N)
  for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "pid $pid ignored SIGTERM for 30 s; SIGKILL"; kill -9 "$pid"; sleep 1; fi
  rm -f "$PIDFILE"; echo "stopped pid $pid after $(echo "$(date +%s.%N) - $t0" | bc) s"
}

case "${1:-all}" in
  resolve) resolve ;;
  layout) layout ;;
  start) start ;;
  wait) wait_http ;;
  verify) verify ;;
  stop) stop ;;
  clean) stop; rm -rf "$HOME_DIR" "$DATA" "$LOGS" "$R/tmp" ;;
  all) resolve; layout; start; wait_http; verify ;;
  *) echo "usage: $0 {resolve|layout|start|wait|verify|stop|all|clean}"; exit 2 ;;
esac
