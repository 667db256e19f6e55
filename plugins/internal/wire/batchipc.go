package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrNoRoom is returned by EncodeBatch when the stream does not fit in dst.
var ErrNoRoom = errors.New("wire: Arrow IPC stream does not fit in the buffer")

// ipcSlack covers what an IPC stream adds to the batch's buffers: the schema
// message (with the source lists in its metadata), the record batch message's
// flatbuffer and the end-of-stream marker.
const ipcSlack = 64 << 10

// StreamSize is an upper bound on the bytes of the Arrow IPC stream
// EncodeBatch writes for rec: every buffer of every column, each padded to 64
// bytes, plus the messages' metadata.
func StreamSize(rec arrow.RecordBatch) int {
	n := ipcSlack + 8*len(rec.Schema().Metadata().Keys())*64
	for _, col := range rec.Columns() {
		n += dataSize(col.Data())
	}
	return n
}

func dataSize(d arrow.ArrayData) int {
	n := 0
	for _, b := range d.Buffers() {
		if b != nil {
			n += b.Len() + 64
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	return n
}

// EncodeBatch writes rec as an Arrow IPC stream (schema message, one record
// batch message, end-of-stream marker) into dst and returns the number of
// bytes written. It copies each buffer once and allocates no payload-sized
// memory; it returns ErrNoRoom when dst is too small.
func EncodeBatch(dst []byte, rec arrow.RecordBatch, mem memory.Allocator) (int, error) {
	fw := &fixedWriter{buf: dst}
	w := ipc.NewWriter(fw, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		w.Close()
		if fw.full {
			return 0, ErrNoRoom
		}
		return 0, fmt.Errorf("wire: encoding event batch: %w", err)
	}
	if err := w.Close(); err != nil {
		if fw.full {
			return 0, ErrNoRoom
		}
		return 0, fmt.Errorf("wire: encoding event batch: %w", err)
	}
	return fw.n, nil
}

// fixedWriter appends into a fixed slice and fails instead of growing.
type fixedWriter struct {
	buf  []byte
	n    int
	full bool
}

func (w *fixedWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		w.full = true
		return 0, ErrNoRoom
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// DecodeBatch reads the one record batch of an Arrow IPC stream held in b
// without copying: the record's buffers point into b, which must stay
// unchanged until release is called. Errors say what is malformed, and a
// malformed message never panics; but the stream must come from the host:
// arrow-go's IPC reader trusts the counts in the messages' flatbuffers, and
// a corrupted schema can make it allocate without bound.
func DecodeBatch(b []byte) (rec arrow.RecordBatch, release func(), err error) {
	mr := &bytesMessageReader{b: b}
	mr.refs = 1
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, nil, fmt.Errorf("wire: event batch stream: %w", err)
	}
	ok := func() (ok bool) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("wire: event batch stream: malformed record batch: %v", p)
				ok = false
			}
		}()
		return r.Next()
	}()
	if !ok {
		r.Release()
		if err == nil {
			err = r.Err()
		}
		if err == nil {
			err = errors.New("stream holds no record batch")
		}
		return nil, nil, fmt.Errorf("wire: event batch stream: %w", err)
	}
	return r.RecordBatch(), r.Release, nil
}

// bytesMessageReader is an ipc.MessageReader over an in-memory IPC stream
// whose messages' metadata and bodies are slices of the stream itself.
type bytesMessageReader struct {
	b    []byte
	off  int
	msg  *ipc.Message
	refs int
}

func (r *bytesMessageReader) Retain() { r.refs++ }

func (r *bytesMessageReader) Release() {
	if r.refs--; r.refs == 0 && r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}

// Message returns the next message; it stays valid until the next call.
func (r *bytesMessageReader) Message() (msg *ipc.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("invalid message metadata at byte %d: %v", r.off, p)
		}
	}()
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	if len(r.b)-r.off < 8 {
		return nil, io.EOF // a stream may end without its end-of-stream marker
	}
	le := binary.LittleEndian
	start := r.off
	if le.Uint32(r.b[r.off:]) != 0xFFFFFFFF {
		return nil, fmt.Errorf("no continuation marker at byte %d", start)
	}
	metaLen := int(int32(le.Uint32(r.b[r.off+4:])))
	r.off += 8
	if metaLen == 0 {
		return nil, io.EOF
	}
	if metaLen < 4 || metaLen > len(r.b)-r.off {
		return nil, fmt.Errorf("message metadata length %d at byte %d exceeds the %d bytes left", metaLen, start, len(r.b)-r.off)
	}
	meta := memory.NewBufferBytes(r.b[r.off : r.off+metaLen])
	r.off += metaLen
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	if bodyLen < 0 || bodyLen > int64(len(r.b)-r.off) {
		return nil, fmt.Errorf("message body length %d at byte %d exceeds the %d bytes left", bodyLen, start, len(r.b)-r.off)
	}
	body := memory.NewBufferBytes(r.b[r.off : r.off+int(bodyLen)])
	r.off += int(bodyLen)
	r.msg = ipc.NewMessage(meta, body)
	return r.msg, nil
}
