package lhcb

import (
	"errors"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// Reader reads MDF records one after the other from a stream (an .mdf file,
// or an .mep file, whose records hold one MEP each).
type Reader struct {
	// Checksums says what Next does with record checksums (default
	// ChecksumVerify: a mismatch is an error).
	Checksums ChecksumMode

	r       io.Reader
	off     int64 // stream offset of the next record
	buf     []byte
	scratch []byte
	infl    inflater
	rec     Record
	err     error // sticky: a stream error ends the reading
}

// NewReader returns a Reader of the MDF records in r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Reset makes r read from src from offset 0, keeping its buffers and its
// Checksums mode.
func (r *Reader) Reset(src io.Reader) {
	*r = Reader{Checksums: r.Checksums, r: src, buf: r.buf[:0], scratch: r.scratch[:0], infl: r.infl}
}

// Offset is the stream offset of the next record.
func (r *Reader) Offset() int64 { return r.off }

// Next reads the next record. The record and its byte slices stay valid
// until the next call to Next. At the clean end of the stream it returns
// io.EOF. Decode errors are *schemas.DecodeError with the offset from the
// start of the stream. A malformed header (DecodeHeader's errors) or a
// stream that ends inside a record (ErrTruncated) ends the reading: Next
// returns the same error again. A checksum mismatch (ErrCRCMismatch) or a
// bad compressed body refers to a record that was read whole, so Next can
// be called again to go on with the following record.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	base := r.off
	if cap(r.buf) < MaxHeaderSize {
		r.buf = make([]byte, 0, MaxHeaderSize)
	}
	b := r.buf[:BaseHeaderSize]
	if n, err := io.ReadFull(r.r, b); err != nil {
		if err == io.EOF {
			r.err = io.EOF
		} else {
			r.err = r.streamErr(err, "header", base, n, BaseHeaderSize)
		}
		return nil, r.err
	}
	hl := HeaderLen(b[17] >> 4)
	if hl > BaseHeaderSize {
		b = b[:hl]
		if n, err := io.ReadFull(r.r, b[BaseHeaderSize:]); err != nil {
			r.err = r.streamErr(err, "subheader", base+BaseHeaderSize, n, hl-BaseHeaderSize)
			return nil, r.err
		}
	}
	h, err := DecodeHeader(b)
	if err != nil {
		r.err = schemas.WithOffset(err, base)
		return nil, r.err
	}
	size := int(h.Size)
	b = r.buf[:hl]
	// Grow as the bytes arrive, not by the announced size, so that a
	// corrupt size word on a short stream costs no more than the stream.
	for len(b) < size {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(size-len(b), max(len(b), 64<<10)))
		}
		n, err := io.ReadFull(r.r, b[len(b):min(size, cap(b))])
		b = b[:len(b)+n]
		if err != nil {
			r.buf = b
			r.err = r.streamErr(err, "body", base+int64(hl), len(b)-hl, size-hl)
			return nil, r.err
		}
	}
	r.buf = b
	r.off = base + int64(size)
	r.rec, err = finishRecord(h, b, base, r.Checksums, &r.infl, r.scratch)
	if h.Compressed() && cap(r.rec.Body) > cap(r.scratch) {
		r.scratch = r.rec.Body
	}
	if err != nil {
		return nil, err
	}
	return &r.rec, nil
}

// streamErr turns a short read into a DecodeError: the stream ended after
// got of the want bytes of field, which starts at off.
func (r *Reader) streamErr(err error, field string, off int64, got, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return schemas.Errorf(formatMDF, field, off, schemas.ErrTruncated, "need %d bytes, stream ends after %d", want, got)
	}
	return err
}

// Writer writes MDF records to a stream.
type Writer struct {
	// Level is the zlib level of the bodies (0 = uncompressed, 1..9).
	Level int

	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer of uncompressed records to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one record with header h (its size, checksum and compression
// are computed, see AppendRecord) and body.
func (w *Writer) Write(h Header, body []byte) error {
	var err error
	if w.buf, err = AppendRecord(w.buf[:0], h, body, w.Level); err != nil {
		return err
	}
	_, err = w.w.Write(w.buf)
	return err
}
