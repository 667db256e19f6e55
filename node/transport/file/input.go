package file

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/schemas"
)

// readBuffer is the size of a file input's read buffer.
const readBuffer = 64 << 10

// Input reads a native MFP stream file (file://PATH): multi-fragment
// packets back to back, as `sluice readout --to file://PATH` writes them.
type Input struct {
	path string
	c    transport.Counters
	pool rxbuf.Pool
}

// NewInput returns the input for the file at path; Run opens it.
func NewInput(path string) *Input {
	in := &Input{path: path}
	in.pool.Held = &in.c
	return in
}

// Stats returns the counters.
func (in *Input) Stats() transport.Stats { return in.c.Snapshot() }

// Close does nothing: Run opens the file and closes it when it returns.
func (in *Input) Close() error { return nil }

// Run hands every packet of the file to sink and returns nil at its end or
// when ctx ends. A packet cut short by the end of the file is counted
// truncated; a header that does not decode ends the read with its
// *schemas.DecodeError (offsets from the start of the file), since nothing
// after it can be framed.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	f, err := os.Open(in.path)
	if err != nil {
		return fmt.Errorf("readout file://%s: %w", in.path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, readBuffer)
	var off int64
	for ctx.Err() == nil {
		head, err := br.Peek(schemas.MFPHeaderSize)
		if len(head) == 0 && err == io.EOF {
			return nil
		}
		if len(head) < schemas.MFPHeaderSize {
			in.c.Discard(transport.Truncated)
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
		b := in.pool.Get(size)
		n, err := io.ReadFull(br, b.B[:size])
		if err != nil {
			in.c.Discard(transport.Truncated)
			b.Put()
			return nil
		}
		off += int64(n)
		b.Hold(len(b.B), nil) // the whole buffer stays held until released
		if err := in.c.Deliver(ctx, sink, b.B[:size:size], b.Release); err != nil {
			return err
		}
	}
	return nil
}
