#!/usr/bin/env bash
# Runs every Go benchmark of the project and prints one line per benchmark:
# name, throughput figure, and the ratio to the baseline measured in the same
# run (reported by internal/benchratio as the "ratio" metric).
set -euo pipefail
GO=${GO:-go}
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Sections that run tests (failover, streams) note a failure here; the
# script runs every section and then exits 1 if any failed.
failed=""
# The peer transports' benchmarks run apart, PEER_COUNT times (below).
echo "go benchmarks: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
pkgs=$("$GO" list ${TAGS:+-tags "$TAGS"} ./... | grep -v -e '/node/peer/' -e '/node/peerinput$')
"$GO" test ${TAGS:+-tags "$TAGS"} -run '^$' -bench . ${BENCHTIME:+-benchtime "$BENCHTIME"} -count 1 $pkgs 2>&1 | tee "$out" >/dev/null || { cat "$out"; exit 1; }
# What a line's ratio is against, where its baseline is not the same work
# done the plain way, and why a line has none.
awk '
BEGIN {
  note["BenchmarkUDPInput"] = "(the highest rate the sender reached with no datagram lost, against that of a plain socket)"
  note["BenchmarkNodePipeline"] = "(baseline memcpy of the bytes; each round also starts and drains a node)"
  note["BenchmarkEMAssign"] = "(baseline a Go map insert and delete per assignment)"
  note["BenchmarkFullEventDecodeSplit"] = "(baseline io.ReadFull of the bytes; Adler-32 on every ROB and the event)"
  note["BenchmarkMDFReadSplitVerify"] = "(baseline io.ReadFull of the bytes; the serial record hash dominates)"
}
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); fig=""; ratio=""; top=name; sub(/\/.*/, "", top)
  for (i=3; i<NF; i++) {
    if ($(i+1) == "ratio") ratio=$i
    else if ($(i+1) == "MB/s") fig=sprintf("%.1f MB/s", $i)
    else if ($(i+1) ~ /\/s$/ && $(i+1) !~ /^baseline_/ && fig == "") fig=sprintf("%s %s", $i, $(i+1))
  }
  if (fig == "") fig=sprintf("%s ns/op", $3)
  if (ratio == "" && !(top in note)) note[top] = "no ratio: no baseline"
  printf "%-60s %-24s %s%s\n", name, fig, (ratio == "" ? "" : "ratio " ratio " "), note[top]
}' "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Peer transports (node/peer/...) and event building over them
# (node/peerinput: BenchmarkBuild, four sender processes into one builder):
# each benchmark PEER_COUNT times (5 by default); figure and ratio as min /
# median / max over the runs, with the machine's load average before and
# after (these run several processes each, and against ucx_perftest when
# built with UCX; "rndv" is the ratio to ucx_perftest sending every message
# by rendezvous, as the UCX transport does).
PEER_COUNT=${PEER_COUNT:-5}
echo "peer transports: $PEER_COUNT runs each, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$GO" test ${TAGS:+-tags "$TAGS"} -run '^$' -bench . -count "$PEER_COUNT" ./node/peer/... ./node/peerinput/ 2>&1 | tee "$out" >/dev/null || { cat "$out"; exit 1; }
awk '
function stats(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return sprintf("%s / %s / %s", a[1], (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2), a[n])
}
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name)
  if (!(name in figs)) order[++k] = name
  for (i=3; i<NF; i++) {
    u = $(i+1)
    if (u == "ratio") ratios[name] = ratios[name] " " $i
    else if (u == "rndv_ratio") rndvs[name] = rndvs[name] " " $i
    else if (u == "MB/s" || u == "msgs/s" || u == "us") { if (!(name in unit) || unit[name] == u) { figs[name] = figs[name] " " $i; unit[name] = u } }
    else if (u == "cpu_ns/B" || u == "cpu_ns/msg") cpus[name] = cpus[name] " " $i
    else if (u == "baseline_MB/s" || u == "baseline_msgs/s" || u == "baseline_us") bases[name] = bases[name] " " $i
    else if (u == "baseline_cpu_ns/B" || u == "baseline_cpu_ns/msg") bcpus[name] = bcpus[name] " " $i
  }
}
END {
  for (j = 1; j <= k; j++) {
    n = order[j]
    printf "%-60s %s %s", n, stats(figs[n]), unit[n]
    if (n in bases) printf "   baseline %s", stats(bases[n])
    if (n in ratios) printf "   ratio %s", stats(ratios[n])
    if (n in rndvs) printf "   rndv %s", stats(rndvs[n])
    if (n in cpus) printf "   cpu %s ns", stats(cpus[n])
    if (n in bcpus) printf " (baseline %s)", stats(bcpus[n])
    top = n; sub(/\/.*/, "", top)
    if (!(n in ratios) && top == "BenchmarkPeerControl") printf "   no ratio: 8-byte control messages per second, no baseline over TCP (BenchmarkControlVsPerftest of the UCX build has one)"
    else if (!(n in ratios)) printf "   no ratio: no baseline"
    printf "\n"
  }
}' "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# The whole node end to end: sluice bench BENCH_COUNT times (5 by default),
# each figure as min / median / max, with the load average before and after.
if [ -x bin/sluice ] && bin/sluice bench --help >/dev/null 2>&1; then
  BENCH_COUNT=${BENCH_COUNT:-5}
  echo "sluice bench: $BENCH_COUNT runs, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((i = 0; i < BENCH_COUNT; i++)); do bin/sluice bench --json; done > "$out" || { cat "$out"; exit 1; }
  awk '
