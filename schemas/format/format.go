// Package format is the contract every data format of sluice fulfils, and
// the registry type that finds a stream's format from its first bytes.
//
// A format (LHCb MDF, VDIF, CMS FRD, sluice's own fragments, an Arrow IPC
// export, ...) is one value implementing Format: it names itself, tells its
// streams from their first bytes (Detect) and summarises a stream of it
// for `sluice inspect` (Inspect). What else it can do is an optional
// capability, an interface it may also implement:
//
//   - Splitter: its streams split into sluice fragments, as a readout
//     would send them (every format whose records are events or frames);
//     the readout emulator replays every Splitter's streams into a node;
//   - Framer: a Splitter whose records a transport also carries as they
//     lie in the stream (sluice's packets, VDIF frames in VTP datagrams, a
//     FED fragment's FEROL blocks): the emulator sends those bytes;
//   - Joiner: built events are written back in it, one record per event
//     (e.g. not Mark 5B, whose frames sluice only inspects);
//   - Exporter: built events are written in it a batch at a time (the
//     Arrow IPC and Parquet tables).
//
// `sluice store export` offers every Joiner and Exporter (see ExportOf).
// Each format lives in its own package under schemas/; the list of
// registered formats, in detection order, is schemas/formats.
package format

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// HeadBytes is how many leading bytes of a stream Detect is given (fewer
// when the stream is shorter): enough for a whole VDIF or Mark 5B frame
// and the next header.
const HeadBytes = 64 << 10

// Match says how surely a stream's first bytes are a format's.
type Match int

const (
	// NoMatch: the bytes are not this format's.
	NoMatch Match = iota
	// Plausible: the bytes decode as the format's header, but nothing in
	// them is a mark of the format (a lone VDIF header, an FRD event
	// without the file header). A Plausible match is taken only when no
	// format matches Certain.
	Plausible
	// Certain: a magic number, marker or self-checking header of the
	// format ("ARROW1", "SLMP", an eformat marker, an MDF header's three
	// equal size words, a Mark 5B sync word with a valid CRC).
	Certain
)

// Format is one data format sluice reads. Formats are values of
// comparable types, so that code may compare a detected format with a
// package's (f == lhcb.MDFFormat).
type Format interface {
	// Name is the format's name as inspect reports it, e.g. "lhcb-mdf".
	Name() string
	// Sign says, for an error listing what was expected, what Detect
	// looks for, e.g. `an LHCb MDF header`.
	Sign() string
	// Detect says how surely head, the first HeadBytes bytes of a stream
	// (fewer when the stream is shorter), starts a stream of this format.
	// It looks at nothing but head and never fails.
	Detect(head []byte) Match
	// Inspect reads the stream s from its start to its end and summarises
	// it, with the detail of the first maxEvents rows. A bad checksum is
	// counted, not fatal; any other decode error stops the reading and is
	// returned with the report of what came before it: a
	// *schemas.DecodeError naming the byte offset in the stream.
	Inspect(s *Stream, maxEvents int) (*Report, error)
}

// Refuser is a Format that can say why a stream that looks like its own
// was not detected as such: the error its decoder gives for the stream's
// first bytes, so that a user sees "EDV 0 requires extended user data 0"
// rather than "no known format".
type Refuser interface {
	Format
	// Refusal returns, for head (as Detect is given it) that Detect did
	// not match, the decoder's error when head otherwise looks like the
	// format's (a *schemas.DecodeError, offset in head); else nil.
	Refusal(head []byte) error
}

