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
# FUZZJOBS (default 1) targets run at once, each with -parallel
# max(1, cores/FUZZJOBS) workers; every target still gets its whole time.
# The network-facing ones start first (the longest first packs best).
# Each target's result is one "fuzz: result" line (elapsed, execs, new
# interesting inputs); a failing input is printed in full. All targets run;
# the script fails at the end if any failed.
# New interesting inputs stay in the Go build cache's fuzz corpus
# ($(go env GOCACHE)/fuzz/<package>/<target>); commit the ones worth keeping
# under the package's testdata/fuzz/.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
NETFUZZTIME=${NETFUZZTIME:-$FUZZTIME}
FUZZJOBS=${FUZZJOBS:-1}
cores=$(nproc 2>/dev/null || echo 1)
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
# one runs target $2 of package ./$1 for $3; its whole output goes to $4.
one() {
  local dir=$1 fn=$2 t=$3 log=$4 out
  local args=(test -tags "invariants ${TAGS:-}" -run '^$' -fuzz "^${fn}\$" -parallel "$workers")
  # Go counts the baseline coverage pass over the corpus against
  # -fuzztime: on a loaded machine it can run out before fuzzing starts
  # ("context deadline exceeded", no input at fault). That is retried
  # once with four times the time; a crash never is.
  if out=$("$GO" "${args[@]}" -fuzztime "$t" "./$dir" 2>&1); then
    echo "$out" >"$log"
    return 0
  fi
  echo "$out" >"$log"
  if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
    echo "fuzz: ./$dir $fn: the baseline coverage pass did not finish in $t; again with 4 × $t" >>"$log"
    "$GO" "${args[@]}" -fuzztime "$(times4 "$t")" "./$dir" >>"$log" 2>&1
    return
  fi
  return 1
}
cd "$(dirname "$0")/.."
targets=()
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    if network "$dir" "$fn"; then targets+=("0 $dir $fn $NETFUZZTIME"); else targets+=("1 $dir $fn $FUZZTIME"); fi
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -s -k1,1n)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# report prints the result of target $1 (its log $2, status $3).
report() {
  local name=$1 log=$2 rc=$3 last
  if (( rc == 0 )); then
    last=$(grep -E '^fuzz: elapsed' "$log" | tail -1 || true)
    echo "fuzz: result $name: ${last#fuzz: }"
  else
    echo "fuzz: FAILED $name:"
    cat "$log"
  fi
}
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
i=0
for tg in "${targets[@]}"; do
  read -r _ dir fn t <<<"$tg"
  while (( ${#running[@]} >= FUZZJOBS )); do reap; done
  echo "fuzz: ./$dir $fn ($t) started $(date +%H:%M:%S)"
  i=$((i+1))
  log="$logs/$i.log"
  one "$dir" "$fn" "$t" "$log" &
  running[$!]="./$dir/$fn $log"
done
while (( ${#running[@]} > 0 )); do reap; done
if (( ${#failed[@]} > 0 )); then
  echo "fuzz: ${#failed[@]} of $count targets failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: $count targets passed"
