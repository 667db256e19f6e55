#!/usr/bin/env bash
# Runs every Go benchmark of the project and prints one line per benchmark:
# name, throughput figure, and the ratio to the baseline measured in the same
# run (reported by internal/benchratio as the "ratio" metric).
set -euo pipefail
GO=${GO:-go}
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$GO" test ${TAGS:+-tags "$TAGS"} -run '^$' -bench . ${BENCHTIME:+-benchtime "$BENCHTIME"} -count 1 ./... 2>&1 | tee "$out" >/dev/null || { cat "$out"; exit 1; }
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); fig=""; ratio=""
  for (i=3; i<NF; i++) {
    if ($(i+1) == "ratio") ratio=$i
    else if ($(i+1) == "MB/s") fig=sprintf("%.1f MB/s", $i)
    else if ($(i+1) ~ /\/s$/ && fig == "") fig=sprintf("%s %s", $i, $(i+1))
  }
  if (fig == "") fig=sprintf("%s ns/op", $3)
  printf "%-60s %-24s %s\n", name, fig, (ratio == "" ? "" : "ratio " ratio)
}' "$out"
if [ -x bin/sluice ] && bin/sluice bench --help >/dev/null 2>&1; then bin/sluice bench; fi
