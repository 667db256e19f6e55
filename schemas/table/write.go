package table

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas/format"
)

// ExportName is the name `sluice store export --format` takes: "arrow"
// or "parquet".
func (f tableFile) ExportName() string { return f.export }

// NewWriter returns a writer of an Arrow IPC file, or of an uncompressed
// Parquet file without dictionaries (payloads neither repeat nor
// compress) that stores the Arrow schema, its metadata included, so that
// readers get the event schema back. Each Write is one record batch of
// the IPC file, one row group of the Parquet file.
func (f tableFile) NewWriter(w io.Writer, schema *arrow.Schema, mem memory.Allocator) (format.Writer, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if f.name == arrowName {
		return ipc.NewFileWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	}
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithAllocator(mem))
	// pqarrow closes a writer that is an io.Closer; w is the caller's.
	return pqarrow.NewFileWriter(schema, struct{ io.Writer }{w}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
}
