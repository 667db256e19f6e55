package schemas

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// EventSchemaVersion is written in the schema metadata of every event batch
// under MetaSchemaVersion; readers refuse versions they do not know.
const EventSchemaVersion = 1

// Column names and metadata keys of an event batch.
const (
	ColEventID        = "event_id"        // uint64: event id, or timeslice index
	ColRun            = "run"             // uint32: run number
	ColTimestamp      = "timestamp_ns"    // uint64: ns; timeslice start, or Unix time the first fragment arrived
	ColStatus         = "status"          // uint32: EventStatus bits
	ColNumFragments   = "n_fragments"     // uint32: fragments in the event
	ColMissingSources = "missing_sources" // list<uint32>: expected sources that sent nothing (StatusIncomplete)
	ColCorruptSources = "corrupt_sources" // list<uint32>: sources whose fragment failed its CRC (StatusCorrupt)

	// The build columns (BuilderSchema): the builder's batches carry them
	// after the groups' columns; batches rebuilt from a store do not (the
	// store keeps them in each event's provenance). Readers find them by
	// name and treat them as empty when absent.
	ColDuplicateSources = "duplicate_sources" // list<uint32>: sources that sent more than one fragment (StatusDuplicates)
	ColLateSources      = "late_sources"      // list<uint32>: sources whose fragment came after the event was emitted
	ColAssignment       = "assignment"        // uint64: the farm assignment the event was built for (0: none)

	// Per source group G: PayloadPrefix+G is LargeBinary, the payloads of
	// G's sources for the event back to back in G's source order; SizesPrefix+G
	// is list<uint32> with one payload size per source of G, in the same order
	// (0 for a missing source).
	PayloadPrefix = "payload_"
	SizesPrefix   = "sizes_"

	MetaSchemaVersion = "sluice.schema_version" // schema metadata: EventSchemaVersion
	MetaMode          = "sluice.mode"           // schema metadata: "event" or "timeslice"
	MetaGroup         = "sluice.group"          // field metadata: group name
	MetaSources       = "sluice.sources"        // field metadata: FormatSourceList of the group's sources, in order
)

// EventStatus bits describe how an event was built and handled.
type EventStatus uint32

const (
	// StatusIncomplete: emitted at the timeout with sources missing.
	StatusIncomplete EventStatus = 1 << 0
	// StatusCorrupt: at least one fragment failed its CRC-32C; it is kept.
	StatusCorrupt EventStatus = 1 << 1
	// StatusDuplicates: duplicate fragments arrived and were discarded.
	StatusDuplicates EventStatus = 1 << 2
	// StatusSourceError: a source flagged an error or a truncation.
	StatusSourceError EventStatus = 1 << 3
	// StatusTriggerError: the trigger failed on this event's batch
	// repeatedly; it was deferred with the reason.
	StatusTriggerError EventStatus = 1 << 8
	// StatusReplayed: the event was decided during deferred replay.
	StatusReplayed EventStatus = 1 << 9
)

// statusNames name the EventStatus bits, lowest first.
var statusNames = []struct {
	bit  EventStatus
	name string
}{
	{StatusIncomplete, "incomplete"}, {StatusCorrupt, "corrupt"}, {StatusDuplicates, "duplicates"},
	{StatusSourceError, "source-error"}, {StatusTriggerError, "trigger-error"}, {StatusReplayed, "replayed"},
}

// Names returns the names of the bits set in s, lowest first; an unknown
// bit is named by its value ("0x10"). Empty for no bit.
func (s EventStatus) Names() []string {
	var out []string
	for _, n := range statusNames {
		if s&n.bit != 0 {
			out = append(out, n.name)
			s &^= n.bit
		}
	}
	for b := EventStatus(1); s != 0; b <<= 1 {
		if s&b != 0 {
			out = append(out, fmt.Sprintf("%#x", uint32(b)))
			s &^= b
		}
	}
	return out
}

// String joins Names with "|", or is "ok" when no bit is set.
func (s EventStatus) String() string {
	if s == 0 {
		return "ok"
	}
	return strings.Join(s.Names(), "|")
}

// Mode says what the rows of an event batch are.
type Mode string

const (
	ModeEvent     Mode = "event"     // rows are events keyed by event id
	ModeTimeslice Mode = "timeslice" // rows are timeslices keyed by interval index
)

