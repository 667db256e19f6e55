#!/usr/bin/env bash
# Golden outputs of a redesign that must not change behaviour: the ledger
# JSON of the demo run and its replay (configs/demo.yaml, real LHCb MDF), of a
# fixed-seed synthetic emulator run (testdata/golden/synthetic.yaml), the
# `sluice inspect --json` report of every sample under testdata/third_party/,
# and the bytes (sha256) of every export of the fixed store in
# testdata/golden/store (30 LHCb events made once with the demo chain: 5 accepted, 5 deferred).
#
#   scripts/golden.sh            # compare with testdata/golden/, exit 1 on any difference
#   scripts/golden.sh capture    # write testdata/golden/ anew (after a change that is meant to alter outputs)
#
# Timings (durations, throttled time), the memory parts' peaks and bytes_stored (the store encodes a
# batch at a time, and batch boundaries follow timing) are removed from ledgers before the
# comparison; everything else must be equal. Needs bin/sluice and the example
# plugins (make build plugins) and jq.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
mode=${1:-check}
golden=testdata/golden
# The demo's ring name (shm://sluice-demo) is part of its golden ledger, so
# two runs on one machine would collide: they take turns.
exec 9>"${TMPDIR:-/tmp}/sluice-golden.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out/inspect" "$out/export"

for p in "$BIN/sluice" "$BIN/plugins/gec" "$BIN/plugins/passthrough" "$BIN/plugins/l0calo"; do
  [ -x "$p" ] || { echo "golden: $p is missing; run 'make build plugins'" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "golden: jq is needed (apt-get install jq)" >&2; exit 1; }

# Ledgers without the figures that are timings (batches_relieved too: how
# often a batch is closed early to free the ring depends on scheduling).
normalise() {
  jq -S 'del(.duration_seconds, .startup_seconds, .flow_seconds, .replay_seconds, .elapsed_seconds, .bytes_stored, .batches_relieved)
         | if .emulators then .emulators |= map(del(.throttled_ns, .duration_ns)) else . end
         | if .memory then .memory |= (del(.peak_resident_bytes) | .parts |= map(del(.peak_bytes))) else . end' "$1"
}

run_node() { # name config [extra config edits...]
  local name=$1 cfg=$2 store=$work/store-$1
  sed -e "s#^  path: .*#  path: $store#" -e 's#address: 127.0.0.1:[0-9]*#address: 127.0.0.1:0#' "$cfg" >"$work/$name.yaml"
  "$BIN/sluice" run --config "$work/$name.yaml" --summary-json "$work/$name.run.json" >"$work/$name.log" 2>&1 ||
    { echo "golden: sluice run $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  normalise "$work/$name.run.json" >"$out/$name.run.json"
}

echo "golden: demo run (configs/demo.yaml) and replay"
run_node demo configs/demo.yaml
"$BIN/sluice" replay --config "$work/demo.yaml" --summary-json "$work/demo.replay.json" >"$work/demo.replay.log" 2>&1 ||
  { echo "golden: sluice replay failed:" >&2; tail -20 "$work/demo.replay.log" >&2; exit 1; }
normalise "$work/demo.replay.json" >"$out/demo.replay.json"
rm -rf "$work/store-demo"

echo "golden: synthetic emulator run (testdata/golden/synthetic.yaml)"
run_node synthetic "$golden/synthetic.yaml"

echo "golden: inspect --json of every sample"
while IFS= read -r f; do
  name=$(echo "${f#testdata/third_party/}" | tr '/' '_')
  # A damaged sample fails with a report; both the report and the status are golden.
  set +e
  "$BIN/sluice" inspect --json "$f" >"$out/inspect/$name.json" 2>/dev/null
  echo "exit $?" >>"$out/inspect/$name.json"
  set -e
done < <(find testdata/third_party -type f ! -name '*.md' ! -name 'LICENSE*' | sort)

echo "golden: exports of the fixed store"
# The store is copied: a read-only open must not be needed to leave it unchanged.
cp -r "$golden/store" "$work/fixed"
for stream in accepted deferred; do
  for fmt in ${FORMATS:-arrow parquet mdf frd eformat vdif}; do
    f=$work/export.$stream.$fmt
    if "$BIN/sluice" store export --path "$work/fixed" --stream "$stream" --format "$fmt" --out "$f" >/dev/null 2>&1; then
      echo "$(sha256sum <"$f" | cut -d' ' -f1)  $stream.$fmt" >>"$out/export/sha256"
    else
      echo "refused  $stream.$fmt" >>"$out/export/sha256"
    fi
  done
done

if [ "$mode" = capture ]; then
  rm -rf "$golden/out"
  cp -r "$out" "$golden/out"
  echo "golden: captured into $golden/out"
  exit 0
fi
if diff -ru "$golden/out" "$out"; then
  echo "golden: all outputs identical"
else
  echo "golden: outputs differ (above); if the change is meant, run scripts/golden.sh capture and say why in the commit" >&2
  exit 1
fi
