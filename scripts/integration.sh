#!/usr/bin/env bash
# Runs the integration suite (the black-box tests of cmd/consumer, through the
# built binaries) against real Apache Kafka brokers, one version after the
# other, each started and stopped by scripts/kafka-broker.sh on loopback.
#
#   scripts/integration.sh                 # 3.9.2, 4.0.0 and 4.4.0
#   scripts/integration.sh 4.0.0           # one version
#
# Needs Java 17 and Maven (the broker's jars come from Maven Central into a
# cache, see kafka-broker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.9.2 4.0.0 4.4.0)
kafka_dir=$(mktemp -d)
trap 'for d in "$kafka_dir"/*/; do [ -d "$d" ] && scripts/kafka-broker.sh stop "$d"; done' EXIT
port=29092 # below the ephemeral range (32768 and up), where a client's connection may hold a port
for version in "${versions[@]}"; do
  dir="$kafka_dir/$version"
  start=$(date +%s)
  addr=$(scripts/kafka-broker.sh start "$version" "$port" "$dir")
  echo "kafka $version at $addr (started in $(( $(date +%s) - start )) s)"
  # DRIFTSTREAM_KAFKA_PID lets the outage test stop the broker (SIGSTOP) and resume it;
  # the TLS listener (mutual TLS) is on port + 3, its CA and client certificate in $dir/tls.
  if ! DRIFTSTREAM_KAFKA_ADDR="$addr" DRIFTSTREAM_KAFKA_SASL_ADDR="127.0.0.1:$((port + 1))" DRIFTSTREAM_KAFKA_PID="$(cat "$dir/pid")" \
    DRIFTSTREAM_KAFKA_TLS_ADDR="127.0.0.1:$((port + 3))" DRIFTSTREAM_KAFKA_TLS_DIR="$dir/tls" \
    go test -count=1 -run 'TestBlackBox|TestRealKafka' -v ./cmd/consumer > "$dir/suite.log" 2>&1; then
    tail -150 "$dir/suite.log"
    echo "kafka $version: the integration suite failed; the broker's log: $dir/server.log" >&2
    exit 1
  fi
  grep -E '^(--- |ok)|_test.go:[0-9]+: [0-9]+ events|the changelog holds' "$dir/suite.log"
  scripts/kafka-broker.sh stop "$dir"
  echo "kafka $version: passed in $(( $(date +%s) - start )) s"
  port=$((port + 10))
done
