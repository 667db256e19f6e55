package emulator

import (
	"context"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/node/transport/tcp"
)

// The emulator, a process of its own, feeds the real event builder through
// a ring and through TCP with every fault injected: the builder's ledger
// reconciles with what the emulator says it sent and injected.
func TestCrossProcessIntoBuilder(t *testing.T) {
	for _, scheme := range []string{"shm", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			cfg := synthConfig("", 1500)
			cfg.Faults = allFaults(0.03)
			// The ring and the credit window must hold what the builder keeps
			// while it waits for the fragments of incomplete events (here the
			// whole run): otherwise the packets it holds stop the writer, later
			// fragments miss their events' timeouts and arrive late.
			b, err := builder.New(builder.Config{Groups: cfg.Groups, Run: 1})
			if err != nil {
				t.Fatal(err)
			}
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for rec := range b.Batches() {
					rec.Release()
				}
			}()
			var in transport.Input
			truncReason := transport.Truncated
			if scheme == "shm" {
				name := ringName(t)
				cfg.To, cfg.Sender = "shm://"+name, &shm.SenderOptions{RingSize: 4 << 20}
				in = shm.NewInput(name, shm.ReaderConfig{})
			} else {
				tin, err := tcp.Listen("127.0.0.1:0", tcp.Options{ExpectStreams: 2, CreditWindow: 4 << 20})
				if err != nil {
					t.Fatal(err)
				}
				cfg.To, cfg.Sender = "tcp://"+tin.Addr().String(), &tcp.SenderOptions{Connections: 2, SocketBuffer: tcp.DefaultSendBuffer}
				in, truncReason = tin, transport.TruncatedAtDisconnect
			}
			_, errc := transporttest.Run(t, in, b)
			sum := startEmulator(t, cfg).wait(t)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err := b.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-drained
			st, led := in.Stats(), b.Ledger()
			t.Logf("sent %+v\nreadout %+v\nbuilder %+v", sum, st, led)
			f, ff := sum.Faults, sum.FaultFragments
			if st.Discarded[truncReason] != f[FaultTruncate] {
				t.Errorf("truncated %d, want %d", st.Discarded[truncReason], f[FaultTruncate])
			}
			if !led.Balanced() || led.FragmentsIn != st.Fragments || led.FragmentsOpen != 0 {
				t.Errorf("builder ledger unbalanced or not matching the %d fragments handed on", st.Fragments)
			}
			if want := sum.FragmentsGenerated - ff[FaultDrop] - ff[FaultTruncate]; led.FragmentsInEvents != want {
				t.Errorf("fragments in events %d, want generated %d - dropped %d - truncated %d", led.FragmentsInEvents, sum.FragmentsGenerated, ff[FaultDrop], ff[FaultTruncate])
			}
			if got := led.Discarded[builder.ReasonDuplicate] + led.Discarded[builder.ReasonLate]; got != ff[FaultDuplicate] || led.Discards() != got {
				t.Errorf("builder discarded %v, want %d duplicate fragments only", led.Discarded, ff[FaultDuplicate])
			}
			if led.EventsBuilt != 1500 || led.EventsIncomplete == 0 || led.EventsCorrupt == 0 || led.EventsCorrupt > f[FaultCorrupt] {
				t.Errorf("events built %d (want 1500), incomplete %d (want > 0), corrupt %d (want 1..%d)", led.EventsBuilt, led.EventsIncomplete, led.EventsCorrupt, f[FaultCorrupt])
			}
		})
	}
}
