package shm

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
)

// placedPass writes the packets of one pass over a sample with
// WritePlaced (pl[i] kept with packet i) while the test reads them, and
// returns what the reader got and where in the ring each packet lay.
func placedPass(t *testing.T, w *Writer, r *Reader, pkts [][]byte, pl []transport.Placement) (got [][]byte, at []*byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		for i, p := range pkts {
			pl[i].PassStart = i == 0
			if err := w.WritePlaced(ctx, p, &pl[i]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	for range pkts {
		p, release, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, bytes.Clone(p))
		at = append(at, &p[0])
		release()
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	return got, at
}

// samplePass is a pass's packets: n of size bytes, the first 8 bytes the
// pass number (the header that changes), the rest fill.
func samplePass(pass uint64, n, size int, fill byte) [][]byte {
	pkts := make([][]byte, n)
	for i := range pkts {
		p := bytes.Repeat([]byte{fill + byte(i)}, size)
		binary.LittleEndian.PutUint64(p, pass)
		pkts[i] = p
	}
	return pkts
}

// A pass that fits in a lap comes round at the same places, and only the
// header is written again: the test breaks the caller's promise (the fill
// changes from the second pass on) to see which bytes the writer wrote.
// A packet whose length changed, and every one after it that the change
// moved, is written whole.
func TestWritePlacedWritesOnlyTheHeaderALapLater(t *testing.T) {
	w, r := openRing(t, ringName(t), 8192)
	const n, size = 10, 700 // 10 records of 768 bytes: a pass is 7680 of the lap's 8192, the skip 1/16 of it
	pl := make([]transport.Placement, n)
	for i := range pl {
		pl[i].Header = 8
	}
	first, at0 := placedPass(t, w, r, samplePass(0, n, size, 0x10), pl)
	for i, p := range first {
		if want := samplePass(0, n, size, 0x10)[i]; !bytes.Equal(p, want) {
			t.Fatalf("pass 0 packet %d: read %x..., want %x...", i, p[:12], want[:12])
		}
	}
	for pass := uint64(1); pass <= 3; pass++ {
		got, at := placedPass(t, w, r, samplePass(pass, n, size, 0x80), pl)
		for i, p := range got {
			if at[i] != at0[i] {
				t.Fatalf("pass %d packet %d: at %p in the ring, pass 0 at %p: the pass did not start a lap", pass, i, at[i], at0[i])
			}
			if h := binary.LittleEndian.Uint64(p); h != pass {
				t.Fatalf("pass %d packet %d: header %d, want %d (the header is written every pass)", pass, i, h, pass)
			}
			if !bytes.Equal(p[8:], first[i][8:]) {
				t.Fatalf("pass %d packet %d: bytes past the header were written again (%x, pass 0 had %x)", pass, i, p[8], first[i][8])
			}
		}
		// What the sender reports as placed (SenderStats.PlacedBytes):
		// all but the headers of every packet since pass 0.
		if got, want := w.PlacedBytes(), pass*n*(size-8); got != want {
			t.Fatalf("after pass %d: PlacedBytes %d, want %d", pass, got, want)
		}
	}
	// Packet 2 grows by 100 bytes (one more record line): it and the two
	// after it are written whole; the two before it are still in place.
	pkts := samplePass(4, n, size, 0x80)
	pkts[2] = append(pkts[2], bytes.Repeat([]byte{0x82}, 100)...)
	got, _ := placedPass(t, w, r, pkts, pl)
	for i, p := range got {
		want := pkts[i]
		if i < 2 {
			want = append(binary.LittleEndian.AppendUint64(nil, 4), first[i][8:]...)
		}
		if !bytes.Equal(p, want) {
			t.Fatalf("after a length change, packet %d: read %d bytes %x..., want %d bytes %x...", i, len(p), p[:12], len(want), want[:12])
		}
	}
}

// A pass longer than a lap never finds its bytes in place, nor does one
// that would leave more than 1/16 of the ring skipped at every pass (the
// ring would hold one or two passes, not its size): every packet is
// written whole, and no pass adds a skip record.
func TestWritePlacedPassNotFittingALapIsWrittenWhole(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		want uint64 // the write pointer after 3 passes
	}{
		// 36 records, 10 to a lap (7680 bytes and a skip of 512): 3 laps
		// and 6 records.
		{"longer than a lap", 12, 3*8192 + 6*768},
		// 9 records, 3456 bytes: a pass start would skip 4736.
		{"under 15/16 of a lap", 3, 9 * 768},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, r := openRing(t, ringName(t), 8192)
			pl := make([]transport.Placement, c.n)
			for i := range pl {
				pl[i].Header = 8
			}
			placedPass(t, w, r, samplePass(0, c.n, 700, 0x10), pl)
			for pass := uint64(1); pass <= 2; pass++ {
				pkts := samplePass(pass, c.n, 700, 0x40*byte(pass))
				got, _ := placedPass(t, w, r, pkts, pl)
				for i, p := range got {
					if !bytes.Equal(p, pkts[i]) {
						t.Fatalf("pass %d packet %d: read %x..., want %x...", pass, i, p[:12], pkts[i][:12])
					}
				}
			}
			if w.w != c.want {
				t.Fatalf("write pointer at %d after 3 passes, want %d (a skip where a pass started)", w.w, c.want)
			}
		})
	}
}
