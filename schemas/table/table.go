package table

import (
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas/format"
)

// Format names, as the formats' Name give them.
const (
	arrowName   = "arrow-ipc"
	parquetName = "parquet"
)

// The formats, as registered in schemas/formats.
var (
	// ArrowFormat is the Arrow IPC file format ("ARROW1" at both ends).
	ArrowFormat format.Format = tableFile{name: arrowName, export: "arrow", sign: "an Arrow IPC file (ARROW1)", magic: arrowMagic + "\x00\x00"}
	// ParquetFormat is Parquet ("PAR1" at both ends), the Arrow schema
	// stored in its metadata.
	ParquetFormat format.Format = tableFile{name: parquetName, export: "parquet", sign: "Parquet (PAR1)", magic: parquetMagic}
)

// tableFile is a table format: detect, inspect, export (write.go).
type tableFile struct {
	name, sign string
	export     string // ExportName
	magic      string // what the file starts with
}

func (f tableFile) Name() string { return f.name }
func (f tableFile) Sign() string { return f.sign }

// Detect is Certain for the leading magic; the closing one is checked by
// Inspect.
func (f tableFile) Detect(head []byte) format.Match {
	if len(head) >= len(f.magic) && string(head[:len(f.magic)]) == f.magic {
		return format.Certain
	}
	return format.NoMatch
}

// Inspect summarises the file through its footer, read with random access
// to the stream (format.Stream.ReaderAt). Decode errors are
// *schemas.DecodeError: a missing closing magic is ErrTruncated at the end
// of the file; a footer the reader refuses is ErrBadHeader at the footer;
// a batch or row group that does not decode is ErrBadHeader at its entry
// in the footer (Arrow) or its first byte (Parquet).
func (f tableFile) Inspect(s *format.Stream, maxEvents int) (*format.Report, error) {
	rs, err := s.ReaderAt()
	if err != nil {
		return nil, err
	}
	mem := s.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return inspect(rs, f.name, maxEvents, mem)
}

var _ format.Exporter = tableFile{}
