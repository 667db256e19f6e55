package vdif

import (
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// Frame is one VDIF frame: its decoded header and its bytes.
type Frame struct {
	Header Header
	Offset int64  // byte offset of the frame in its stream (0 for DecodeFrame)
	Bytes  []byte // the whole frame, header included: Header.FrameBytes() bytes
}

// Payload returns the frame's data after the header (aliases Bytes).
func (f *Frame) Payload() []byte { return f.Bytes[f.Header.Size():] }

// DecodeFrame decodes the VDIF frame at the start of b; Bytes aliases b.
// Errors: those of DecodeHeader, and ErrTruncated (offset 0) when b is
// shorter than the frame length.
func DecodeFrame(b []byte) (Frame, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return Frame{}, err
	}
	n := h.FrameBytes()
	if len(b) < n {
		return Frame{}, schemas.Errorf(formatVDIF, "frame", 0, schemas.ErrTruncated, "frame length %d bytes, have %d", n, len(b))
	}
	return Frame{Header: h, Bytes: b[:n:n]}, nil
}

// readChunk bounds how much a frame buffer grows ahead of the data read,
// so that a hostile 128 MiB frame length in a short stream costs little.
const readChunk = 1 << 20

// Reader reads consecutive VDIF frames (legacy or not, any mix of threads)
// from a stream, taking each frame's length from its header. It stops at
// the first error; offsets in errors are from the start of the stream.
type Reader struct {
	r   io.Reader
	off int64
	buf []byte
	err error
}

// NewReader returns a reader of the VDIF frames in r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r, buf: make([]byte, 0, 16<<10)} }

// Offset is the byte offset of the next frame.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the next frame; its Bytes are valid until the following
// call. At a clean end of stream it returns io.EOF. Errors: a header or
// frame cut short gives ErrTruncated at the frame's offset; a bad header the
// errors of DecodeHeader at their offset in the stream.
func (r *Reader) Next() (Frame, error) {
	if r.err != nil {
		return Frame{}, r.err
	}
	f, err := r.next()
	if err != nil {
		r.err = err
		return Frame{}, err
	}
	r.off += int64(len(f.Bytes))
	return f, nil
}

func (r *Reader) next() (Frame, error) {
	buf := r.buf[:LegacyHeaderSize]
	n, err := io.ReadFull(r.r, buf)
	if err == io.EOF {
		return Frame{}, io.EOF
	}
	if err != nil {
		return Frame{}, r.readErr("header", LegacyHeaderSize, n, err)
	}
	if buf[3]&0x40 == 0 { // w0 bit 30 clear: a 32-byte header
		buf = buf[:HeaderSize]
		if n, err := io.ReadFull(r.r, buf[LegacyHeaderSize:]); err != nil {
			return Frame{}, r.readErr("header", HeaderSize, LegacyHeaderSize+n, err)
		}
	}
	h, err := DecodeHeader(buf)
	if err != nil {
		return Frame{}, schemas.WithOffset(err, r.off)
	}
	size := h.FrameBytes()
	// Invariant: buf holds the len(buf) first bytes of the frame.
	for len(buf) < size {
		chunk := min(size-len(buf), readChunk)
		buf = slices.Grow(buf, chunk)
		n, err := io.ReadFull(r.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+n]
		if err != nil {
			return Frame{}, r.readErr("frame", size, len(buf), err)
		}
	}
	r.buf = buf
	return Frame{Header: h, Offset: r.off, Bytes: buf[:size:size]}, nil
}

// readErr turns a short read of a frame that needed `need` bytes and got
// `have` into ErrTruncated at the frame's offset; other I/O errors pass
// through with the offset in their text.
func (r *Reader) readErr(field string, need, have int, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return schemas.Errorf(formatVDIF, field, r.off, schemas.ErrTruncated, "need %d bytes, stream ends after %d", need, have)
	}
	return fmt.Errorf("vdif: read at byte offset %d: %w", r.off+int64(have), err)
}

// AppendFrame appends a VDIF frame (header h, then payload) to dst, with
// h.FrameLength set from the payload size, which must be a multiple of 8
// bytes. Errors wrap schemas.ErrBadHeader (see AppendHeader).
func AppendFrame(dst []byte, h Header, payload []byte) ([]byte, error) {
	if len(payload)%8 != 0 {
		return dst, fmt.Errorf("vdif: payload of %d bytes is not a multiple of 8: %w", len(payload), schemas.ErrBadHeader)
	}
	units := (h.Size() + len(payload)) / 8
	if units >= 1<<24 {
		return dst, fmt.Errorf("vdif: payload of %d bytes exceeds the 24-bit frame length: %w", len(payload), schemas.ErrBadHeader)
	}
	h.FrameLength = uint32(units)
	out, err := AppendHeader(dst, &h)
	if err != nil {
		return dst, err
	}
	return append(out, payload...), nil
}

// Writer writes VDIF frames to a stream.
type Writer struct {
	w      io.Writer
	buf    []byte
	Frames int64 // frames written
}

// NewWriter returns a writer of VDIF frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame encodes one frame with AppendFrame and writes it in one Write.
func (w *Writer) WriteFrame(h Header, payload []byte) error {
	b, err := AppendFrame(w.buf[:0], h, payload)
	if err != nil {
		return err
	}
	w.buf = b
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("vdif: write frame %d: %w", w.Frames, err)
	}
	w.Frames++
	return nil
}
