#!/bin/bash
# Runs a real Kafka 4.4.0 (KRaft, combined broker+controller, one node) behind Brook's command line,
# `serve --config FILE`, printing the same READY line. Given as -Dbrook.bin, it lets the tests that start,
# stop and kill brokers run against Kafka. Needs KAFKA_LIB, a directory holding the Kafka server jars
# (see ../README.md). Restarts reuse the port, the controller port and log.dirs. `--override key=value`
# arguments after the config file (as the Rust harness passes them) are added to Kafka's properties, so the
# librdkafka suites can run against Kafka too: BROOK_BIN=$PWD/protocol-tests/java/scripts/kafka-as-brook.sh.
set -e
: "${KAFKA_LIB:?set KAFKA_LIB to a directory of Kafka server jars}"
CP="$KAFKA_LIB/*"
cfg="$3"
shift 3
overrides=()
while [ $# -gt 0 ]; do
  [ "$1" = --override ] && overrides+=("$2")
  shift 2
done
get() { grep -E "^$1=" "$cfg" | tail -1 | cut -d= -f2-; }
logdirs=$(get log.dirs); listeners=$(get listeners); port=${listeners##*:}
np=$(get num.partitions); ac=$(get auto.create.topics.enable)
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
[ "$port" = "0" ] && port=$(free)
base=$(dirname "$logdirs")
[ -f "$base/ctrl.port" ] || free > "$base/ctrl.port"
cport=$(cat "$base/ctrl.port")
# A SASL_PLAINTEXT listener in the config (the SASL tests) gets a port of its own, kept across restarts.
sasl_listener=""; sasl_advertised=""; sasl_map=""; sasl_ready=""
if { get listeners; printf '%s\n' "${overrides[@]}" | grep '^listeners='; } | grep -q 'SASL_PLAINTEXT://'; then
  [ -f "$base/sasl.port" ] || free > "$base/sasl.port"
  sport=$(cat "$base/sasl.port")
  sasl_listener=",SASL_PLAINTEXT://127.0.0.1:$sport"
  sasl_advertised=",SASL_PLAINTEXT://127.0.0.1:$sport"
  sasl_map=",SASL_PLAINTEXT:SASL_PLAINTEXT"
  sasl_ready=" listeners=PLAINTEXT://127.0.0.1:PORT,SASL_PLAINTEXT://127.0.0.1:$sport"
fi
props="$base/kafka.properties"
cat > "$props" <<P
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port$sasl_listener,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port$sasl_advertised
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$sasl_map
log.dirs=$logdirs
num.partitions=$np
auto.create.topics.enable=$ac
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
P
grep -vE '^(#|node.id|listeners|log.dirs|num.partitions|auto.create.topics.enable)' "$cfg" >> "$props" || true
# The listeners are the script's own (above); other overrides are added as given.
for o in "${overrides[@]}"; do case "$o" in listeners=*) ;; *) echo "$o" >> "$props" ;; esac; done
# Kafka refuses a group.consumer.heartbeat.interval.ms below group.consumer.min.heartbeat.interval.ms
# (default 5000), a key Brook does not have: lower the minimum with it.
hb=$(get group.consumer.heartbeat.interval.ms)
if [ -n "$hb" ] && [ -z "$(get group.consumer.min.heartbeat.interval.ms)" ] && [ "$hb" -lt 5000 ]; then
  echo "group.consumer.min.heartbeat.interval.ms=$hb" >> "$props"
fi
# A cluster id as Kafka's Uuid.randomUuid makes one (`kafka-storage random-uuid`): 16 random
# bytes, URL-safe base64 without padding, never starting with '-'. In Python rather than a
# second JVM: every test's broker is formatted afresh, and a JVM start costs a second or two.
random_uuid() {
  python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    if not s.startswith("-"):
        print(s)
        break'
}
# Class data sharing (CDS): the first clean exit of each JVM kind writes the classes it loaded
# to an archive, and later starts map it instead of loading and verifying ~5,000 classes again
# (measured: a node ready 1.5 to 2 s sooner, of about 6 s). Each JVM dumps to a file of its own
# that is renamed into place after it exits, so concurrent starts never read a half-written
# archive; a JVM that finds an archive from another JDK or classpath says so and runs without
# it. KAFKA_CDS_DIR= (empty) turns it off.
CDS_DIR="${KAFKA_CDS_DIR-$KAFKA_LIB/../cds}"
cds_flag() {  # $1: the JVM kind; sets cds_arg (the flag), cds_tmp and cds_file
  cds_arg=""; cds_tmp=""; cds_file=""
  [ -n "$CDS_DIR" ] || return 0
  mkdir -p "$CDS_DIR"
  cds_file="$CDS_DIR/$1-$(readlink -f "$(command -v java)" | cksum | cut -d' ' -f1).jsa"
  if [ -f "$cds_file" ]; then
    cds_arg="-XX:SharedArchiveFile=$cds_file"
  else
    cds_tmp="$cds_file.$$"
    cds_arg="-XX:ArchiveClassesAtExit=$cds_tmp"
  fi
}
cds_keep() {  # after the JVM has exited: the archive it wrote, if any, into place
  if [ -n "$cds_tmp" ] && [ -f "$cds_tmp" ]; then mv -f "$cds_tmp" "$cds_file"; fi
}
if [ ! -f "$logdirs/meta.properties" ]; then
  # A short-lived JVM: the quick JIT tier and the serial collector start it sooner.
  cds_flag storage-tool
  java $cds_arg -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp "$CP" kafka.tools.StorageTool format \
    -t "$(random_uuid)" -c "$props" >&2
  cds_keep
fi
cds_flag kafka
# KAFKA_OPTS carries JVM system properties, as for kafka-server-start.sh (the OAuth URL allow-list).
# shellcheck disable=SC2086
java $cds_arg -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn $KAFKA_OPTS -cp "$CP" kafka.Kafka "$props" >&2 &
pid=$!
trap 'kill -TERM $pid; wait $pid || true; cds_keep; exit 0' TERM
for i in $(seq 1 600); do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "READY node.id=1 listener=127.0.0.1:$port${sasl_ready//PORT/$port}"; break; fi
  kill -0 $pid || exit 1
  sleep 0.1
done
wait $pid
