package vdif

import (
	"bytes"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
)

// BenchmarkVDIFDecode reads sample.vdif repeated to 4 MiB from memory,
// decoding every header and splitting every frame into a sluice fragment
// (CRC-32C included). The baseline io.ReadFull's the same bytes into one
// buffer; "ratio" is the subject's throughput as a fraction of it.
func BenchmarkVDIFDecode(b *testing.B) {
	one := sample(b, "sample.vdif")
	stream := bytes.Repeat(one, (4<<20)/len(one))
	want := len(stream) / 5032
	b.SetBytes(int64(len(stream)))
	buf := make([]byte, len(stream))
	var crc uint32
	benchratio.Compare(b, func(ops int) {
		for range ops {
			rd := NewReader(bytes.NewReader(stream))
			n := 0
			for {
				f, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				crc ^= FrameFragment(&f).CRC
				n++
			}
			if n != want {
				b.Fatalf("%d frames, want %d", n, want)
			}
		}
	}, func(ops int) {
		for range ops {
			if _, err := io.ReadFull(bytes.NewReader(stream), buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	_ = crc
}
