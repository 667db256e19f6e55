package format

import (
	"bufio"
	"bytes"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Stream is a stream handed to Inspect: read it through the embedded
// bufio.Reader, which stands at the stream's start with the first
// HeadBytes bytes (or all, when fewer) available to Peek. Formats read
// through a footer ask for random access with ReaderAt.
type Stream struct {
	*bufio.Reader
	// Mem allocates the Arrow buffers of formats read through Arrow's
	// readers (Arrow IPC, Parquet); nil means memory.DefaultAllocator.
	Mem memory.Allocator

	src   io.Reader
	start int64 // where src stood when the stream was opened; -1 when it cannot seek
}

// NewStream opens the stream r from where it stands and returns it with
// its first HeadBytes bytes (fewer at the stream's end), for Detect.
// Errors: r's read errors.
func NewStream(r io.Reader) (*Stream, []byte, error) {
	s := &Stream{src: r, start: -1}
	if sk, ok := r.(io.Seeker); ok {
		if at, err := sk.Seek(0, io.SeekCurrent); err == nil {
			s.start = at
		}
	}
	s.Reader = bufio.NewReaderSize(r, HeadBytes)
	head, err := s.Peek(HeadBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, nil, err
	}
	return s, head, nil
}

// ReaderAt gives random access to the whole stream, from its start: the
// underlying file itself when it is an io.ReaderAt and io.Seeker (an
// *os.File is), else the stream's bytes read to the end into memory.
// Call it before reading from the Stream.
func (s *Stream) ReaderAt() (*io.SectionReader, error) {
	ra, okRA := s.src.(io.ReaderAt)
	sk, okS := s.src.(io.Seeker)
	if okRA && okS && s.start >= 0 {
		end, err := sk.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, err
		}
		return io.NewSectionReader(ra, s.start, end-s.start), nil
	}
	b, err := io.ReadAll(s.Reader)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b))), nil
}
