// Package formats is the list of every data format sluice knows, in
// detection order, and the lookups over it. A new format is a package
// under schemas/ implementing format.Format (and the capabilities it has)
// plus one line here.
package formats

import (
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/besiii"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/native"
	"github.com/sluice-daq/sluice/schemas/table"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// registry holds the formats in detection order: among formats matching a
// stream's first bytes equally surely (format.Match), the one listed first
// wins. Magics first, then self-checking headers; VDIF, which has neither,
// matches only Plausible.
var registry = format.NewRegistry(
	table.ArrowFormat,     // "ARROW1"
	table.ParquetFormat,   // "PAR1"
	native.FragmentFormat, // "SLFG"
	native.MFPFormat,      // "SLMP"
	cms.FRDFormat,         // "RAW_000n"; a bare FRD event is Plausible
	cms.FEROLFormat,       // FEROL block header 0x475A (big-endian) before a FED header
	besiii.Format,         // FILE_START 0x1234aaaa, or a data separator before an eformat v3.0 event
	atlas.FullEventFormat, // marker 0xaa1234aa, either byte order
	atlas.ROBFormat,       // marker 0xdd1234dd, either byte order
	lhcb.MEPFormat,        // MDF header of data type MEP
	lhcb.MDFFormat,        // MDF header of raw banks
	vdif.Mark5BFormat,     // sync 0xabaddeed and time-code CRC
	vdif.VDIFFormat,       // consecutive consistent headers: Plausible
)

// All returns every format, in detection order.
func All() []format.Format { return registry.All() }

// Detect returns the format of the stream whose first format.HeadBytes
// bytes (fewer when it is shorter) are head, or nil when none knows it.
func Detect(head []byte) format.Format { return registry.Detect(head) }

// Refusal says why a stream that Detect found of no format is not of
// the format it looks like (format.Refuser), or is nil.
func Refusal(head []byte) error { return registry.Refusal(head) }

// Lookup returns the format of the given Name, or nil.
func Lookup(name string) format.Format { return registry.Lookup(name) }

// Exporters returns the ways built events can be exported (`sluice store
// export --format`), in registration order.
func Exporters() []format.Exporter { return registry.Exporters() }

// Exporter returns the exporter of the given ExportName
// (case-insensitive), or nil.
func Exporter(name string) format.Exporter { return registry.Exporter(name) }

// Signs says what detection looks for, for an error naming what a stream
// of no known format was expected to start with.
func Signs() string { return registry.Signs() }
