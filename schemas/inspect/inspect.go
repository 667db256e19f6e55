package inspect

import (
	"bufio"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// Inspect detects the format of r from its first HeadBytes bytes, reads it
// to the end and returns the report, with detail for the first maxEvents
// events (records, frames, rows). Bad checksums are counted, not fatal. Any
// other decode error stops the reading: the report of what came before is
// returned with the error, a *schemas.DecodeError naming the byte offset in
// the stream and what was expected. An unrecognised stream is ErrBadMagic
// at offset 0. Arrow IPC and Parquet files are read through their footers:
// when r is not an io.ReaderAt and io.Seeker (an *os.File is) it is read
// into memory first.
func Inspect(r io.Reader, maxEvents int) (*Report, error) {
	return inspectWith(r, maxEvents, memory.DefaultAllocator)
}

// inspectWith is Inspect with the allocator of the Arrow and Parquet readers.
func inspectWith(r io.Reader, maxEvents int, mem memory.Allocator) (*Report, error) {
	start := int64(-1) // where r stood, for the table readers
	if s, ok := r.(io.Seeker); ok {
		if at, err := s.Seek(0, io.SeekCurrent); err == nil {
			start = at
		}
	}
	br := bufio.NewReaderSize(r, HeadBytes)
	head, err := br.Peek(HeadBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	f := Detect(head)
	switch f {
	case NativeFragment, NativeMFP:
		return inspectNative(br, f, maxEvents)
	case CMSFRD:
		return inspectFRD(br, maxEvents)
	case ATLASFullEvent, ATLASROB:
		return inspectATLAS(br, f, maxEvents)
	case LHCbMDF, LHCbMEP:
		rep, err := lhcb.Inspect(br, maxEvents)
		return fromLHCb(rep), err
	case VDIF, Mark5B:
		rep, err := vdif.Inspect(br, maxEvents)
		return fromVDIF(rep), err
	case ArrowIPC, Parquet:
		rs, err := tableSource(r, start, br)
		if err != nil {
			return nil, err
		}
		return inspectTable(rs, f, maxEvents, mem)
	}
	if len(head) == 0 {
		return nil, schemas.Errorf("inspect", "file", 0, schemas.ErrTruncated, "the file is empty")
	}
	return nil, schemas.Errorf("inspect", "header", 0, schemas.ErrBadMagic,
		"no known format: expected a sluice fragment or MFP magic, \"RAW_\", an eformat marker, an LHCb MDF header, an FRD event, VDIF, Mark 5B, an Arrow IPC file (ARROW1) or Parquet (PAR1) (first bytes % x)", head[:min(len(head), 16)])
}
