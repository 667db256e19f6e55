#!/usr/bin/env bash
# Runs every `func FuzzXxx` of the module for $FUZZTIME each (seed corpus
# first, then mutation), built with the invariants tag (internal/invariants)
# so that a broken invariant fails at the input that broke it, plus $TAGS.
# Fails on the first crash, printing the failing input.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
cd "$(dirname "$0")/.."
count=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    echo "fuzz: ./$dir $fn ($FUZZTIME)"
    "$GO" test -tags "invariants ${TAGS:-}" -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "./$dir"
    count=$((count+1))
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
echo "fuzz: $count targets passed"
