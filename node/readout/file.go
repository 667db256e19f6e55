package readout

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/sluice-daq/sluice/schemas"
)

// FileInput reads a native MFP stream file (file://PATH): multi-fragment
// packets back to back, as `sluice readout --to file://PATH` writes them.
type FileInput struct {
	path string
	c    counters
	pool bufPool
}

// NewFileInput returns the input for the file at path; Run opens it.
func NewFileInput(path string) *FileInput {
	in := &FileInput{path: path}
	in.pool.held = &in.c
	return in
}

// Stats returns the counters.
func (in *FileInput) Stats() Stats { return in.c.snapshot() }

// Run hands every packet of the file to sink and returns nil at its end or
// when ctx ends. A packet cut short by the end of the file is counted
// truncated; a header that does not decode ends the read with its
// *schemas.DecodeError (offsets from the start of the file), since nothing
// after it can be framed.
func (in *FileInput) Run(ctx context.Context, sink Sink) error {
	f, err := os.Open(in.path)
	if err != nil {
		return fmt.Errorf("readout file://%s: %w", in.path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for ctx.Err() == nil {
		head, err := br.Peek(schemas.MFPHeaderSize)
		if len(head) == 0 && err == io.EOF {
			return nil
		}
		if len(head) < schemas.MFPHeaderSize {
			in.c.discarded[rTruncated].Add(1)
			return nil
		}
		if binary.LittleEndian.Uint32(head) != schemas.MFPMagic {
			_, _, derr := schemas.DecodeMFP(head)
			return fmt.Errorf("readout file://%s: %w", in.path, schemas.WithOffset(derr, off))
		}
		size := int(binary.LittleEndian.Uint32(head[24:]))
		if size < schemas.MFPHeaderSize {
			_, _, derr := schemas.DecodeMFP(head)
			return fmt.Errorf("readout file://%s: %w", in.path, schemas.WithOffset(derr, off))
		}
		b := in.pool.get(size)
		n, err := io.ReadFull(br, b.b[:size])
		if err != nil {
			in.c.discarded[rTruncated].Add(1)
			b.put()
			return nil
		}
		off += int64(n)
		b.hold(size, nil)
		if err := in.c.deliver(ctx, sink, b.b[:size:size], b.release); err != nil {
			return err
		}
	}
	return nil
}
