#!/usr/bin/env bash
# The chaos run (cmd/consumer's TestChaosKillsAndZombies) against real Apache
# Kafka brokers, one version after the other, each started and stopped by
# scripts/kafka-broker.sh on loopback: members killed (SIGKILL) and frozen
# (SIGSTOP past their session) on a seeded schedule, checkpoints torn across
# produce requests, an eagerly compacted changelog; every prediction and
# every final key state compared with an uninterrupted run.
#
#   scripts/chaos.sh 4.4.0                        # the bounded form CI runs (60 s of input)
#   DRIFTSTREAM_CHAOS_SECONDS=3600 scripts/chaos.sh 4.4.0   # the long form
#
# DRIFTSTREAM_CHAOS_SEED replays a schedule; DRIFTSTREAM_CHAOS_EVENTS_PER_SECOND
# sets the input's rate, DRIFTSTREAM_CHAOS_MEMBERS the members (2),
# DRIFTSTREAM_CHAOS_LATE_LABELS how late a third of the labels come (2000
# events; a sixth never come), DRIFTSTREAM_CHAOS_POPULATION the population
# model (additive, the shipped default; or off), DRIFTSTREAM_CHAOS_PORT the
# first broker's port (29192). Needs Java 17 and Maven, as kafka-broker.sh does.
#
# The long form (docs/RESULTS-CHAOS.md):
#   DRIFTSTREAM_CHAOS_SECONDS=3600 DRIFTSTREAM_CHAOS_MEMBERS=3 DRIFTSTREAM_CHAOS_EVENTS_PER_SECOND=500 scripts/chaos.sh 4.4.0
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(4.4.0)
kafka_dir=$(mktemp -d)
trap 'for d in "$kafka_dir"/*/; do [ -d "$d" ] && scripts/kafka-broker.sh stop "$d"; done' EXIT
port=${DRIFTSTREAM_CHAOS_PORT:-29192}
seconds=${DRIFTSTREAM_CHAOS_SECONDS:-60}
for version in "${versions[@]}"; do
  dir="$kafka_dir/$version"
  start=$(date +%s)
  # The broker advertises the proxy's port: the test's proxy (on it) kills
  # members inside a checkpoint's write (chaosproxy_test.go).
  proxy_port=$((port + 5))
  addr=$(DRIFTSTREAM_KAFKA_ADVERTISED_PORT=$proxy_port scripts/kafka-broker.sh start "$version" "$port" "$dir")
  echo "kafka $version at $addr (its clients through 127.0.0.1:$proxy_port): chaos run of ${seconds} s"
  if ! DRIFTSTREAM_CHAOS=1 DRIFTSTREAM_CHAOS_BROKER="$addr" DRIFTSTREAM_KAFKA_ADDR="127.0.0.1:$proxy_port" \
    go test -count=1 -run '^TestChaosKillsAndZombies$' -v -timeout "$((seconds * 3 + 600))s" ./cmd/consumer > "$dir/chaos.log" 2>&1; then
    tail -150 "$dir/chaos.log"
    echo "kafka $version: the chaos run failed; the broker's log: $dir/server.log" >&2
    exit 1
  fi
  grep -E '^(--- |ok)|chaos seed|[0-9]+ events: |rebuilt from its inputs|not verified' "$dir/chaos.log" | sed 's/^ *//' | cut -c1-600
  scripts/kafka-broker.sh stop "$dir"
  echo "kafka $version: chaos run passed in $(( $(date +%s) - start )) s"
  port=$((port + 10))
done
