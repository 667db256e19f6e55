package shm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/schemas"
)

// ringIntoBuilder writes events of nsrc fragments of size bytes, one
// packet per fragment, into a ring of ringBytes read by an Input into a
// builder of cfg (the builder's groups are set here), and returns the
// builder's ledger once the input ended and the builder closed, with the
// number of events delivered and the input's log.
func ringIntoBuilder(t *testing.T, ringBytes uint64, nsrc, size, events int, cfg builder.Config) (builder.Ledger, int, string) {
	t.Helper()
	cfg.Groups = []schemas.SourceGroup{{Name: "tracker"}}
	for s := range nsrc {
		cfg.Groups[0].Sources = append(cfg.Groups[0].Sources, uint32(s))
	}
	b, err := builder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for rec := range b.Batches() {
			rows += int(rec.NumRows())
			rec.Release()
		}
	}()
	name := ringName(t)
	w, err := CreateWriter(name, WriterConfig{DataSize: ringBytes})
	if err != nil {
		t.Fatal(err)
	}
	var logged transporttest.LogBuffer
	in := NewInput(name, ReaderConfig{})
	in.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	// A deadlock (the writer waiting for ring space the builder holds in
	// a batch that never closes) ends here, as a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx, b) }()
	payload := bytes.Repeat([]byte{0xa5}, size)
	var pkt []byte
	for ev := range events {
		for s := range nsrc {
			pkt = schemas.AppendMFP(pkt[:0], uint32(s), uint64(ev), 0, 0, [][]byte{payload}, nil)
			if err := w.Write(ctx, pkt); err != nil {
				t.Fatalf("writing event %d source %d: %v (builder ledger %+v)", ev, s, err, b.Ledger())
			}
		}
	}
	w.Close()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-drained
	return b.Ledger(), rows, logged.String()
}

// A ring smaller than the builder's batch: the reader, caught up with the
// writer while the builder holds most of the ring, has the builder close
// its partial batch, so the writer is not held up for the batch's latency
// (here an hour: the old reader deadlocked until the test's deadline).
func TestRingSmallerThanBatchRelieved(t *testing.T) {
	const events, nsrc = 600, 4
	l, rows, log := ringIntoBuilder(t, 64<<10, nsrc, 200, events, builder.Config{
		BatchEvents: 1000, BatchLatency: time.Hour, Timeout: time.Hour,
	})
	if rows != events || l.EventsComplete != events || !l.Balanced() {
		t.Fatalf("%d rows, %d complete of %d events, balanced %v", rows, l.EventsComplete, events, l.Balanced())
	}
	// 600 events of ~1 KiB through 64 KiB: at least 600 KiB / 64 KiB
	// batches closed early.
	if l.BatchesRelieved < 9 || l.BatchesBuilt < l.BatchesRelieved {
		t.Fatalf("%d batches, %d closed early to relieve the ring; want >= 9", l.BatchesBuilt, l.BatchesRelieved)
	}
	if log != "" {
		t.Fatalf("unexpected log: %s", log)
	}
}

// A ring too small for one event: nothing the builder holds is complete,
// so relieving cannot help; the input says so once, naming the ring, and
// the events come out at the builder's timeout.
func TestRingSmallerThanEventLogged(t *testing.T) {
	const events, nsrc = 3, 8
	l, rows, log := ringIntoBuilder(t, 4096, nsrc, 1000, events, builder.Config{
		BatchEvents: 1000, BatchLatency: time.Hour, Timeout: 100 * time.Millisecond, BehindWait: -1,
	})
	if rows != events || !l.Balanced() {
		t.Fatalf("%d rows of %d events, balanced %v", rows, events, l.Balanced())
	}
	if n := strings.Count(log, "readout ring full of packets of events still open, none built to hand back"); n != 1 || !strings.Contains(log, "ring_bytes=4096") {
		t.Fatalf("want one warning naming the ring's 4096 bytes, got %q", log)
	}
}
