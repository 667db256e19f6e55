package node

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/internal/memtransport"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// A transport is a package and one registration line: this is the line for
// the test transport mem://.
func init() { transport.Register(memtransport.Transport) }

// TestNewTransportEndToEnd runs a node whose only input is of the test
// transport, configured with its own key and fed by an embedded emulator
// through its sender: the configuration takes both, the node opens the
// input through the registry, and the builder builds every event sent.
func TestNewTransportEndToEnd(t *testing.T) {
	text := `
node: {id: mem}
run: 7
inputs:
  - uri: mem://node-e2e
    queue: 4
    emulator: {events: 300, packing: 3, fragment_size: {mean: 200}, seed: 5}
sources: [{name: a, sources: "0-3"}]
builder: {batch_events: 16, batch_latency: 5ms}
store: {path: STORE}
http: {address: "127.0.0.1:0"}
`
	cfg, err := config.Parse([]byte(strings.Replace(text, "STORE", filepath.Join(t.TempDir(), "store"), 1)))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := cfg.Inputs[0].Options.(*memtransport.Options); !ok || o.Queue != 4 {
		t.Fatalf("input settings %#v, want the mem transport's with queue 4", cfg.Inputs[0].Options)
	}
	n, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := n.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 300 events in packets of 3 from 4 sources: 400 packets, 1200 fragments.
	if !l.Balanced || l.FragmentsReceived != 1200 || l.FragmentsInEvents != 1200 || l.EventsBuilt != 300 || l.EventsComplete != 300 || l.EventsStoredDeferred != 300 {
		t.Fatalf("ledger %+v", l)
	}
	if len(l.Emulators) != 1 || l.Emulators[0].To != "mem://node-e2e" || l.Emulators[0].PacketsSent != 400 {
		t.Fatalf("emulator summaries %+v", l.Emulators)
	}
}

// TestListenAddressShown: network inputs configured with port 0 tell the
// port the kernel chose, in the log ("input listening") and in /status
// (inputs[].address); a peer:// input once told neither.
func TestListenAddressShown(t *testing.T) {
	text := `
node: {id: addr}
inputs:
  - uri: peer://127.0.0.1:0?transport=tcp
    pool: 4MiB
    max_packet: 1MiB
  - uri: tcp://127.0.0.1:0
sources: [{name: a, sources: "0-3"}]
store: {path: STORE}
http: {address: "127.0.0.1:0"}
`
	cfg, err := config.Parse([]byte(strings.Replace(text, "STORE", filepath.Join(t.TempDir(), "store"), 1)))
	if err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	n, err := New(cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := n.Run(context.Background()); done <- err }()
	var st Status
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = n.Status(); len(st.Inputs) == 2 || time.Now().After(deadline) {
			break
		}
	}
	n.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(st.Inputs) != 2 {
		t.Fatalf("status inputs %+v", st.Inputs)
	}
	for _, in := range st.Inputs {
		host, port, err := net.SplitHostPort(in.Address)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("input %s: address %q, want 127.0.0.1 and the chosen port", in.URI, in.Address)
			continue
		}
		found := false
		for _, r := range logged.records(t) {
			found = found || r["msg"] == "input listening" && r["input"] == in.URI && r["addr"] == in.Address
		}
		if !found {
			t.Errorf("no log record \"input listening\" with input %s addr %s: %v", in.URI, in.Address, logged.records(t))
		}
	}
}

// countSink counts the packets and fragments handed to it.
type countSink struct{ packets, frags atomic.Int64 }

func (s *countSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	s.packets.Add(1)
	s.frags.Add(int64(p.N))
	release()
	return nil
}

// TestEmulatorFileReadWhileOpening: an embedded emulator's file is read
// and split while the node opens its parts (start-up), not when the run
// begins: the emulator sends all of it even if the file is gone by then.
func TestEmulatorFileReadWhileOpening(t *testing.T) {
	dir := t.TempDir()
	sample := filepath.Join(dir, "sample.mfp")
	if _, err := emulator.Run(context.Background(), emulator.Config{To: "file://" + sample, Events: 30, Packing: 3,
		Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	text := `
node: {id: prep}
inputs:
  - uri: mem://node-prepared
    emulator: {from: SAMPLE}
sources: [{name: a, sources: "0-3"}]
store: {path: STORE}
http: {address: "off"}
`
	text = strings.NewReplacer("SAMPLE", sample, "STORE", filepath.Join(dir, "store")).Replace(text)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parts, err := OpenParts(ctx, cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeParts(parts)
	if err := os.Remove(sample); err != nil {
		t.Fatal(err)
	}
	var sink countSink
	ran := make(chan error, 1)
	go func() { ran <- parts.Inputs[0].Run(ctx, &sink) }()
	if err := parts.Emulators[0](ctx); err != nil {
		t.Fatalf("emulator, its file removed after the parts opened: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// 30 events in packets of 3 from 4 sources.
	if sink.packets.Load() != 40 || sink.frags.Load() != 120 {
		t.Fatalf("%d packets, %d fragments; want 40, 120", sink.packets.Load(), sink.frags.Load())
	}
}
