package schemas

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every decoder in sluice, native or external
// format. Decoders wrap them in a *DecodeError that says where.
var (
	// ErrTruncated: the buffer ends before the structure it must hold.
	ErrTruncated = errors.New("truncated")
	// ErrBadMagic: a marker or magic number has the wrong value.
	ErrBadMagic = errors.New("bad magic")
	// ErrBadVersion: a version this reader does not know.
	ErrBadVersion = errors.New("unsupported version")
	// ErrBadHeader: a header field is out of its valid range.
	ErrBadHeader = errors.New("bad header")
	// ErrSizeOverflow: a size or count exceeds what the buffer or the
	// format allows, or adding sizes would overflow.
	ErrSizeOverflow = errors.New("size overflow")
	// ErrCRCMismatch: a checksum over the data does not match the stored one.
	ErrCRCMismatch = errors.New("checksum mismatch")
	// ErrUnsupported: a valid feature this reader does not implement
	// (e.g. a compression algorithm); never guessed around.
	ErrUnsupported = errors.New("unsupported")
	// ErrInconsistent: fields that must agree with each other do not.
	ErrInconsistent = errors.New("inconsistent")
)

// DecodeError is what every sluice decoder returns for bad input: which
// format, which field, at which byte offset (from the start of the buffer or
// file the caller passed) and why. Unwrap gives the sentinel.
type DecodeError struct {
	Format string // e.g. "fragment", "mfp", "mdf", "vdif"
	Field  string // the field or structure being read, e.g. "header", "sizes[3]"
	Offset int64  // byte offset of Field
	Err    error  // one of the sentinel errors above
	Detail string // what was expected and what was found
}

func (e *DecodeError) Error() string {
	s := fmt.Sprintf("%s: %s at byte offset %d: %v", e.Format, e.Field, e.Offset, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Errorf builds a *DecodeError; Detail is formatted with fmt.Sprintf.
func Errorf(format, field string, off int64, sentinel error, detail string, args ...any) *DecodeError {
	return &DecodeError{Format: format, Field: field, Offset: off, Err: sentinel, Detail: fmt.Sprintf(detail, args...)}
}

// WithOffset returns err with base added to its offset when err is a
// *DecodeError (for decoders of nested structures); other errors unchanged.
func WithOffset(err error, base int64) error {
	var de *DecodeError
	if errors.As(err, &de) {
		c := *de
		c.Offset += base
		return &c
	}
	return err
}