// EventSchema returns the Arrow schema of event batches for the given source
// groups: the metadata columns (event_id … corrupt_sources) followed by, for
// each group G in order, payload_G (LargeBinary) and sizes_G (list<uint32>).
// Group names must be unique and non-empty, and each group's sources
// strictly ascending (see SortGroups): the schema records a group's sources
// as a folded range list, which has no order of its own, so the payload
// order of a row is defined to be ascending source id.
func EventSchema(mode Mode, groups []SourceGroup) (*arrow.Schema, error) {
	fields := []arrow.Field{
		{Name: ColEventID, Type: arrow.PrimitiveTypes.Uint64},
		{Name: ColRun, Type: arrow.PrimitiveTypes.Uint32},
		{Name: ColTimestamp, Type: arrow.PrimitiveTypes.Uint64},
		{Name: ColStatus, Type: arrow.PrimitiveTypes.Uint32},
		{Name: ColNumFragments, Type: arrow.PrimitiveTypes.Uint32},
		{Name: ColMissingSources, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
		{Name: ColCorruptSources, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
	}
	seen := map[string]bool{}
	for i, g := range groups {
		if g.Name == "" {
			return nil, fmt.Errorf("event schema: source group %d has no name", i)
		}
		if seen[g.Name] {
			return nil, fmt.Errorf("event schema: source group %q named twice", g.Name)
		}
		seen[g.Name] = true
		for k := 1; k < len(g.Sources); k++ {
			if g.Sources[k] <= g.Sources[k-1] {
				return nil, fmt.Errorf("event schema: source group %q: sources not strictly ascending at position %d (%d after %d); use SortGroups", g.Name, k, g.Sources[k], g.Sources[k-1])
			}
		}
		md := arrow.NewMetadata([]string{MetaGroup, MetaSources}, []string{g.Name, FormatSourceList(g.Sources)})
		fields = append(fields,
			arrow.Field{Name: PayloadPrefix + g.Name, Type: arrow.BinaryTypes.LargeBinary, Metadata: md},
			arrow.Field{Name: SizesPrefix + g.Name, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32), Metadata: md},
		)
	}
	md := arrow.NewMetadata([]string{MetaSchemaVersion, MetaMode}, []string{strconv.Itoa(EventSchemaVersion), string(mode)})
	return arrow.NewSchema(fields, &md), nil
}

// BuilderSchema is EventSchema(mode, groups) followed by the build
// columns: duplicate_sources, late_sources (list<uint32>) and assignment
// (uint64), the schema of the builder's batches.
func BuilderSchema(mode Mode, groups []SourceGroup) (*arrow.Schema, error) {
	s, err := EventSchema(mode, groups)
	if err != nil {
		return nil, err
	}
	md := s.Metadata()
	return arrow.NewSchema(append(s.Fields(),
		arrow.Field{Name: ColDuplicateSources, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
		arrow.Field{Name: ColLateSources, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
		arrow.Field{Name: ColAssignment, Type: arrow.PrimitiveTypes.Uint64},
	), &md), nil
}

// GroupsOf recovers the source groups from an event schema's field metadata.
func GroupsOf(s *arrow.Schema) ([]SourceGroup, error) {
	var out []SourceGroup
	for _, f := range s.Fields() {
		if len(f.Name) <= len(PayloadPrefix) || f.Name[:len(PayloadPrefix)] != PayloadPrefix {
			continue
		}
		name, ok1 := f.Metadata.GetValue(MetaGroup)
		src, ok2 := f.Metadata.GetValue(MetaSources)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("event schema: column %s lacks %s/%s metadata", f.Name, MetaGroup, MetaSources)
		}
		ids, err := ParseSourceList(src)
		if err != nil {
			return nil, fmt.Errorf("event schema: column %s: %w", f.Name, err)
		}
		out = append(out, SourceGroup{Name: name, Sources: ids})
	}
	return out, nil
}

// EventBatch gives typed, allocation-free access to one event batch. It
// does not retain the record; the caller keeps it alive while using the view
// and, when done with the batch, may release it through Release, which
// first tells whoever still reads its memory on the side (OnRelease).
type EventBatch struct {
	Rec     arrow.RecordBatch
	Mode    Mode
	Groups  []SourceGroup
	eventID *array.Uint64
	run     *array.Uint32
	ts      *array.Uint64
	status  *array.Uint32
	nfrag   *array.Uint32
	missing *array.List
	corrupt *array.List
	dup     *array.List   // nil: no build columns
	late    *array.List   // nil: no build columns
	asg     *array.Uint64 // nil: no build columns
	lpay    []*array.LargeBinary
	sizes   []*array.List
	where   map[uint32][2]int // source id -> (group index, position in group)

	mu      sync.Mutex
	onFree  []func() // OnRelease's functions, run by Release
	release bool     // Release ran
}

// OnRelease registers f to run when the batch's owner calls Release, before
// the record is released: a reader that is not the owner (a trigger
// stage's shadow plugin) learns there that the batch's memory goes back to
// the owner and stops relying on it. f must not block. Registered after
// Release, f runs at once. Safe for concurrent use.
func (e *EventBatch) OnRelease(f func()) {
	e.mu.Lock()
	if e.release {
		e.mu.Unlock()
		f()
		return
	}
	e.onFree = append(e.onFree, f)
	e.mu.Unlock()
}

// Release runs the functions registered with OnRelease, in the order they
// were registered, then releases Rec: for the batch's owner, once, when
// it is done with the batch (an owner that releases Rec directly leaves
// those readers holding their own references until they end).
func (e *EventBatch) Release() {
	e.mu.Lock()
	fs := e.onFree
	e.onFree, e.release = nil, true
	e.mu.Unlock()
	for _, f := range fs {
		f()
	}
	e.Rec.Release()
}

// NewEventBatch checks that rec has the event schema (version, columns and
// types) and returns a view of it. Errors name the missing or mistyped column.
func NewEventBatch(rec arrow.RecordBatch) (*EventBatch, error) {
	s := rec.Schema()
	md := s.Metadata()
	if v, ok := md.GetValue(MetaSchemaVersion); !ok || v != strconv.Itoa(EventSchemaVersion) {
		return nil, fmt.Errorf("event batch: schema version %q, want %d", v, EventSchemaVersion)
	}
	mode, _ := md.GetValue(MetaMode)
	groups, err := GroupsOf(s)
	if err != nil {
		return nil, err
	}
	eb := &EventBatch{Rec: rec, Mode: Mode(mode), Groups: groups, where: map[uint32][2]int{}}
	col := func(name string) (arrow.Array, error) {
		idx := s.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("event batch: column %q missing", name)
		}
		return rec.Column(idx[0]), nil
	}
	var ok bool
	bind := func(name string, dst any) error {
		a, err := col(name)
		if err != nil {
			return err
		}
		switch d := dst.(type) {
		case **array.Uint64:
			*d, ok = a.(*array.Uint64)
		case **array.Uint32:
			*d, ok = a.(*array.Uint32)
		case **array.List:
			*d, ok = a.(*array.List)
		case **array.LargeBinary:
			*d, ok = a.(*array.LargeBinary)
		}
		if !ok {
			return fmt.Errorf("event batch: column %q has type %s", name, a.DataType())
		}
		return nil
	}
	for _, b := range []struct {
		name string
		dst  any
	}{
		{ColEventID, &eb.eventID}, {ColRun, &eb.run}, {ColTimestamp, &eb.ts}, {ColStatus, &eb.status},
		{ColNumFragments, &eb.nfrag}, {ColMissingSources, &eb.missing}, {ColCorruptSources, &eb.corrupt},
	} {
		if err := bind(b.name, b.dst); err != nil {
			return nil, err
		}
	}
	// The build columns are optional (BuilderSchema): bound when present.
	for _, b := range []struct {
		name string
		dst  any
	}{{ColDuplicateSources, &eb.dup}, {ColLateSources, &eb.late}, {ColAssignment, &eb.asg}} {
		if len(s.FieldIndices(b.name)) == 0 {
			continue
		}
		if err := bind(b.name, b.dst); err != nil {
			return nil, err
		}
	}
	eb.lpay = make([]*array.LargeBinary, len(groups))
	eb.sizes = make([]*array.List, len(groups))
	for gi, g := range groups {
		if err := bind(PayloadPrefix+g.Name, &eb.lpay[gi]); err != nil {
			return nil, err
		}
		if err := bind(SizesPrefix+g.Name, &eb.sizes[gi]); err != nil {
			return nil, err
		}
		for k, src := range g.Sources {
			eb.where[src] = [2]int{gi, k}
		}
	}
	return eb, nil
}

// Len is the number of events (rows).
func (e *EventBatch) Len() int { return int(e.Rec.NumRows()) }

// EventID of row i.
func (e *EventBatch) EventID(i int) uint64 { return e.eventID.Value(i) }

// Run number of row i.
func (e *EventBatch) Run(i int) uint32 { return e.run.Value(i) }

// Timestamp of row i in ns (see ColTimestamp).
func (e *EventBatch) Timestamp(i int) uint64 { return e.ts.Value(i) }

// Status bits of row i.
func (e *EventBatch) Status(i int) EventStatus { return EventStatus(e.status.Value(i)) }

// NumFragments of row i.
func (e *EventBatch) NumFragments(i int) int { return int(e.nfrag.Value(i)) }

// MissingSources of row i: a view into the batch, valid while it lives.
func (e *EventBatch) MissingSources(i int) []uint32 { return listView(e.missing, i) }

// CorruptSources of row i: a view into the batch, valid while it lives.
func (e *EventBatch) CorruptSources(i int) []uint32 { return listView(e.corrupt, i) }

// DuplicateSources of row i: the sources that sent more than one
// fragment (nil without the build columns); a view into the batch.
func (e *EventBatch) DuplicateSources(i int) []uint32 {
	if e.dup == nil {
		return nil
	}
	return listView(e.dup, i)
}

// LateSources of row i: the sources whose fragment came after the event
// was emitted (nil without the build columns); a view into the batch.
func (e *EventBatch) LateSources(i int) []uint32 {
	if e.late == nil {
		return nil
	}
	return listView(e.late, i)
}

// Assignment of row i: the farm assignment it was built for (0: none, or
// no build columns).
func (e *EventBatch) Assignment(i int) uint64 {
	if e.asg == nil {
		return 0
	}
	return e.asg.Value(i)
}

// GroupIndex returns the index of the named group, or -1.
func (e *EventBatch) GroupIndex(name string) int {
	for i, g := range e.Groups {
		if g.Name == name {
			return i
		}
	}
	return -1
}

// GroupPayload returns every payload of group g in row i, back to back.
func (e *EventBatch) GroupPayload(g, i int) []byte { return e.lpay[g].Value(i) }

// GroupSizes returns the payload size of each source of group g in row i,
// in the group's source order (a view into the batch).
func (e *EventBatch) GroupSizes(g, i int) []uint32 { return listView(e.sizes[g], i) }

// Fragments calls fn with each source of group g and its payload in row i
// (0-length for a missing source), in the group's order, until fn returns false.
func (e *EventBatch) Fragments(g, i int, fn func(source uint32, payload []byte) bool) {
	data := e.GroupPayload(g, i)
	sizes := e.GroupSizes(g, i)
	off := 0
	for k, sz := range sizes {
		// Invariant (kept by the builder): the sizes add up to len(data).
		end := off + int(sz)
		if end > len(data) || k >= len(e.Groups[g].Sources) {
			return
		}
		if !fn(e.Groups[g].Sources[k], data[off:end:end]) {
			return
		}
		off = end
	}
}

// EachFragment calls fn with every source of every group and its payload
// in row i (0-length for a missing source), group by group in the groups'
// order, until fn returns false.
func (e *EventBatch) EachFragment(i int, fn func(source uint32, payload []byte) bool) {
	more := true
	for g := 0; g < len(e.Groups) && more; g++ {
		e.Fragments(g, i, func(source uint32, payload []byte) bool {
			more = fn(source, payload)
			return more
		})
	}
}

// PresentFragments returns row i's non-empty payloads by source, and those
// sources in the batch's order (for joiners that rebuild a format's event).
func (e *EventBatch) PresentFragments(i int) (bySource map[uint32][]byte, order []uint32) {
	bySource = map[uint32][]byte{}
	e.EachFragment(i, func(source uint32, payload []byte) bool {
		if len(payload) > 0 {
			bySource[source] = payload
			order = append(order, source)
		}
		return true
	})
	return bySource, order
}

// Payload returns source's payload in row i, and false if the source is not
// in the schema. O(sources before it in its group).
func (e *EventBatch) Payload(source uint32, i int) ([]byte, bool) {
	w, ok := e.where[source]
	if !ok {
		return nil, false
	}
	sizes := e.GroupSizes(w[0], i)
	if w[1] >= len(sizes) {
		return nil, true
	}
	off := 0
	for _, sz := range sizes[:w[1]] {
		off += int(sz)
	}
	data := e.GroupPayload(w[0], i)
	end := off + int(sizes[w[1]])
	if end > len(data) {
		return nil, true
	}
	return data[off:end:end], true
}

func listView(l *array.List, i int) []uint32 {
	start, end := l.ValueOffsets(i)
	vals := l.ListValues().(*array.Uint32).Uint32Values()
	return vals[start:end:end]
}
