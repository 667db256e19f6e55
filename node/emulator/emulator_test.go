package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/node/transport/tcp"
	"github.com/sluice-daq/sluice/node/transport/udp"
	"github.com/sluice-daq/sluice/schemas"
)

// The cross-process tests run the emulator in a child process: this test
// binary re-executed with envEmulator holding its Config as JSON and
// envSender its sender settings (Config.Sender) as JSON. The child writes
// its Summary to the file named in envSummary.
const (
	envEmulator = "SLUICE_EMULATOR_TEST_CONFIG"
	envSender   = "SLUICE_EMULATOR_TEST_SENDER"
	envSummary  = "SLUICE_EMULATOR_TEST_SUMMARY"
)

func TestMain(m *testing.M) {
	if cfgJSON := os.Getenv(envEmulator); cfgJSON != "" {
		os.Exit(emulatorChild(cfgJSON, os.Getenv(envSender), os.Getenv(envSummary)))
	}
	code := m.Run()
	// Every ring a test created, or a child it killed left behind, must be
	// gone: ringName's clean-up removes them.
	if left := transporttest.RingsLeft(shm.Dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "files left in %s by the tests: %v\n", shm.Dir, left)
		code = 1
	}
	os.Exit(code)
}

func ringName(t testing.TB) string { return transporttest.RingName(t, shm.Dir) }

func emulatorChild(cfgJSON, senderJSON, summaryPath string) int {
	var cfg Config
	err := json.Unmarshal([]byte(cfgJSON), &cfg)
	if u, perr := transport.ParseURI(cfg.To); err == nil && perr == nil && senderJSON != "null" {
		cfg.Sender = transport.Lookup(u.Scheme).NewSenderOptions()
		err = json.Unmarshal([]byte(senderJSON), cfg.Sender)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulator child: config:", err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := Run(ctx, cfg)
	b, _ := json.Marshal(sum)
	if werr := os.WriteFile(summaryPath, b, 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "emulator child: summary:", werr)
		return 3
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulator child:", err)
		return 1
	}
	return 0
}

// emulatorProc is a running emulator child.
type emulatorProc struct {
	cmd     *exec.Cmd
	summary string
	done    chan error
}

