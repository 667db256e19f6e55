package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallShm returns the arguments that run bin/sluice with args in a
// mount namespace of its own whose /dev/shm is a tmpfs of size (as in a
// container: Docker's default is 64 MiB). Root only.
func smallShm(t *testing.T, size string, args ...string) (string, []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a small /dev/shm needs root (a mount namespace and a tmpfs)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("a small /dev/shm needs unshare(1):", err)
	}
	if err := exec.Command(unshare, "-m", "--propagation", "private", "true").Run(); err != nil {
		t.Skip("cannot make a mount namespace here:", err)
	}
	script := fmt.Sprintf(`mount -t tmpfs -o size=%s tmpfs /dev/shm && exec "$0" "$@"`, size)
	return unshare, append([]string{"-m", "--propagation", "private", "sh", "-c", script, filepath.Join(bin, "sluice")}, args...)
}

const smallShmConfig = `
node: {memory_budget: 512MiB}
inputs:
  - uri: shm://{{SHM}}
    emulator: {events: 200, ring_size: 16MiB}
sources:
  - {name: tracker, sources: "0-3"}
trigger:
  stages:
    - {name: hlt, plugin: {{BIN}}/plugins/passthrough}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestSmallDevShm: in a 64 MiB /dev/shm the node (a 128 MiB plugin
// arena, a 16 MiB ring) refuses to start, naming the sizes and the free
// space, instead of dying of SIGBUS in the builder at the first arena page
// the tmpfs cannot give; a readout whose ring does not fit fails at once
// naming its sizes, instead of writing into a ring it would SIGBUS in.
func TestSmallDevShm(t *testing.T) {
	cfg := writeConfig(t, smallShmConfig, map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": filepath.Join(t.TempDir(), "store")})
	prog, args := smallShm(t, "64m", "run", "--config", cfg)
	p := startProgram(t, prog, args...)
	if code := p.wait(t, time.Minute); code != 3 || !strings.Contains(p.log(),
		"the plugin arena (node.memory_split.batches) 128MiB and shm://"+shmName(t)+"'s ring (inputs[0].emulator.ring_size) 16MiB+4KiB need 144MiB+4KiB; /dev/shm has 64MiB free of 64MiB") {
		t.Fatalf("sluice run in a 64MiB /dev/shm: exit %d, want 3 naming the sizes\n%s", code, p.log())
	}
	// A ring of exactly /dev/shm's size does not fit either (its file has a
	// control page too): refused at start, not failing once running.
	exact := strings.Replace(strings.Replace(smallShmConfig, "ring_size: 16MiB", "ring_size: 64MiB", 1),
		"trigger:\n  stages:\n    - {name: hlt, plugin: {{BIN}}/plugins/passthrough}\n", "", 1)
	cfg = writeConfig(t, exact, map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": filepath.Join(t.TempDir(), "store")})
	prog, args = smallShm(t, "64m", "run", "--config", cfg)
	p = startProgram(t, prog, args...)
	if code := p.wait(t, time.Minute); code != 3 || !strings.Contains(p.log(),
		"shm://"+shmName(t)+"'s ring (inputs[0].emulator.ring_size) 64MiB+4KiB need 64MiB+4KiB; /dev/shm has 64MiB free of 64MiB") {
		t.Fatalf("sluice run of a 64MiB ring in a 64MiB /dev/shm: exit %d, want 3 naming the sizes\n%s", code, p.log())
	}
	prog, args = smallShm(t, "64m", "readout", "--to", "shm://"+shmName(t), "--events", "10", "--ring-size", "134217728")
	r := startProgram(t, prog, args...)
	if code := r.wait(t, 20*time.Second); code == 0 || !strings.Contains(r.log(),
		"readout ring "+shmName(t)+": not enough shared memory: 128MiB+4KiB needed; /dev/shm has 64MiB free of 64MiB") {
		t.Fatalf("sluice readout of a 128MiB ring in a 64MiB /dev/shm: exit %d, want an error naming the sizes\n%s", code, r.log())
	}
}

// TestLiveRingNotTaken: a second node configured with the ring of a node
// that is running refuses to start, naming the live pid (so does a
// readout to that ring), and the first
// node's run is untouched (it used to remove the ring and make its own).
func TestLiveRingNotTaken(t *testing.T) {
	storeA := filepath.Join(t.TempDir(), "a")
	vars := map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": storeA, "RUN": "41",
		"EMU": "{duration: 5m, rate: 200, ring_size: 4MiB}"}
	summary := filepath.Join(t.TempDir(), "a.json")
	a := start(t, "run", "--config", writeConfig(t, killConfig, vars), "--summary-json", summary)
	addr := a.httpAddr(t)
	waitStored(t, a, addr, 10)
	vars["STORE"] = filepath.Join(t.TempDir(), "b")
	b := start(t, "run", "--config", writeConfig(t, killConfig, vars))
	if code := b.wait(t, time.Minute); code != 3 || !strings.Contains(b.log(), fmt.Sprintf("is in use (its writer pid %d is alive)", a.cmd.Process.Pid)) {
		t.Fatalf("a second node on a live node's ring: exit %d, want 3 naming pid %d\n%s", code, a.cmd.Process.Pid, b.log())
	}
	// A readout to the same ring is refused at once too, naming the live
	// writer (it used to replace the ring under the node and wait forever
	// for a reader).
	r := start(t, "readout", "--to", "shm://"+vars["SHM"], "--events", "10")
	if code := r.wait(t, time.Minute); code == 0 || !strings.Contains(r.log(), fmt.Sprintf("the ring %s exists and its writer pid %d is alive", vars["SHM"], a.cmd.Process.Pid)) {
		t.Fatalf("a readout to a live node's ring: exit %d, want an error naming pid %d\n%s", code, a.cmd.Process.Pid, r.log())
	}
	// A replay of the running node's store, by the same config: refused
	// for the store (exit 4, "replay did not start"), not for the ring a
	// replay never opens (it was, exit 3, naming the ring).
	rp := start(t, "replay", "--config", writeConfig(t, killConfig, map[string]string{"SHM": vars["SHM"], "BIN": bin, "STORE": storeA, "RUN": "41",
		"EMU": vars["EMU"]}))
	if code := rp.wait(t, time.Minute); code != 4 || !strings.Contains(rp.stdout.String(), "replay did not start: ") ||
		!strings.Contains(rp.log(), fmt.Sprintf("store in use by another process (%s is locked by pid %d)", filepath.Join(storeA, "sluice.lock"), a.cmd.Process.Pid)) ||
		strings.Contains(rp.log(), "exists and is in use") {
		t.Fatalf("a replay of a running node's store: exit %d, want 4 naming the store, not the ring\nstdout:\n%s\nstderr:\n%s", code, rp.stdout.String(), rp.log())
	}
	s := waitStored(t, a, addr, 20)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, time.Minute); code != 0 {
		t.Fatalf("the first node: exit %d\n%s", code, a.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsStored < s.Ledger.EventsStored {
		t.Fatalf("the first node's ledger: %+v", l)
	}
}
