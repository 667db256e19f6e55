package inspect

import (
	"bufio"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// Inspect detects the format of r from its first HeadBytes bytes, reads it
// to the end and returns the report, with detail for the first maxEvents
// events. Bad checksums are counted, not fatal. Any other decode error
// stops the reading: the report of what came before is returned with the
// error, a *schemas.DecodeError naming the byte offset in the stream and
// what was expected. An unrecognised stream is ErrBadMagic at offset 0.
func Inspect(r io.Reader, maxEvents int) (*Report, error) {
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
	}
	if len(head) == 0 {
		return nil, schemas.Errorf("inspect", "file", 0, schemas.ErrTruncated, "the file is empty")
	}
	return nil, schemas.Errorf("inspect", "header", 0, schemas.ErrBadMagic,
		"no known format: expected a sluice fragment or MFP magic, \"RAW_\", an eformat marker, an LHCb MDF header, an FRD event, VDIF or Mark 5B (first bytes % x)", head[:min(len(head), 16)])
}
