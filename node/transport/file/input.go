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

// DefaultMaxPacket is the largest packet an Input allocates until the node
// limits it (LimitPacket) to its memory budget's share.
const DefaultMaxPacket = 256 << 20

// Input reads a native MFP stream file (file://PATH): multi-fragment
// packets back to back, as `sluice readout --to file://PATH` writes them.
type Input struct {
	path      string
	c         transport.Counters
	pool      rxbuf.Pool
	maxPacket int64
}

// LimitPacket sets the largest packet Run allocates (transport.PacketLimited):
// a header claiming more ends the read with an error. n <= 0 keeps the
// current limit.
func (in *Input) LimitPacket(n int64) {
	if n > 0 {
		in.maxPacket = n
	}
}

// NewInput returns the input for the file at path; Run opens it.
func NewInput(path string) *Input {
	in := &Input{path: path, maxPacket: DefaultMaxPacket}
	in.pool.Held = &in.c
	return in
}

// Stats returns the counters.
func (in *Input) Stats() transport.Stats { return in.c.Snapshot() }

// Close does nothing: Run opens the file and closes it when it returns.
func (in *Input) Close() error { return nil }

// Run hands every packet of the file to sink and returns nil at its end or
// when ctx ends. A packet cut short by the end of the file is counted
// truncated (its claimed size is checked against the bytes the file has
// left before anything is allocated); a header that does not decode ends
// the read with its *schemas.DecodeError (offsets from the start of the
// file), since nothing after it can be framed; a header claiming more than
// the packet limit (LimitPacket) ends it with transport.ErrPacketTooLarge
// naming the file and the header's byte offset.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	f, err := os.Open(in.path)
	if err != nil {
		return fmt.Errorf("readout file://%s: %w", in.path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("readout file://%s: %w", in.path, err)
	}
	fileSize := st.Size()
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
		if int64(size) > in.maxPacket {
			return fmt.Errorf("readout file://%s: packet at byte offset %d claims %d bytes, more than the %d a packet may have (the builder's share of the memory budget): %w",
				in.path, off, size, in.maxPacket, transport.ErrPacketTooLarge)
		}
		if int64(size) > fileSize-off {
			if st, err := f.Stat(); err == nil {
				fileSize = st.Size() // grown meanwhile?
			}
		}
		if int64(size) > fileSize-off {
			// Cut short by the end of the file (or a size no file of
			// this length holds): nothing to allocate it for.
			in.c.Discard(transport.Truncated)
			return nil
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
