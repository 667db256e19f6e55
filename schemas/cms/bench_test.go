package cms

import (
	"bytes"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

// benchFRDFile is an FRD file of 20 v6 events of 100 FEDs of 2 KiB each
// (about 4 MB), close to a CMS Run 3 event's FED count.
func benchFRDFile(b *testing.B) []byte {
	var data []byte
	for id := range 100 {
		var err error
		if data, err = AppendFED(data, &FED{SourceID: uint16(id), LV1ID: 1, Payload: payloadWords(uint16(id), 256)}); err != nil {
			b.Fatal(err)
		}
	}
	evs := make([]FRDEvent, 20)
	for i := range evs {
		evs[i] = FRDEvent{Version: 6, Run: 1, Event: uint64(i), Data: data}
	}
	f, err := AppendFRDFile(nil, &FRDFileHeader{Version: 2}, evs)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkFRDReadSplit reads an FRD file (event crc32c checked) and
// splits every event into per-FED fragments (FED CRC-16 and fragment
// CRC-32C computed), against reading the same bytes with io.ReadFull.
func BenchmarkFRDReadSplit(b *testing.B) {
	file := benchFRDFile(b)
	b.SetBytes(int64(len(file)))
	buf := make([]byte, len(file))
	var frags []schemas.Fragment
	benchratio.Compare(b, func(ops int) {
		for range ops {
			fr, err := NewFileReader(bytes.NewReader(file))
			if err != nil {
				b.Fatal(err)
			}
			for {
				e, err := fr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if frags, err = SplitFRD(frags[:0], &e); err != nil || len(frags) != 101 { // 100 FEDs and the header
					b.Fatal(err)
				}
			}
		}
	}, func(ops int) {
		for range ops {
			if _, err := io.ReadFull(bytes.NewReader(file), buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
