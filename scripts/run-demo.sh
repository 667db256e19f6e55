#!/usr/bin/env bash
# The main job on real data (`make run`): `sluice run` on configs/demo.yaml
# (the LHCb MDF sample looped through a shared-memory readout ring, gec and a
# prescaled passthrough line out of process, a deferral fraction), then
# `sluice replay` of what was deferred. Both print their ledger; each run
# gets a fresh store under ./data/ (the newest earlier one is kept, older ones removed).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
CONFIG=${CONFIG:-configs/demo.yaml}
store="data/demo-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p data
# A demo store takes ~1.8 GB: keep only the newest earlier one beside the new.
shopt -s nullglob
old=(data/demo-*/)
for ((i = 0; i + 1 < ${#old[@]}; i++)); do # the glob is sorted: all but the newest
  d=${old[i]%/}
  echo "run-demo: removing old store $d"
  rm -rf -- "$d" "$d.run.json" "$d.replay.json"
done
shopt -u nullglob
for p in "$BIN/sluice" "$BIN/plugins/gec" "$BIN/plugins/passthrough"; do
  [ -x "$p" ] || { echo "run-demo: $p is missing; run 'make build plugins' (or 'make run')" >&2; exit 1; }
done
"$BIN/sluice" config validate --preflight "$CONFIG"
echo "== sluice run --config $CONFIG --store $store"
"$BIN/sluice" run --config "$CONFIG" --store "$store" --summary-json "$store.run.json"
echo
echo "== sluice replay --config $CONFIG --store $store"
"$BIN/sluice" replay --config "$CONFIG" --store "$store" --summary-json "$store.replay.json"
echo
echo "run-demo: store $store; ledgers $store.run.json and $store.replay.json"