function stats(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return sprintf("%.3f / %.3f / %.3f", a[1], (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2), a[n])
}
{ gsub(/[",]/, "") }
$1 == "gb_per_second:" { gbs = gbs " " $2 }
$1 == "baseline_memcpy_gb_per_second:" { mem = mem " " $2 }
$1 == "ratio:" { ratio = ratio " " $2 }
$1 == "cpu_ns_per_byte:" { cpu = cpu " " $2 }
$1 == "cores_busy:" { cores = cores " " $2 }
$1 == "memory_budget_bytes:" { budget = $2 }
$1 == "peak_rss_bytes:" { hwm = hwm " " $2 }
$1 == "balanced:" && $2 != "true" { unbalanced++ }
END {
  n = split(hwm, h, " "); over = ""
  for (i = 1; i <= n; i++) over = over " " (h[i] - budget) / 1048576
  printf "%-60s %s GB/s   baseline memcpy %s GB/s   ratio %s\n", "sluice bench (node end to end)", stats(gbs), stats(mem), stats(ratio)
  printf "%-60s %s ns per payload byte, %s cores busy\n", "sluice bench CPU (node and emulator)", stats(cpu), stats(cores)
  printf "%-60s budget + %s MiB\n", "sluice bench peak RSS (VmHWM)", stats(over)
  if (unbalanced) printf "sluice bench: %d runs did not balance\n", unbalanced
}' "$out"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
# Push vs pull through a shaped link (sluice farm bench): root only, it
# sets up a network namespace and tc; a table, the predicted and measured
# crossovers, and a PNG plot (FARM_PLOT, default farm-bench.png).
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then
  echo "farm: push vs pull through a shaped link (sluice farm bench)"
  bin/sluice farm bench --plot "${FARM_PLOT:-farm-bench.png}" || failed="$failed farm-bench"
else
  echo "farm: push vs pull skipped: sluice farm bench needs root, ip and tc (iproute2)"
fi
# BU failover time (real processes: etcd, four sluice run nodes per run):
# SIGKILL of a BU to the last of its unreleased assignments reassigned,
# FAILOVER_RUNS times (3 by default), min / median / max, against the
# same-run baseline: detection by the membership lease alone, measured on
# an EM candidate killed at the same moment (nothing fences it).
echo "farm: BU failover time ($(cut -d' ' -f1-3 /proc/loadavg) load average)"
SLUICE_FAILOVER_RUNS=${FAILOVER_RUNS:-3} "$GO" test ${TAGS:+-tags "$TAGS"} -count 1 -v -run '^TestFarmFailoverTimes$' ./node/e2e/ > "$out" 2>&1 || failed="$failed TestFarmFailoverTimes"
grep -e '^farm failover' -e '^--- FAIL' -e '^FAIL' "$out" || true
# Many TCP streams (issue 16's scale, real processes: one readout process
# with 1000 connections of one source each at 500 Hz into a node with its
# builder, a trigger stage and its store), STREAMS_RUNS times (3 by
# default), against the same-run baseline of the same sources over 4
# connections: complete events, late fragments, the rate reached, VmHWM
# against the budget, the node's CPU per fragment, min / median / max.
echo "streams: 1000 x 1000 sources at 500 Hz ($(cut -d' ' -f1-3 /proc/loadavg) load average)"
SLUICE_STREAMS_RUNS=${STREAMS_RUNS:-3} "$GO" test ${TAGS:+-tags "$TAGS"} -count 1 -v -timeout 60m -run '^TestStreamsScale$' ./node/e2e/ > "$out" 2>&1 || failed="$failed TestStreamsScale"
grep -e '^streams' -e '^--- FAIL' -e '^FAIL' -e 'streams_test.go' "$out" || true
if [ -n "$failed" ]; then
  echo "bench: FAILED:$failed" >&2
  exit 1
fi
