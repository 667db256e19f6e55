// Package inspect is `sluice inspect`: it finds a file's format from its
// bytes alone (never from its name) through the registry of formats
// (schemas/formats), has the format summarise it (format.Format.Inspect),
// and renders the report as text for people or as JSON for tools.
package inspect

import (
	"bytes"
	"compress/gzip"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
)

// Inspect detects the format of r from its first format.HeadBytes bytes,
// reads it to the end and returns the report, with detail for the first
// maxEvents events (records, frames, rows). Bad checksums are counted, not
// fatal. Any other decode error stops the reading: the report of what came
// before is returned with the error, a *schemas.DecodeError naming the byte
// offset in the stream and what was expected. An empty stream is
// ErrTruncated, an unrecognised one ErrBadMagic, both at offset 0. Formats
// read through a footer (Arrow IPC, Parquet) read r into memory first
// unless it is an io.ReaderAt and io.Seeker (an *os.File is). A gzip
// stream (a capture kept compressed) is read through gzip; offsets are
// then in the uncompressed stream.
func Inspect(r io.Reader, maxEvents int) (*format.Report, error) {
	return inspectWith(r, maxEvents, nil)
}

// inspectWith is Inspect with the allocator of Arrow buffers (see
// format.Stream.Mem).
func inspectWith(r io.Reader, maxEvents int, mem memory.Allocator) (*format.Report, error) {
	s, head, err := format.NewStream(r)
	if err != nil {
		return nil, err
	}
	s.Mem = mem
	if bytes.HasPrefix(head, gzipMagic) {
		zr, err := gzip.NewReader(s)
		if err != nil {
			return nil, schemas.Errorf("inspect", "gzip header", 0, schemas.ErrBadHeader, "%v", err)
		}
		defer zr.Close()
		return inspectWith(zr, maxEvents, mem)
	}
	if f := formats.Detect(head); f != nil {
		return f.Inspect(s, maxEvents)
	}
	if len(head) == 0 {
		return nil, schemas.Errorf("inspect", "file", 0, schemas.ErrTruncated, "the file is empty")
	}
	if err := formats.Refusal(head); err != nil {
		return nil, err
	}
	return nil, schemas.Errorf("inspect", "header", 0, schemas.ErrBadMagic,
		"no known format: expected %s (first bytes % x)", formats.Signs(), head[:min(len(head), 16)])
}

// gzipMagic starts a gzip stream (RFC 1952: ID1, ID2, CM = deflate).
var gzipMagic = []byte{0x1f, 0x8b, 0x08}
