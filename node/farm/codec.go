package farm

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
)

var le = binary.LittleEndian

// reader walks one message, keeping the first error (with its offset) so
// a decoder reads its fields in order and checks once.
type reader struct {
	b      []byte
	off    int
	format string
	err    error
}

func (r *reader) fail(field string, off int, sentinel error, detail string, args ...any) {
	if r.err == nil {
		r.err = schemas.Errorf(r.format, field, int64(off), sentinel, detail, args...)
	}
}

// need reports whether n more bytes are there, failing with ErrTruncated
// at the field's offset when they are not.
func (r *reader) need(field string, n int) bool {
	if r.err != nil {
		return false
	}
	if len(r.b)-r.off < n {
		r.fail(field, r.off, schemas.ErrTruncated, "need %d bytes, have %d", n, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) u8(field string) uint8 {
	if !r.need(field, 1) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u32(field string) uint32 {
	if !r.need(field, 4) {
		return 0
	}
	v := le.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(field string) uint64 {
	if !r.need(field, 8) {
		return 0
	}
	v := le.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// zero reads n reserved bytes, which must be 0.
func (r *reader) zero(field string, n int) {
	if !r.need(field, n) {
		return
	}
	for i := 0; i < n; i++ {
		if r.b[r.off+i] != 0 {
			r.fail(field, r.off+i, schemas.ErrBadHeader, "reserved byte is 0x%02x, want 0", r.b[r.off+i])
			return
		}
	}
	r.off += n
}

// str reads a 1-byte length and that many bytes; nonEmpty fails an empty one.
func (r *reader) str(field string, nonEmpty bool) string {
	at := r.off
	n := int(r.u8(field))
	if r.err != nil {
		return ""
	}
	if nonEmpty && n == 0 {
		r.fail(field, at, schemas.ErrBadHeader, "empty")
		return ""
	}
	if !r.need(field, n) {
		return ""
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s
}

// end checks that the message ends exactly here.
func (r *reader) end() {
	if r.err == nil && r.off != len(r.b) {
		r.fail("size", 8, schemas.ErrInconsistent, "fields end at byte %d, message has %d", r.off, len(r.b))
	}
}

// header checks the common header for kind and returns a reader past it.
func header(b []byte, kind Kind) *reader {
	r := &reader{b: b, format: kind.format()}
	if len(b) < HeaderSize {
		r.fail("header", 0, schemas.ErrTruncated, "need %d bytes, have %d", HeaderSize, len(b))
		return r
	}
	if m := le.Uint32(b); m != Magic {
		r.fail("magic", 0, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", Magic, m)
		return r
	}
	if b[4] != Version {
		r.fail("version", 4, schemas.ErrBadVersion, "want %d, have %d", Version, b[4])
		return r
	}
	if Kind(b[5]) != kind {
		r.fail("kind", 5, schemas.ErrBadHeader, "want %d (%s), have %d", kind, kind, b[5])
		return r
	}
	r.off = 6
	r.zero("reserved", 2)
	size := le.Uint32(b[8:])
	if r.err == nil && int64(size) != int64(len(b)) {
		sentinel := schemas.ErrInconsistent
		if int64(size) > int64(len(b)) {
			sentinel = schemas.ErrTruncated
		}
		r.fail("size", 8, sentinel, "size field says %d bytes, message has %d", size, len(b))
	}
	r.off = HeaderSize
	return r
}

// appendHeader starts a message of kind; finish fills in its size.
func appendHeader(dst []byte, kind Kind) ([]byte, int) {
	start := len(dst)
	dst = le.AppendUint32(dst, Magic)
	dst = append(dst, Version, byte(kind), 0, 0)
	dst = le.AppendUint32(dst, 0)
	return dst, start
}

func finish(dst []byte, start int) []byte {
	le.PutUint32(dst[start+8:], uint32(len(dst)-start))
	return dst
}

// appendStr appends a str; s is cut to 255 bytes (encoders validate
// lengths before, see checkStr).
func appendStr(dst []byte, s string) []byte {
	if len(s) > maxStr {
		s = s[:maxStr]
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

const maxStr = 255
