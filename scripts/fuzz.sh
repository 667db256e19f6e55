#!/usr/bin/env bash
# Runs every `func FuzzXxx` of the module for $FUZZTIME each (seed corpus
# first, then mutation), built with the invariants tag (internal/invariants)
# so that a broken invariant fails at the input that broke it, plus $TAGS.
# Fails on the first crash, printing the failing input.
# NETFUZZTIME (default $FUZZTIME) is the time of the network-facing
# decoders instead: the TCP stream, UDP datagrams and VTP, the plugin wire
# layout, the peer transport's frames and the farm's messages (`make
# fuzz-long`: 10m for those, 2m for the others). New interesting inputs stay
# in the Go build cache's fuzz corpus; commit the ones worth keeping under
# the package's testdata/fuzz/.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
NETFUZZTIME=${NETFUZZTIME:-$FUZZTIME}
network() {
  case "$1 $2" in
    "node/transport/tcp "*|"node/transport/udp "*|"plugins/internal/wire "*|"node/peer/internal/wire "*|"node/farm "*|"schemas/vdif FuzzDecodeVTP") return 0 ;;
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
cd "$(dirname "$0")/.."
count=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    t=$FUZZTIME
    if network "$dir" "$fn"; then t=$NETFUZZTIME; fi
    echo "fuzz: ./$dir $fn ($t)"
    # Go counts the baseline coverage pass over the corpus against
    # -fuzztime: on a loaded machine it can run out before fuzzing starts
    # ("context deadline exceeded", no input at fault). That is retried
    # once with four times the time; a crash never is.
    if ! out=$("$GO" test -tags "invariants ${TAGS:-}" -run '^$' -fuzz "^${fn}\$" -fuzztime "$t" "./$dir" 2>&1); then
      if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
        echo "$out" | tail -3
        echo "fuzz: ./$dir $fn: the baseline coverage pass did not finish in $t; again with 4 × $t"
        "$GO" test -tags "invariants ${TAGS:-}" -run '^$' -fuzz "^${fn}\$" -fuzztime "$(times4 "$t")" "./$dir"
      else
        echo "$out"
        exit 1
      fi
    else
      echo "$out" | tail -2
    fi
    count=$((count+1))
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
echo "fuzz: $count targets passed"
