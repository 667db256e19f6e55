package inspect

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// Report summarises one file. The common fields are filled for every
// format; the format's own section (CMS, ATLAS, LHCb, Baseband for VDIF
// and Mark 5B, Table for Arrow IPC and Parquet) adds what only that format
// has. The per-row detail of every format is in Detail.
type Report struct {
	Format Format `json:"format"`
	Bytes  int64  `json:"bytes"` // bytes of the records read
	// Records counts the top-level units read: native fragments or packets,
	// FRD events, full events or ROBs, MDF records, VDIF/Mark 5B frames.
	// For Arrow IPC files they are record batches, for Parquet row groups.
	Records int `json:"records"`
	Events  int `json:"events"` // events (frames for VDIF and Mark 5B, rows of an event table)
	// NumSources counts distinct sources: source ids, FED ids, ROB source
	// ids, LHCb (bank type, source id) pairs, VDIF (station, thread) ids,
	// the sources of an event table's source groups.
	NumSources int `json:"n_sources"`
	// Sources lists them, ascending, where they are plain numbers.
	Sources     []uint32  `json:"sources,omitempty"`
	RecordBytes SizeStats `json:"record_bytes"`
	Checksums   Checksums `json:"checksums"`
	// Start and End bound the data in time where the format says (VDIF
	// frame times, ATLAS bunch-crossing times), UTC.
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// Detail describes the first rows (events, fragments, packets, frames),
	// as many as asked for; nil when none were.
	Detail *Detail `json:"detail,omitempty"`

	CMS      *CMSReport   `json:"cms,omitempty"`
	ATLAS    *ATLASReport `json:"atlas,omitempty"`
	LHCb     *lhcb.Report `json:"lhcb,omitempty"`
	Baseband *vdif.Report `json:"baseband,omitempty"` // VDIF and Mark 5B
	Table    *TableReport `json:"table,omitempty"`    // Arrow IPC and Parquet
}

// Detail is the per-row detail of a report: what a row is (Of) and the
// rows, in the one slice that fits the format. In JSON it is
// {"of": ..., "rows": [...]} for every format, so that tools find the rows
// at .detail.rows whatever the file.
type Detail struct {
	// Of names the rows: "fragments", "packets", "fragments and packets"
	// (native), "events" (CMS, ATLAS full events, LHCb, event tables),
	// "ROB fragments", "frames" (VDIF, Mark 5B) or "rows" (other tables).
	Of     string
	Events []EventDetail      // native, CMS, ATLAS
	LHCb   []lhcb.EventDetail // LHCb MDF and MEP
	Frames []vdif.FrameDetail // VDIF and Mark 5B
	Rows   []RowDetail        // Arrow IPC and Parquet
}

// MarshalJSON writes {"of": d.Of, "rows": [...]} with the rows of the
// slice in use.
func (d *Detail) MarshalJSON() ([]byte, error) {
	var rows any = d.Events
	switch {
	case d.LHCb != nil:
		rows = d.LHCb
	case d.Frames != nil:
		rows = d.Frames
	case d.Rows != nil:
		rows = d.Rows
	}
	return json.Marshal(struct {
		Of   string `json:"of"`
		Rows any    `json:"rows"`
	}{d.Of, rows})
}

// SizeStats are the minimum, median and maximum record size in bytes.
type SizeStats struct {
	Min    int `json:"min"`
	Median int `json:"median"`
	Max    int `json:"max"`
}

// Checksums counts the checksums checked, by outcome; What says which.
type Checksums struct {
	What   string `json:"what"`
	Valid  int    `json:"valid"`
	Bad    int    `json:"bad"`
	Absent int    `json:"absent,omitempty"` // not written by the writer
}

// EventDetail describes one record: a native fragment or multi-fragment
// packet, an FRD event, an eformat full event or ROB fragment.
type EventDetail struct {
	Kind   string `json:"kind"` // "fragment", "packet", "event" or "ROB fragment"
	Index  int    `json:"index"`
	Offset int64  `json:"offset"`       // of the record in the file
	Bytes  int    `json:"record_bytes"` // the whole record, header included
	// EventID is the record's event id; for a packet, the first of its N
	// consecutive event ids (N is its packing factor).
	EventID    uint64   `json:"event_id"`
	N          int      `json:"n,omitempty"`
	Run        uint32   `json:"run,omitempty"`
	Sources    []uint32 `json:"sources"` // in the record's order
	ChecksumOK bool     `json:"checksum_ok"`
	// Note says what else matters: bad sub-checksums, status bits, flags.
	Note string `json:"note,omitempty"`
}

// CMSReport is what only FRD files have.
type CMSReport struct {
	FileHeader   *FRDFileHeader `json:"file_header,omitempty"`
	Versions     map[int]int    `json:"frd_versions"` // FRD version -> events
	Runs         []uint32       `json:"runs"`
	Lumis        []uint32       `json:"lumis"`
	FEDs         int            `json:"feds"` // FED fragments in all events
	FEDCRCBad    int            `json:"fed_crc_bad"`
	FEDErrorBits int            `json:"fed_error_bits"` // FEDs with R or F set
	EventRange   [2]uint64      `json:"event_range"`    // first and last event number
}

// FRDFileHeader is the file header as read (see cms.FRDFileHeader).
type FRDFileHeader struct {
	Version    int    `json:"version"`
	DataType   uint16 `json:"data_type,omitempty"`
	EventCount uint32 `json:"event_count"`
	Run        uint32 `json:"run,omitempty"`
	Lumi       uint32 `json:"lumi"`
	FileSize   uint64 `json:"file_size"`
}

// ATLASReport is what only eformat files have.
type ATLASReport struct {
	ByteOrder     string         `json:"byte_order"` // "little-endian" or "big-endian" (swapped on x86)
	ROBs          int            `json:"robs"`
	ChecksumTypes map[string]int `json:"checksum_types"` // per full event and ROB
	StatusSet     int            `json:"status_set"`     // fragments with generic status bits set
	Runs          []uint32       `json:"runs,omitempty"`
	GlobalIDRange [2]uint32      `json:"global_id_range"`
}

// sizeStats summarises sizes (sorted in place).
func sizeStats(sizes []int) SizeStats {
	if len(sizes) == 0 {
		return SizeStats{}
	}
	slices.Sort(sizes)
	return SizeStats{Min: sizes[0], Median: sizes[len(sizes)/2], Max: sizes[len(sizes)-1]}
}

// sortedKeys returns the keys of m, ascending.
func sortedKeys(m map[uint32]bool) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// addRow appends d to the detail while it has fewer than max rows, and
// names the rows after the kinds seen.
func (r *Report) addRow(d EventDetail, max int) {
	if r.Detail == nil {
		if max <= 0 {
			return
		}
		r.Detail = &Detail{}
	}
	if len(r.Detail.Events) >= max {
		return
	}
	switch of := d.Kind + "s"; r.Detail.Of {
	case "":
		r.Detail.Of = of
	case of:
	default:
		r.Detail.Of = "fragments and packets" // the one mix: a native stream
	}
	r.Detail.Events = append(r.Detail.Events, d)
}
