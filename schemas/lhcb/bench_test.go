package lhcb

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

// benchReadSplit reads the MDF sample from a bytes.Reader and splits every
// event into its 1239 fragments, ops times, with the given record checksum
// handling and with or without the fragments' CRC-32C.
func benchReadSplit(b *testing.B, mode ChecksumMode, crc bool) {
	data := readFile(b, mdfSample)
	sources, err := ScanSources(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	sp, err := NewSplitter(sources)
	if err != nil {
		b.Fatal(err)
	}
	var (
		frags []schemas.Fragment
		br    bytes.Reader
		r     = NewReader(&br)
		buf   = make([]byte, len(data))
	)
	r.Checksums = mode
	sp.SkipCRC = !crc
	b.SetBytes(int64(len(data)))
	benchratio.Compare(b, func(ops int) {
		for range ops {
			br.Reset(data)
			r.Reset(&br)
			for i := uint64(0); ; i++ {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if frags, err = sp.Split(frags[:0], &rec.Header, rec.Body, i); err != nil {
					b.Fatal(err)
				}
			}
		}
	}, func(ops int) {
		for range ops {
			br.Reset(data)
			if _, err := io.ReadFull(&br, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMDFReadSplit: read the records and split them into fragments,
// without recomputing the record checksums (ChecksumSkip) and without the
// fragments' CRC-32C (computed later, when the fragments are encoded, e.g.
// by schemas.AppendMFP). The baseline is io.ReadFull of the same bytes into
// a buffer.
func BenchmarkMDFReadSplit(b *testing.B) { benchReadSplit(b, ChecksumSkip, false) }

// BenchmarkMDFReadSplitCRC is the same with every fragment's CRC-32C
// computed, as fragments handed to the builder directly need.
func BenchmarkMDFReadSplitCRC(b *testing.B) { benchReadSplit(b, ChecksumSkip, true) }

// BenchmarkMDFReadSplitVerify also verifies every record checksum: the
// one-at-a-time hash is serial, a few cycles per byte, and dominates.
func BenchmarkMDFReadSplitVerify(b *testing.B) { benchReadSplit(b, ChecksumVerify, true) }