func startEmulator(t *testing.T, cfg Config) *emulatorProc {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := json.Marshal(cfg.Sender)
	if err != nil {
		t.Fatal(err)
	}
	p := &emulatorProc{summary: filepath.Join(t.TempDir(), "summary.json"), done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), envEmulator+"="+string(b), envSender+"="+string(sb), envSummary+"="+p.summary)
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the child to exit and returns its summary.
func (p *emulatorProc) wait(t *testing.T) Summary {
	t.Helper()
	var err error
	select {
	case err = <-p.done:
		p.done <- err // for Cleanup
	case <-time.After(60 * time.Second):
		t.Fatal("emulator child did not finish in 60 s")
	}
	if err != nil {
		t.Fatalf("emulator child: %v", err)
	}
	b, err := os.ReadFile(p.summary)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// allFaults turns on every fault option at rate p.
func allFaults(p float64) Faults {
	return Faults{Drop: p, Duplicate: p, Corrupt: p, Truncate: p, Reorder: p, Stall: p / 4,
		ReorderWindow: 6, StallDuration: 5 * time.Millisecond}
}

// checkBalance asserts that what the emulator sent is what the sink got
// plus what was counted lost, duplicated, corrupt or truncated.
// dedup: the transport itself discards duplicates (UDP, by sequence
// number), so the sink sees none.
func checkBalance(t *testing.T, sum Summary, st transport.Stats, cs *transporttest.CheckSink, truncReason transport.Reason, dedup bool) {
	t.Helper()
	sink := cs.Counts()
	f, ff := sum.Faults, sum.FaultFragments
	t.Logf("sent %+v", sum)
	t.Logf("received %+v; sink unique %d dups %d bad CRC %d", st, sink.Unique, sink.Dups, sink.BadCRC)
	if sum.PacketsGenerated == 0 || f[FaultTruncate] == 0 || f[FaultDrop] == 0 || f[FaultDuplicate] == 0 || f[FaultCorrupt] == 0 || f[FaultReorder] == 0 {
		t.Fatalf("run too small to exercise every fault: %v", f)
	}
	if sum.PacketsSent != sum.PacketsGenerated-f[FaultDrop]+f[FaultDuplicate] {
		t.Errorf("emulator: sent %d packets, generated %d - dropped %d + duplicated %d", sum.PacketsSent, sum.PacketsGenerated, f[FaultDrop], f[FaultDuplicate])
	}
	dupPackets, dupFragments := f[FaultDuplicate], ff[FaultDuplicate]
	if dedup {
		if got := st.Discarded[transport.Duplicate]; got != dupPackets {
			t.Errorf("duplicate packets discarded %d, want %d injected", got, dupPackets)
		}
		dupPackets, dupFragments = 0, 0
	}
	if got, want := st.Packets, sum.PacketsSent-f[FaultTruncate]-(f[FaultDuplicate]-dupPackets); got != want {
		t.Errorf("packets handed to the sink %d, want %d: sent %d - truncated %d - duplicates discarded", got, want, sum.PacketsSent, f[FaultTruncate])
	}
	if got := st.Discarded[truncReason]; got != f[FaultTruncate] {
		t.Errorf("discarded %s %d, want %d injected", truncReason, got, f[FaultTruncate])
	}
	if got, want := sink.Unique, sum.FragmentsGenerated-ff[FaultDrop]-ff[FaultTruncate]; got != want {
		t.Errorf("distinct fragments %d, want generated %d - dropped %d - truncated %d", got, sum.FragmentsGenerated, ff[FaultDrop], ff[FaultTruncate])
	}
	if sink.Dups != dupFragments {
		t.Errorf("duplicate fragments at the sink %d, want %d", sink.Dups, dupFragments)
	}
	if sink.BadCRC != f[FaultCorrupt] {
		t.Errorf("CRC mismatches %d, want %d injected", sink.BadCRC, f[FaultCorrupt])
	}
	if st.HeldBytes != 0 {
		t.Errorf("%d bytes still held after every release", st.HeldBytes)
	}
}

func synthConfig(to string, events uint64) Config {
	return Config{
		To: to, Events: events, Packing: 3, Seed: 7,
		Groups:       []schemas.SourceGroup{{Name: "ecal", Sources: []uint32{0, 1, 2}}, {Name: "muon", Sources: []uint32{10, 11}}},
		FragmentSize: SizeDist{Dist: DistLognormal, Mean: 200, Sigma: 0.5},
	}
}

func TestCrossProcessShmAllFaults(t *testing.T) {
	name := ringName(t)
	cfg := synthConfig("shm://"+name, 1500)
	cfg.Faults = allFaults(0.04)
	cfg.Sender = &shm.SenderOptions{RingSize: 1 << 16}
	in := shm.NewInput(name, shm.ReaderConfig{})
	sink := transporttest.NewCheckSink(0)
	_, errc := transporttest.Run(t, in, sink)
	sum := startEmulator(t, cfg).wait(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkBalance(t, sum, in.Stats(), sink, transport.Truncated, false)
}

func TestCrossProcessTCPAllFaults(t *testing.T) {
	cfg := synthConfig("", 1500)
	cfg.Faults = allFaults(0.04)
	cfg.Sender = &tcp.SenderOptions{Connections: 3, SocketBuffer: tcp.DefaultSendBuffer}
	in, err := tcp.Listen("127.0.0.1:0", tcp.Options{ExpectStreams: 3, CreditWindow: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg.To = "tcp://" + in.Addr().String()
	sink := transporttest.NewCheckSink(0)
	_, errc := transporttest.Run(t, in, sink)
	sum := startEmulator(t, cfg).wait(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := in.Stats()
	checkBalance(t, sum, st, sink, transport.TruncatedAtDisconnect, false)
	if want := uint64(3 + sum.Reconnects); st.Connections != want || sum.Reconnects < int(sum.Faults[FaultTruncate]) {
		t.Errorf("connections %d, want 3 + %d reconnects (>= %d truncations)", st.Connections, sum.Reconnects, sum.Faults[FaultTruncate])
	}
	if st.CreditsOutstanding != 0 || st.Open != 0 {
		t.Errorf("after the streams ended: %d credit bytes outstanding, %d connections open", st.CreditsOutstanding, st.Open)
	}
}

func TestCrossProcessUDPAllFaults(t *testing.T) {
	cfg := synthConfig("", 1500)
	cfg.Faults = allFaults(0.04)
	cfg.Rate = 5000 // events/s: well within what a loaded machine under -race receives without loss
	// A window and budget wider than any injected reorder or stall, and
	// than the sender being descheduled on a loaded machine (a 2 s budget
	// once saw 3 reordered datagrams arrive after their gap was declared
	// lost): every missing number is a drop, nothing arrives late. The
	// end marker flushes what is still missing, so a wide budget costs no time.
	in, err := udp.Listen("127.0.0.1:0", udp.Options{ExpectStreams: 1, ReorderWindow: 8192, LatencyBudget: 30 * time.Second, SocketBuffer: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg.To = "udp://" + in.Addr().String()
	sink := transporttest.NewCheckSink(0)
	_, errc := transporttest.Run(t, in, sink)
	sum := startEmulator(t, cfg).wait(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := in.Stats()
	checkBalance(t, sum, st, sink, transport.Truncated, true)
	if st.Lost != sum.Faults[FaultDrop] || st.Discarded[transport.Late] != 0 {
		t.Errorf("lost %d late %d, want lost = %d dropped, none late", st.Lost, st.Discarded[transport.Late], sum.Faults[FaultDrop])
	}
	if st.SocketBufferBytes <= 0 {
		t.Errorf("granted socket buffer not reported")
	}
}

// With a latency budget shorter than the stalls, stalled packets are
// declared lost and then arrive late; every sequence number is still
// accounted for exactly once.
func TestCrossProcessUDPLateAfterBudget(t *testing.T) {
	cfg := synthConfig("", 1200)
	cfg.Faults = Faults{Stall: 0.02, StallDuration: 30 * time.Millisecond, Reorder: 0.05, ReorderWindow: 40, Drop: 0.02, Duplicate: 0.02}
	cfg.Rate = 5000
	in, err := udp.Listen("127.0.0.1:0", udp.Options{ExpectStreams: 1, ReorderWindow: 16, LatencyBudget: 2 * time.Millisecond, SocketBuffer: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg.To = "udp://" + in.Addr().String()
	_, errc := transporttest.Run(t, in, transporttest.NewCheckSink(0))
	sum := startEmulator(t, cfg).wait(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := in.Stats()
	t.Logf("sent %+v\nreceived %+v", sum, st)
	delivered := st.Packets + st.Discarded[transport.Truncated] + st.Discarded[transport.Malformed]
	if delivered+st.Lost != sum.SequenceNumbers {
		t.Errorf("delivered %d + lost %d != %d sequence numbers sent", delivered, st.Lost, sum.SequenceNumbers)
	}
	if arrived := delivered + st.Discarded[transport.Late] + st.Discarded[transport.Duplicate]; arrived != sum.PacketsSent {
		t.Errorf("delivered + late + duplicate = %d, want %d datagrams sent", arrived, sum.PacketsSent)
	}
	if st.Discarded[transport.Late] == 0 || st.Lost <= sum.Faults[FaultDrop] {
		t.Errorf("late %d, lost %d (drops %d): the budget should have made stalled packets late", st.Discarded[transport.Late], st.Lost, sum.Faults[FaultDrop])
	}
}

// A reader slower than the writer throttles it (ring space, TCP credit)
// and nothing is lost.
func TestCrossProcessSlowReaderThrottlesWriter(t *testing.T) {
	for _, scheme := range []string{"shm", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			cfg := synthConfig("", 300)
			cfg.FragmentSize = SizeDist{Dist: DistFixed, Mean: 2000}
			sink := transporttest.NewCheckSink(200 * time.Microsecond)
			var in transport.Input
			if scheme == "shm" {
				name := ringName(t)
				cfg.To, cfg.Sender = "shm://"+name, &shm.SenderOptions{RingSize: 1 << 14}
				in = shm.NewInput(name, shm.ReaderConfig{})
			} else {
				tin, err := tcp.Listen("127.0.0.1:0", tcp.Options{ExpectStreams: 2, CreditWindow: 16 << 10, SocketBuffer: 64 << 10})
				if err != nil {
					t.Fatal(err)
				}
				cfg.To, cfg.Sender = "tcp://"+tin.Addr().String(), &tcp.SenderOptions{Connections: 2, SocketBuffer: 64 << 10}
				in = tin
			}
			_, errc := transporttest.Run(t, in, sink)
			sum := startEmulator(t, cfg).wait(t)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			st := in.Stats()
			if sum.ThrottledNs == 0 {
				t.Errorf("writer never throttled by a reader %v per packet slower", sink.Delay)
			}
			if scheme == "shm" && st.WriterThrottleNs != sum.ThrottledNs {
				t.Errorf("reader sees writer throttle %d ns, writer says %d", st.WriterThrottleNs, sum.ThrottledNs)
			}
			if got := sink.Counts().Unique; got != sum.FragmentsGenerated || st.Packets != sum.PacketsGenerated || st.DiscardTotal() != 0 {
				t.Errorf("lost data: %d of %d fragments, %d of %d packets, discards %v", got, sum.FragmentsGenerated, st.Packets, sum.PacketsGenerated, st.Discarded)
			}
			t.Logf("%s: throttled %v over %d packets", scheme, time.Duration(sum.ThrottledNs), sum.PacketsSent)
		})
	}
}

func TestCrossProcessWriterCrashDetected(t *testing.T) {
	name := ringName(t)
	cfg := synthConfig("shm://"+name, 0)
	cfg.Duration, cfg.Rate = 30*time.Second, 200
	p := startEmulator(t, cfg)
	r, err := shm.WaitReader(context.Background(), name, shm.ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 {
		_, release, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	p.cmd.Process.Kill()
	for {
		_, release, err := r.Next(ctx)
		if err == nil {
			release() // packets written before the kill
			continue
		}
		if !errors.Is(err, shm.ErrWriterDead) {
			t.Fatalf("after killing the writer: %v, want ErrWriterDead", err)
		}
		t.Log(err)
		break
	}
	// Everything was read and acknowledged and the writer cannot clean up:
	// the reader removes the ring when it detaches.
	path := filepath.Join(shm.Dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ring gone before the reader closed: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ring of a dead writer left behind after the reader closed: %v", err)
	}
}

func TestCrossProcessReaderRestartRereads(t *testing.T) {
	name := ringName(t)
	cfg := synthConfig("shm://"+name, 60) // 60 events x 5 sources / packing 3 = 100 packets
	p := startEmulator(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type key struct {
		src uint32
		ev  uint64
	}
	read := func(r *shm.Reader) (key, func()) {
		b, release, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := schemas.DecodeMFP(b)
		if err != nil {
			t.Fatal(err)
		}
		return key{m.SourceID, m.FirstEventID}, release
	}
	r1, err := shm.WaitReader(ctx, name, shm.ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var first []key
	var rel []func()
	for range 10 {
		k, release := read(r1)
		first = append(first, k)
		rel = append(rel, release)
	}
	for i := range 10 {
		if i != 6 { // 6 stays unreleased: the ack stops after packet 5
			rel[i]()
		}
	}
	r1.Close()
	r2, err := shm.OpenReader(name, shm.ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	n := 0
	for ; ; n++ {
		k, release := read(r2)
		if n < 4 && k != first[6+n] {
			t.Fatalf("restarted reader's packet %d is %v, want %v (first unacknowledged onwards)", n, k, first[6+n])
		}
		release()
		if n == 93 { // 100 - 6 acknowledged before the restart
			break
		}
	}
	sum := p.wait(t) // the emulator drains: it exits once everything is acknowledged
	if sum.PacketsSent != 100 {
		t.Fatalf("emulator sent %d packets, want 100", sum.PacketsSent)
	}
	// The writer closed the ring after its last packet, then exited: that
	// is the end of the stream, not a dead writer.
	if _, _, err := r2.Next(ctx); err != io.EOF {
		t.Fatalf("after the writer closed the ring and exited: %v, want io.EOF", err)
	}
}
