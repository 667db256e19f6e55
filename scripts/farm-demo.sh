#!/usr/bin/env bash
# A farm on this machine (`make farm`): `sluice farm etcd` as its own process,
# then three `sluice run` nodes on loopback (configs/farm-{a,b,c}.yaml: each a
# readout unit for a third of the real LHCb sample's sources, each a builder
# unit and an event manager candidate), first with the push protocol, then with
# pull. For each protocol: record the run (sluice farm start), let the nodes'
# readouts end, wait until every announced event is built, stop the run (sluice
# farm stop: the nodes drain and exit), and print the farm ledger and each
# node's ledger. Both must balance (the script fails otherwise). The nodes
# run the demo's trigger chain (gec with deferral, a prescaled line), as
# `make run` does; afterwards `sluice replay` triggers what each node
# deferred, on every node's store, and must balance too.
#
# LOOP (default 20: 200 events) overrides the emulators' passes over the
# sample; ETCD_PORT (default 2379, and the next port for etcd's peers) and
# WORK (default data/farm) let several farms run on one machine; the nodes'
# HTTP endpoints and shm rings are private to each run (port 0, ring names
# with this script's process id).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
LOOP=${LOOP:-20}
ETCD_PORT=${ETCD_PORT:-2379}
PROTOCOLS=${PROTOCOLS:-push pull}
export SLUICE_FARM=demo SLUICE_ETCD=127.0.0.1:$ETCD_PORT
for p in "$BIN/sluice" "$BIN/plugins/gec" "$BIN/plugins/passthrough"; do
  [ -x "$p" ] || { echo "farm-demo: $p is missing; run 'make build plugins' (or 'make farm')" >&2; exit 1; }
done
work=${WORK:-data/farm}
rm -rf "$work"
mkdir -p "$work"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
nodes=(a b c)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

"$BIN/sluice" farm etcd --data-dir "$work/etcd" --listen "http://127.0.0.1:$ETCD_PORT" \
  --peer "http://127.0.0.1:$((ETCD_PORT + 1))" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
pids+=("$etcd_pid")
for _ in $(seq 100); do grep -q "etcd: serving" "$work/etcd.log" && break; sleep 0.1; done
grep -q "etcd: serving" "$work/etcd.log" || { cat "$work/etcd.log"; echo "farm-demo: etcd did not start" >&2; exit 1; }
echo "farm-demo: $(cat "$work/etcd.log")"

# The nodes' configs, with this run's loop count, etcd, token, stores,
# private rings and free HTTP ports.
for n in "${nodes[@]}"; do
  sed -e "s/^      loop: .*/      loop: $LOOP/" \
    -e "s#shm://sluice-farm-$n#shm://sluice-$$-farm-$n#" \
    -e "s#^  address: 127.0.0.1:[0-9]*#  address: 127.0.0.1:0#" \
    -e "s#etcd: \[127.0.0.1:2379\]#etcd: [127.0.0.1:$ETCD_PORT]#" \
    -e "s#token_file: data/farm/token#token_file: $work/token#" \
    "configs/farm-$n.yaml" >"$work/farm-$n.yaml"
done

status=0
run=6718861
for proto in $PROTOCOLS; do
  run=$((run + 1))
  echo
  echo "== $proto: run $run"
  "$BIN/sluice" farm start --run "$run" --config "$work/farm-a.yaml" --protocol "$proto"
  npids=()
  for n in "${nodes[@]}"; do
    "$BIN/sluice" run --config "$work/farm-$n.yaml" --run "$run" --protocol "$proto" \
      --store "$work/$proto/farm-$n" --summary-json "$work/$proto/farm-$n.run.json" \
      >"$work/$proto-farm-$n.log" 2>&1 &
    npids+=($!)
  done
  pids+=("${npids[@]}")
  # Every node's readout ends by itself (finite emulators); the run is
  # stopped once the farm ledger has every announced event built and
  # nothing open, unchanged for a second.
  want=$((LOOP * 10))
  ok=
  for _ in $(seq 600); do
    sleep 0.2
    if "$BIN/sluice" farm status --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin); l = s.get("ledger") or {}
ok = s["run"]["run"] == int(sys.argv[2]) and l.get("announced") == int(sys.argv[1]) and l.get("built") == int(sys.argv[1]) and l.get("open") == 0
sys.exit(0 if ok else 1)' "$want" "$run"; then
      ok=1
      break
    fi
  done
  if [ -z "$ok" ]; then echo "farm-demo: $proto: the farm did not build the $want events in time" >&2; status=1; fi
  "$BIN/sluice" farm stop
  for p in "${npids[@]}"; do wait "$p" || { echo "farm-demo: a node of run $run failed (exit $?)" >&2; status=1; }; done
  echo
  echo "-- farm ledger ($proto, run $run)"
  "$BIN/sluice" farm status --ledger || status=1
  for n in "${nodes[@]}"; do
    echo
    echo "-- node farm-$n ($proto)"
    sed -n '/^ *run [0-9]* on /,$p' "$work/$proto-farm-$n.log"
  done
  # What each node deferred, triggered by the replay chain on its own store.
  for n in "${nodes[@]}"; do
    echo
    echo "-- sluice replay on farm-$n ($proto)"
    "$BIN/sluice" replay --config "$work/farm-$n.yaml" --store "$work/$proto/farm-$n" \
      --summary-json "$work/$proto/farm-$n.replay.json" 2>"$work/$proto-farm-$n.replay.log" ||
      { echo "farm-demo: replay on farm-$n ($proto) failed (exit $?):" >&2; tail -20 "$work/$proto-farm-$n.replay.log" >&2; status=1; }
  done
  # The farm's events: built once across the nodes, what the chain deferred
  # all replayed.
  python3 - "$work/$proto" "$want" "${nodes[@]}" <<'PY' || status=1
import json, sys
d, want, nodes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = [json.load(open(f"{d}/farm-{n}.run.json")) for n in nodes]
reps = [json.load(open(f"{d}/farm-{n}.replay.json")) for n in nodes]
built = sum(r["events_built"] for r in runs)
acc = sum(r["events_accepted"] for r in runs)
rej = sum(r["events_rejected"] for r in runs)
dfr = sum(r["events_stored_deferred"] for r in runs)
rep = sum(r["events_replayed"] for r in reps)
racc = sum(r["events_accepted"] for r in reps)
print(f"farm-demo: {built} events built across the nodes: {acc} accepted, {rej} rejected, {dfr} deferred; "
      f"replay decided {rep} of the deferred ({racc} accepted)")
ok = built == want and acc + rej + dfr == built and rep == dfr and all(r["balanced"] for r in runs + reps)
if not ok:
    print(f"farm-demo: the nodes' ledgers do not add up to the farm's {want} events", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
done
exit $status
