#!/bin/bash
# Runs the same keyed backtests with two builds of the consumer and reports
# every output file that differs (timings in summary.json aside): the proof
# that a change meant to keep behaviour kept it.
#
#   scripts/backtest-identity.sh OLD_CONSUMER NEW_CONSUMER WEATHER_JSONL APART_JSONL
#
# WEATHER_JSONL: scripts/keyed-data.py's weather file (or any keyed JSONL
# with d=39, e.g. its first 40,000 lines); APART_JSONL: go run
# ./scripts/synth-jsonl's keyed stream of d=10. Prints "identical" or each
# differing file, and exits 1 when any differs.
set -euo pipefail
old=$1 new=$2 weather=$3 apart=$4
out=$(mktemp -d)
run() { # binary dir name args...
  local b=$1 d=$2 name=$3; shift 3
  "$b" backtest -keyed "$@" -q -out "$d/$name" > "$d/$name.stdout" 2>&1
}
for side in old new; do
  b=$old; [ $side = new ] && b=$new
  d=$out/$side; mkdir -p "$d"
  run "$b" "$d" def -data "$weather" -dim 39 -key key
  run "$b" "$d" defdelay -data "$weather" -dim 39 -key key -labels-delay 40 -detectors all
  run "$b" "$d" mix -data "$weather" -dim 39 -key key -population mixture -learners perceptron -detectors all -labels-delay 20
  run "$b" "$d" lasec -data "$apart" -dim 10 -key key -learners lasec-ss -detectors all -labels-delay 5
  run "$b" "$d" lasecq -data "$apart" -dim 10 -key key -learners lasec-ss -learn-from queried -population additive
  run "$b" "$d" perc -data "$apart" -dim 10 -key key -learners perceptron -detectors all -partitions 4
  run "$b" "$d" std -data "$weather" -dim 39 -key key -learners sop -standardize -population off -labels-delay 7
done
status=0
for dir in "$out"/old/*/; do
  name=$(basename "$dir")
  for f in "$dir"*; do
    base=$(basename "$f")
    case $base in *.png|*.svg) continue ;; esac
    if [ "$base" = summary.json ]; then
      diff <(grep -v '"seconds"\|records_per_sec' "$f") <(grep -v '"seconds"\|records_per_sec' "$out/new/$name/$base") > /dev/null || { echo "differs: $name/$base"; status=1; }
    else
      cmp -s "$f" "$out/new/$name/$base" || { echo "differs: $name/$base"; status=1; }
    fi
  done
done
[ $status = 0 ] && echo identical
rm -rf "$out"
exit $status
