#!/bin/bash
# The drift-alert study of docs/DETECTION.md: the service's default detectors,
# as it ships them, on every learner of the catalog, 40 keys × 10,000 events
# per scenario, on the held-out draw (seed 2; seed 1 was the tuning draw), and
# on a real keyed data set with no known drift when one is at hand.
#
#   scripts/detection-study.sh [SEED] [OUT_DIR] [AIRQUALITY_JSONL]
#
# Writes OUT_DIR/LEARNER.md (the table, the goals, the command) for each
# learner; two learners run at a time. AIRQUALITY_JSONL: scripts/keyed-data.py's
# airquality.jsonl (12 Beijing stations × 35,000 hours, d=18).
set -euo pipefail
seed=${1:-2} out=${2:-docs/detection} real=${3:-}
mkdir -p "$out"
go build -o /tmp/driftstream-detection ./cmd/consumer
learners="perceptron modified-perceptron shifting-perceptron budget-perceptron winnow2 tracking-winnow swin odm dynamic-odm sop lasec perceptron-ss sop-ss lasec-ss bbq bbq-i logreg"
run() {
  local l=$1 args=(detection -q -learner "$1" -seed "$seed")
  [ -n "$real" ] && args+=(-real "$real" -real-dim 18)
  { echo "# Drift alerts: $l, seed $seed"; echo; /tmp/driftstream-detection "${args[@]}"; echo; echo "\`go run ./cmd/consumer ${args[*]}\`"; } > "$out/$l.md"
  echo "$l: $(grep -c 'every goal met' "$out/$l.md" || true) of 1 configurations meet every goal"
}
export -f run; export seed out real
printf '%s\n' $learners | xargs -P 2 -I{} bash -c 'run {}'
