package atlas

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

// BenchmarkFullEventDecodeSplit decodes a byte-swapped full event of 100
// ROBs of 1 KiB of ROD data (Adler-32 on every ROB and on the event) and
// splits it into fragments, against reading the same bytes with
// io.ReadFull.
func BenchmarkFullEventDecodeSplit(b *testing.B) {
	e := testEvent(ChecksumAdler32)
	e.ROBs = nil
	for i := range 100 {
		r := testROB(uint32(0x110000+i), ChecksumAdler32, 256)
		e.ROBs = append(e.ROBs, r)
	}
	ev, err := AppendFullEvent(nil, &e, binary.BigEndian)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(ev)))
	buf := make([]byte, len(ev))
	var frags []schemas.Fragment
	benchratio.Compare(b, func(ops int) {
		for range ops {
			d, _, _, err := DecodeFullEvent(ev)
			if err != nil {
				b.Fatal(err)
			}
			if frags, err = SplitFullEvent(frags[:0], &d); err != nil || len(frags) != 101 { // 100 ROBs and the header
				b.Fatal(err)
			}
		}
	}, func(ops int) {
		for range ops {
			if _, err := io.ReadFull(bytes.NewReader(ev), buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
