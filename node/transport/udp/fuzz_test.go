package udp

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

const sampleVDIF = "../../../testdata/third_party/baseband/sample.vdif"

// seedDatagrams are valid datagrams of both formats and cut copies.
func seedDatagrams(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 3, 100, 0, 3, [][]byte{[]byte("abc"), {}, []byte("0123456789")}, nil)
	f.Add(binary.LittleEndian.AppendUint64(nil, 7), mfp)
	if b, err := os.ReadFile(sampleVDIF); err == nil {
		if fr, err := vdif.DecodeFrame(b); err == nil {
			vtp := vdif.AppendVTP(nil, 9, fr.Bytes)
			f.Add(vtp[:8], vtp[8:])
			f.Add(vtp[:8], vtp[8:100])
		}
	}
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, mfp[:40])
}

// FuzzDatagramDecoders: neither decoder panics or reads outside the
// datagram and its headroom, and what decodes is a consistent packet.
func FuzzDatagramDecoders(f *testing.F) {
	seedDatagrams(f)
	f.Fuzz(func(t *testing.T, seq, payload []byte) {
		if len(seq) != seqSize {
			return
		}
		for _, dec := range []DatagramDecoder{DecodeMFPDatagram, DecodeVTPDatagram} {
			b := make([]byte, udpHeadroom, udpHeadroom+len(seq)+len(payload))
			b = append(append(b, seq...), payload...)
			p, err := dec(b, udpHeadroom)
			if err != nil {
				continue
			}
			n := 0
			p.Fragments(func(_ int, _ uint64, _ uint32, pl []byte) bool { n += len(pl); return true })
			if n > len(payload) || len(p.Bytes()) > len(b) {
				t.Fatalf("packet of %d payload bytes from a %d-byte datagram", n, len(payload))
			}
		}
	})
}

// FuzzSeqWindow feeds a sender's sequence numbers (each byte: a step from
// the previous number, so that reordering, duplicates and gaps all occur)
// through the reorder window and checks its accounting: every number from
// the start up to the end marker is delivered once or declared lost, in
// increasing order, and every arrival is delivered, late or a duplicate.
func FuzzSeqWindow(f *testing.F) {
	f.Add([]byte{1, 1, 1, 1}, uint8(4))
	f.Add([]byte{3, 0xFF, 1, 1, 0, 7, 0xFE, 40, 1}, uint8(2))
	f.Add([]byte{200, 1, 0xF0, 0x80, 2}, uint8(16))
	f.Fuzz(func(t *testing.T, steps []byte, size uint8) {
		if size == 0 {
			return
		}
		var c transport.Counters
		pool := rxbuf.Pool{Held: &c}
		var seqs []uint64
		s := uint64(1 << 40) // far from 0: steps never wrap
		for _, st := range steps {
			s += uint64(int8(st)) // -128..127
			seqs = append(seqs, s)
		}
		if len(seqs) == 0 {
			return
		}
		w := newSeqWindow(int(size), seqs[0], &c)
		start := w.next
		var delivered []uint64
		deliver := func(b *rxbuf.Buf, n int) error {
			delivered = append(delivered, binary.LittleEndian.Uint64(b.B))
			b.Put()
			return nil
		}
		end := uint64(0)
		now := time.Now()
		for _, q := range seqs {
			b := pool.Get(8)
			binary.LittleEndian.PutUint64(b.B, q)
			if err := w.add(q, b, 8, now, deliver); err != nil {
				t.Fatal(err)
			}
			end = max(end, q+1)
		}
		if err := w.flush(end, deliver); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(delivered); i++ {
			if delivered[i] <= delivered[i-1] {
				t.Fatalf("delivered %d after %d", delivered[i], delivered[i-1])
			}
		}
		st := c.Snapshot()
		if got := uint64(len(delivered)) + st.Lost; got != end-start {
			t.Fatalf("delivered %d + lost %d != %d numbers [%d, %d)", len(delivered), st.Lost, end-start, start, end)
		}
		if got := uint64(len(delivered)) + st.Discarded[transport.Late] + st.Discarded[transport.Duplicate]; got != uint64(len(seqs)) {
			t.Fatalf("delivered + late + duplicate = %d, %d arrived", got, len(seqs))
		}
		if w.held != 0 {
			t.Fatalf("%d datagrams still held after flush", w.held)
		}
	})
}
