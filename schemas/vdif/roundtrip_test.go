package vdif

import (
	"bytes"
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/schemas"
)

// TestBuilderRoundTrip is the proof of the VDIF mapping: sample.vdif split
// by thread (one fragment per frame, or per-thread MFPs), fed to the event
// builder in shuffled arrival order, built, and joined in the recording's
// thread order gives back the original file byte for byte.
func TestBuilderRoundTrip(t *testing.T) {
	b := sample(t, "sample.vdif")
	order, err := ScanSources(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"fragments", "packets"} {
		t.Run(mode, func(t *testing.T) {
			joined := map[uint64][]byte{} // event id -> the event's frames in recording order
			var status []schemas.EventStatus
			j := Joiner{Order: order}
			var released atomic.Int64
			release := func() { released.Add(1) }
			rng := rand.New(rand.NewPCG(3, 5))
			fs := frames(t, bytes.Clone(b))
			units := 0
			cfg := builder.Config{Groups: []schemas.SourceGroup{{Name: "vdif", Sources: slices.Sorted(slices.Values(order))}}, Run: 7}
			l := buildtest.Run(t, cfg, func(ctx context.Context, bld *builder.Builder) {
				switch mode {
				case "fragments":
					rng.Shuffle(len(fs), func(i, k int) { fs[i], fs[k] = fs[k], fs[i] })
					for i := range fs {
						if err := bld.AddFragment(ctx, FrameFragment(&fs[i]), release); err != nil {
							t.Fatal(err)
						}
					}
					units = len(fs)
				case "packets":
					p, _ := NewPacker(2)
					var buf []byte
					for i := range fs {
						buf = p.Add(buf, &fs[i])
					}
					buf = p.Flush(buf)
					var pkts []schemas.MFP
					for len(buf) > 0 {
						pk, n, err := schemas.DecodeMFP(buf)
						if err != nil {
							t.Fatal(err)
						}
						pkts, buf = append(pkts, pk), buf[n:]
					}
					rng.Shuffle(len(pkts), func(i, k int) { pkts[i], pkts[k] = pkts[k], pkts[i] })
					for _, pk := range pkts {
						if err := bld.AddPacket(ctx, pk, release); err != nil {
							t.Fatal(err)
						}
					}
					units = len(pkts)
				}
			}, func(eb *schemas.EventBatch, i int) {
				out, err := j.Join(nil, eb, i)
				if err != nil {
					t.Error(err)
				}
				joined[eb.EventID(i)] = out
				status = append(status, eb.Status(i))
			})
			if int(released.Load()) != units {
				t.Fatalf("%d releases for %d %s", released.Load(), units, mode)
			}
			if !l.Balanced() || l.FragmentsIn != 16 || l.FragmentsInEvents != 16 || l.EventsComplete != 2 || l.Discards() != 0 {
				t.Fatalf("ledger %+v", l)
			}
			ids := slices.Sorted(maps.Keys(joined))
			var out []byte
			for _, id := range ids {
				out = append(out, joined[id]...)
			}
			if !bytes.Equal(out, b) {
				t.Fatalf("joined %d bytes from %d events differ from the %d-byte sample", len(out), len(ids), len(b))
			}
			for _, s := range status {
				if s != 0 {
					t.Fatalf("event status %#x, want complete and clean", s)
				}
			}
		})
	}
}
