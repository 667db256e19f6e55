#!/usr/bin/env bash
# Runs every `func FuzzXxx` of the module for $FUZZTIME each (seed corpus
# first, then mutation), built with the invariants tag (internal/invariants)
# so that a broken invariant fails at the input that broke it, plus $TAGS.
# NETFUZZTIME (default $FUZZTIME) is the time of the network-facing
# decoders instead: the TCP stream, UDP datagrams and VTP, the plugin wire
# layout, the peer transport's frames and the farm's message entry
# (FuzzMessage: what a peer's control message meets, every kind behind
# one target; the per-kind farm targets stay in the $FUZZTIME class).
# `make fuzz-long` is 10m for those, 2m for the others.
#
# Each package's test binary is built once with go test -c -fuzz (the
# fuzzing instrumentation and the invariants tag), up to $FUZZBUILDJOBS
# (default: the cores) at once, before any target runs; every target of
# the package then runs from it in the package's directory, as go test
# -fuzz would run it (the Go build cache's fuzz corpus included). Building
# a binary per target cost ~2 s of each target's ~5 s.
#
# FUZZJOBS (default 1) targets run at once, each with -parallel
# max(1, cores/FUZZJOBS) workers; every target still gets its whole time.
# The network-facing ones start first (the longest first packs best).
# Each target's result is one "fuzz: result" line (elapsed, execs, new
# interesting inputs); a failing input is printed in full. All targets run;
# the script fails at the end if any failed.
# FUZZMINIMIZETIME (default 5s) bounds the minimization of each new
# interesting input (go test's -fuzzminimizetime, 60s by default). A worker
# minimizing runs no new inputs and Go counts its execs only when it is
# done, so with the default a target whose inputs each make a connection
# (FuzzTCPStream, FuzzFEROLStream: about 1 ms per input) showed 0 execs/s
# for a minute after every new input and spent most of its time there.
# FUZZLOGS, if set, is a directory that keeps each target's whole output
# (<package with _ for />_<FuzzName>.log); by default they are removed.
# FUZZMATCH (default: all) is a bash regular expression that a target's
# ./<package>/<FuzzName> must match for it to run.
# At the end a table gives per target: seconds, execs, execs/s, new
# interesting inputs and the failing input's file, if any.
# New interesting inputs stay in the Go build cache's fuzz corpus
# ($(go env GOCACHE)/fuzz/<package>/<target>); commit the ones worth keeping
# under the package's testdata/fuzz/.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
NETFUZZTIME=${NETFUZZTIME:-$FUZZTIME}
FUZZJOBS=${FUZZJOBS:-1}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
FUZZMATCH=${FUZZMATCH:-}
cores=$(nproc 2>/dev/null || echo 1)
FUZZBUILDJOBS=${FUZZBUILDJOBS:-$cores}
workers=$(( cores / FUZZJOBS ))
(( workers >= 1 )) || workers=1
network() {
  case "$1 $2" in
    "node/transport/tcp "*|"node/transport/udp "*|"plugins/internal/wire "*|"node/peer/internal/wire "*|"node/farm FuzzMessage"|"schemas/vdif FuzzDecodeVTP") return 0 ;;
  esac
  return 1
}
# times4 multiplies a fuzz time such as 3s or 10m by four.
times4() {
  case "$1" in
    *s) echo "$(( ${1%s} * 4 ))s" ;;
    *m) echo "$(( ${1%m} * 4 ))m" ;;
    *) echo "$1" ;;
  esac
}
# one runs target $2 of package ./$1 for $3 from the package's binary; its
# whole output goes to $4.
one() {
  local dir=$1 fn=$2 t=$3 log=$4 bin
  bin=$bins/${dir//\//_}.test
  if [[ ! -x $bin ]]; then
    cat "$bins/${dir//\//_}.build.log" >"$log"
    echo "fuzz: ./$dir: its test binary did not build" >>"$log"
    return 1
  fi
  local args=(-test.run '^$' -test.fuzz "^${fn}\$" -test.parallel "$workers" -test.fuzzminimizetime "$FUZZMINIMIZETIME"
    -test.fuzzcachedir "$fuzzcache/$module/$dir" -test.paniconexit0)
  # Go counts the baseline coverage pass over the corpus against
  # -fuzztime: on a loaded machine it can run out before fuzzing starts
  # ("context deadline exceeded", no input at fault). That is retried
  # once with four times the time; a crash never is.
  if (cd "$dir" && "$bin" "${args[@]}" -test.fuzztime "$t") >"$log" 2>&1; then
    return 0
  fi
  if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
    echo "fuzz: ./$dir $fn: the baseline coverage pass did not finish in $t; again with 4 × $t" >>"$log"
    (cd "$dir" && "$bin" "${args[@]}" -test.fuzztime "$(times4 "$t")") >>"$log" 2>&1
    return
  fi
  return 1
}
# build makes package ./$1's fuzzing test binary (go test -c -fuzz: the
# same instrumentation and vet as go test -fuzz).
build() {
  local dir=$1 out=$bins/${1//\//_}
  "$GO" test -c -fuzz . -tags "invariants ${TAGS:-}" -o "$out.test" "./$dir" >"$out.build.log" 2>&1
}
cd "$(dirname "$0")/.."
targets=()
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    [[ "./$dir/$fn" =~ $FUZZMATCH ]] || continue
    if network "$dir" "$fn"; then targets+=("0 $dir $fn $NETFUZZTIME"); else targets+=("1 $dir $fn $FUZZTIME"); fi
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
if (( ${#targets[@]} == 0 )); then
  echo "fuzz: no target matches FUZZMATCH=$FUZZMATCH" >&2
  exit 1
fi
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -s -k1,1n)
if [[ -n "${FUZZLOGS:-}" ]]; then
  logs=$FUZZLOGS
  mkdir -p "$logs"
else
  logs=$(mktemp -d)
fi
bins=$(mktemp -d)
trap 'rm -rf "$bins"; [[ -n "${FUZZLOGS:-}" ]] || rm -rf "$logs"' EXIT
module=$("$GO" list -m)
fuzzcache=$("$GO" env GOCACHE)/fuzz
# seconds converts a Go duration such as 1m0s, 45.2s or 1h2m3s to whole seconds.
seconds() {
  awk -v d="$1" 'BEGIN { t = 0; while (match(d, /^[0-9.]+[hms]/)) { v = substr(d, 1, RLENGTH - 1); u = substr(d, RLENGTH, 1)
    t += v * (u == "h" ? 3600 : u == "m" ? 60 : 1); d = substr(d, RLENGTH + 1) } printf "%d", t }'
}
# report prints the result of target $1 (its log $2, status $3) and adds
# its row to the summary.
summary=()
report() {
  local name=$1 log=$2 rc=$3 last el ex nw secs rate crasher=-
  last=$(grep -E '^fuzz: elapsed: .*execs' "$log" | tail -1 || true) # not a 'minimizing' line
  el=$(sed -nE 's/^fuzz: elapsed: ([^,]+),.*/\1/p' <<<"$last")
  ex=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
  nw=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
  secs=$(seconds "${el:-0s}")
  rate=$(( secs > 0 ? ${ex:-0} / secs : 0 ))
  if (( rc == 0 )); then
    echo "fuzz: result $name: ${last#fuzz: } (${rate}/sec on average)"
  else
    crasher=$(sed -nE 's/.*Failing input written to (.*)$/\1/p' "$log" | tail -1)
    echo "fuzz: FAILED $name:"
    cat "$log"
    crasher=${crasher:-"(none written: see the log above)"}
  fi
  summary+=("$(printf '%-56s %6s %12s %8s %5s  %s' "$name" "$secs" "${ex:-0}" "$rate" "${nw:-0}" "$crasher")")
}
mapfile -t pkgs < <(printf '%s\n' "${targets[@]}" | awk '{print $2}' | sort -u)
echo "fuzz: building ${#pkgs[@]} packages' test binaries, $FUZZBUILDJOBS at once ($(date +%H:%M:%S))"
declare -A building=()
for dir in "${pkgs[@]}"; do
  while (( ${#building[@]} >= FUZZBUILDJOBS )); do
    wait -n -p pid "${!building[@]}" || true
    unset "building[$pid]"
  done
  build "$dir" &
  building[$!]=$dir
done
wait
echo "fuzz: built ($(date +%H:%M:%S))"
echo "fuzz: ${#targets[@]} targets, $FUZZJOBS at once, -parallel $workers each ($FUZZTIME; network-facing $NETFUZZTIME)"
declare -A running=()
failed=()
count=0
# reap waits for one running target and reports it.
reap() {
  local pid rc=0
  wait -n -p pid "${!running[@]}" || rc=$?
  read -r name log <<<"${running[$pid]}"
  unset "running[$pid]"
  report "$name" "$log" "$rc"
  if (( rc != 0 )); then failed+=("$name"); fi
  count=$((count+1))
}
for tg in "${targets[@]}"; do
  read -r _ dir fn t <<<"$tg"
  while (( ${#running[@]} >= FUZZJOBS )); do reap; done
  echo "fuzz: ./$dir $fn ($t) started $(date +%H:%M:%S)"
  log="$logs/${dir//\//_}_$fn.log"
  one "$dir" "$fn" "$t" "$log" &
  running[$!]="./$dir/$fn $log"
done
while (( ${#running[@]} > 0 )); do reap; done
echo "fuzz: summary (seconds fuzzed, execs, execs/s, new interesting inputs, failing input)"
printf 'fuzz: %-56s %6s %12s %8s %5s  %s\n' target s execs execs/s new failing
for row in "${summary[@]}"; do echo "fuzz: $row"; done
if (( ${#failed[@]} > 0 )); then
  echo "fuzz: ${#failed[@]} of $count targets failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: $count targets passed"