// Splitter is a Format whose streams sluice splits into its own
// fragments, as a readout board or a network source would send them to
// the builder.
type Splitter interface {
	Format
	// Sources reads the stream r to its end and returns the source groups
	// of the fragments Split makes of it (the builder's source set), in
	// the format's grouping (e.g. one group per LHCb bank type).
	Sources(r io.Reader) ([]schemas.SourceGroup, error)
	// Split reads the stream r to its end and calls emit with its
	// fragments in stream order, one record of the stream at a time (an
	// event's fragments for LHCb, CMS and ATLAS; a frame's for VDIF; a
	// fragment's or packet's for sluice's own streams), so that one event
	// id may come in several calls. groups are the stream's Sources. The
	// fragments, their payloads included, are valid until emit returns.
	// Errors: the format's decode errors (*schemas.DecodeError, offsets
	// in the stream), or emit's.
	Split(r io.Reader, groups []schemas.SourceGroup, emit func(Piece) error) error
}

// Framer is a Splitter whose records travel on a transport as they lie
// in the stream, one record per packet: the readout emulator sends them
// byte for byte to a destination whose packets carry this framing, and
// splits (and packs into sluice packets) the formats that are not.
type Framer interface {
	Splitter
	// Framing names what one packet of a transport carries when it
	// carries one of this format's records, as node/transport names its
	// payloads: "mfp" (a sluice multi-fragment packet), "vdif" (a VDIF
	// frame), "ferol" (a FED fragment's FEROL blocks).
	Framing() string
	// Frames calls emit with each record of the whole stream data, in
	// stream order, as a transport packet carries it: its bytes as they
	// lie in data, or encoded anew where the stream holds a record
	// otherwise (a lone native fragment). Frame.Bytes is valid until emit
	// returns. Errors: the format's decode errors (*schemas.DecodeError,
	// offsets in data), or emit's.
	Frames(data []byte, emit func(Frame) error) error
}

// Frame is one record of a Framer's stream as a packet carries it.
type Frame struct {
	Bytes     []byte
	Source    uint32 // the sluice source id of its fragments
	Event     uint64 // the event id of its first fragment
	Fragments int    // how many fragments (consecutive event ids) it holds
}

// Piece is what Split hands on at a time: fragments of one record of the
// stream and the run the record names (0 when the format has none).
type Piece struct {
	Run       uint32
	Fragments []schemas.Fragment
}

// Joiner is a Format that built events are written back in, one record
// per event: the events a Splitter split from a stream of it join back
// into that stream's records.
type Joiner interface {
	Format
	// ExportName is the name `sluice store export --format` takes.
	ExportName() string
	// NewJoiner returns a joiner for one stream of events; a joiner need
	// not be safe for concurrent use.
	NewJoiner() EventJoiner
}

// EventJoiner writes built events in a format.
type EventJoiner interface {
	// Join appends to dst the record of row i of eb (a batch built from
	// the format's fragments) and returns it. Errors say what in the row
	// keeps it from being one record of the format (a missing header
	// fragment, fragments that do not fit together), as
	// *schemas.DecodeError where they point into a fragment.
	Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error)
}

// VerdictJoiner is an EventJoiner whose records have a place for the
// event's trigger decision (an MDF header's trigger mask): the export
// joins through JoinVerdict with the stored verdict when it has one.
type VerdictJoiner interface {
	EventJoiner
	// JoinVerdict is Join with row i's trigger verdict (its decision and
	// lines as stored).
	JoinVerdict(dst []byte, eb *schemas.EventBatch, i int, v schemas.Verdict) ([]byte, error)
}

// Exporter is a format built events are written in a batch at a time,
// with their trigger decisions: a file of the export schema
// (schemas.ExportSchema).
type Exporter interface {
	// ExportName is the name `sluice store export --format` takes.
	ExportName() string
	// NewWriter returns a writer of a file of this format onto w, for
	// record batches of schema (schemas.ExportSchema of the stored event
	// schema); mem allocates its buffers.
	NewWriter(w io.Writer, schema *arrow.Schema, mem memory.Allocator) (Writer, error)
}

// Writer writes record batches of the export schema into a file.
type Writer interface {
	// Write writes every row of rec, in order.
	Write(rec arrow.RecordBatch) error
	// Close writes what ends the file (a footer); it does not close the
	// io.Writer the Writer writes to.
	Close() error
}
