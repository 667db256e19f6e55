package farm

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
)

// Wire constants of the farm messages (see the package doc).
const (
	Magic      uint32 = 0x4D464C53 // "SLFM"
	Version    uint8  = 1
	HeaderSize        = 12
	// MaxHelloSources bounds the source ids one hello may list.
	MaxHelloSources = 1 << 20
	// GroupMixed is DataHeader.Group for a payload with packets of
	// several source groups.
	GroupMixed uint32 = 0xFFFFFFFF
)

// Kind is a message's type, byte 5 of its header.
type Kind uint8

// Message kinds.
const (
	KindHello Kind = 1 + iota
	KindBye
	KindHeartbeat
	KindCredit
	KindAssign
	KindRequest
	KindData
	KindRelease
	KindAnnounce
	KindInventory
	KindDuplicate
	KindEnd
)

// kindLast is the highest kind this version knows.
const kindLast = KindEnd

var kindNames = [...]string{"", "hello", "bye", "heartbeat", "credit", "assign", "request", "data", "release", "announce", "inventory", "duplicate", "end"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) format() string { return "farm." + k.String() }

// Roles are the parts a node plays in the farm.
type Roles uint8

// Role bits.
const (
	RoleRU Roles = 1 << iota // readout unit: holds its sources' fragments
	RoleBU                   // builder unit: builds assigned events
	RoleEM                   // event manager candidate
)

const allRoles = RoleRU | RoleBU | RoleEM

func (r Roles) String() string {
	var s []string
	for _, x := range []struct {
		bit  Roles
		name string
	}{{RoleRU, "ru"}, {RoleBU, "bu"}, {RoleEM, "em"}} {
		if r&x.bit != 0 {
			s = append(s, x.name)
		}
	}
	if r&^allRoles != 0 {
		s = append(s, fmt.Sprintf("0x%02x", uint8(r&^allRoles)))
	}
	return strings.Join(s, ",")
}

// UnitKind says what an assignment's ranges count.
type UnitKind uint8

// Unit kinds.
const (
	// UnitEvents: ranges of event ids, as named by the RU holding the
	// trigger source.
	UnitEvents UnitKind = 1
	// UnitPackets: ranges of the readout's packet sequence numbers (MEPs):
	// every RU's k-th packet holds the same events.
	UnitPackets UnitKind = 2
)

func (k UnitKind) String() string {
	switch k {
	case UnitEvents:
		return "events"
	case UnitPackets:
		return "packets"
	}
	return fmt.Sprintf("unit(%d)", uint8(k))
}

// MarshalText names the kind (events, packets) in JSON.
func (k UnitKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *UnitKind) UnmarshalText(b []byte) error {
	for _, c := range []UnitKind{UnitEvents, UnitPackets} {
		if string(b) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unit kind %q: want events or packets", b)
}

// Range is N consecutive numbers (event ids or packet sequence numbers)
// from First.
type Range struct {
	First uint64 `json:"first"`
	N     uint32 `json:"n"`
}

// Last is the range's last number (N >= 1).
func (r Range) Last() uint64 { return r.First + uint64(r.N) - 1 }

// separated reports whether next starts past prev's last number plus one
// (ranges of a unit are ascending and merged when adjacent).
func separated(prev, next Range) bool {
	end := prev.Last()
	return end < math.MaxUint64-1 && next.First > end+1
}

// Unit is the work of one assignment: elements (event ids or packet
// sequence numbers) of one run and resync, as ascending ranges separated
// by at least one missing number (adjacent ranges are merged).
type Unit struct {
	Run    uint32
	Resync uint32
	Kind   UnitKind
	Ranges []Range
}

// Len is the number of elements.
func (u Unit) Len() int {
	n := 0
	for _, r := range u.Ranges {
		n += int(r.N)
	}
	return n
}

func (u Unit) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %d resync %d %s", u.Run, u.Resync, u.Kind)
	for i, r := range u.Ranges {
		if i == 4 {
			fmt.Fprintf(&b, " ... (%d ranges)", len(u.Ranges))
			break
		}
		if r.N == 1 {
			fmt.Fprintf(&b, " %d", r.First)
		} else {
			fmt.Fprintf(&b, " %d-%d", r.First, r.First+uint64(r.N)-1)
		}
	}
	return b.String()
}

// Hello is the first message on every connection: who the sender is.
type Hello struct {
	Farm, Token string
	Node        string
	Address     string // transport address others connect to
	Roles       Roles
	Incarnation uint64   // the sender's etcd lease id
	Sources     []uint32 // ascending, distinct: the sources this node reads out
}

// Bye is sent by a drained node as it leaves.
type Bye struct {
	Farm, Token string
	Node        string
	Incarnation uint64
}

// Heartbeat is sent on every connection about every 100 ms each way.
type Heartbeat struct {
	Incarnation uint64
	Seq         uint64
	UnixNano    int64
}

// Credit is a BU granting the EM of Epoch Events more elements and Bytes
// more payload bytes (increments).
type Credit struct {
	Epoch       uint64
	Incarnation uint64
	BU          string
	Events      uint32
	Bytes       uint64
}

// Assign is one assignment: Unit goes to BU (incarnation Incarnation),
// made by the EM of Epoch; Supersedes is the id of the assignment it
// replaces, 0 for a first assignment.
type Assign struct {
	Epoch       uint64
	ID          uint64
	Supersedes  uint64
	Incarnation uint64
	BU          string
	Unit        Unit
}

// Request is a BU asking an RU for an assignment's data (pull protocol):
// the fields of the Assign the BU got.
type Request Assign

// DataFlags qualify a data message.
type DataFlags uint32

// Data flags.
const (
	DataFinal   DataFlags = 1 << iota // the RU's last data message for the assignment
	DataMissing                       // some of the RU's sources had no data for part of it
)

const allDataFlags = DataFinal | DataMissing

// DataHeader heads an RU's data message for one assignment; the payload
// (PayloadBytes of multi-fragment packets) travels as the transport's data.
type DataHeader struct {
	Assignment   uint64
	Incarnation  uint64 // the BU's
	PayloadBytes uint64
	Group        uint32 // source group index, or GroupMixed
	Packets      uint32
	Flags        DataFlags
}

// Outcome is how far a BU got with an assignment.
type Outcome uint8

// Outcomes, in order for the first three.
const (
	OutcomeReceived Outcome = 1 + iota // every RU's data is in
	OutcomeDecided                     // built, and the trigger decided
	OutcomeDurable                     // accepted events synced to the store
	OutcomeReturned                    // given back unbuilt: the EM reassigns it
)

func (o Outcome) String() string {
	switch o {
	case OutcomeReceived:
		return "received"
	case OutcomeDecided:
		return "decided"
	case OutcomeDurable:
		return "durable"
	case OutcomeReturned:
		return "returned"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// ParseOutcome parses a release policy name (received, decided, durable).
func ParseOutcome(s string) (Outcome, error) {
	for _, o := range []Outcome{OutcomeReceived, OutcomeDecided, OutcomeDurable} {
		if s == o.String() {
			return o, nil
		}
	}
	return 0, fmt.Errorf("release policy %q: want received, decided or durable", s)
}

// Announce is the RU that holds the trigger source naming the elements
// it read (CMS's EVM) to the EM, which assigns them.
type Announce struct {
	Unit Unit
}

// Inventory is a node's report to a new EM (of Epoch): a BU's in-flight
// and lately settled assignments with how far each got, an RU's lately
// released ones, so the EM adopts them instead of assigning their events
// again. The RU holding the trigger source sends its inventory after its
// re-announcements: then they are all in.
type Inventory struct {
	Epoch       uint64
	Incarnation uint64
	Node        string
	Entries     []InventoryEntry
}

// InventoryEntry is one assignment: for a BU one it holds or settled
// lately, for an RU one whose release it applied lately.
type InventoryEntry struct {
	ID, Supersedes, Epoch uint64
	Incarnation           uint64 // its BU's
	BU                    string
	Reached               Outcome // 0: nothing reported yet
	Unit                  Unit
}

// releaseUnbuilt: a release entry's flag, its unbuilt ranges follow.
const releaseUnbuilt = 1

// Release is a BU reporting outcomes of some of its assignments.
type Release struct {
	Incarnation uint64
	BU          string
	Entries     []ReleaseEntry
}

// ReleaseEntry is one assignment's outcome: Events built (for the
// decided and durable outcomes) from Bytes of payload received. Unbuilt
// (an assignment of event ids only) are its ids of which no RU's data
// reached the BU, so no event was built: the EM counts them lost
// (timed_out), not built. Empty when every id had data.
type ReleaseEntry struct {
	Assignment uint64
	Outcome    Outcome
	Events     uint32
	Bytes      uint64
	Unbuilt    []Range
}

// Peek reads the common header of the message at the start of b: its
// kind and size (for framing a stream). It checks magic, version and the
// reserved bytes, not the kind's body.
func Peek(b []byte) (Kind, int, error) {
	const format = "farm"
	if len(b) < HeaderSize {
		return 0, 0, schemas.Errorf(format, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", HeaderSize, len(b))
	}
	if m := le.Uint32(b); m != Magic {
		return 0, 0, schemas.Errorf(format, "magic", 0, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", Magic, m)
	}
	if b[4] != Version {
		return 0, 0, schemas.Errorf(format, "version", 4, schemas.ErrBadVersion, "want %d, have %d", Version, b[4])
	}
	k := Kind(b[5])
	if k < KindHello || k > kindLast {
		return 0, 0, schemas.Errorf(format, "kind", 5, schemas.ErrBadHeader, "unknown kind %d", b[5])
	}
	if b[6] != 0 || b[7] != 0 {
		return 0, 0, schemas.Errorf(format, "reserved", 6, schemas.ErrBadHeader, "reserved bytes are 0x%02x%02x, want 0", b[6], b[7])
	}
	size := le.Uint32(b[8:])
	if size < HeaderSize {
		return 0, 0, schemas.Errorf(format, "size", 8, schemas.ErrBadHeader, "size %d is below the %d-byte header", size, HeaderSize)
	}
	return k, int(size), nil
}

func encodeErr(kind Kind, field, detail string, args ...any) error {
	return fmt.Errorf("%w: %s.%s: %s", ErrEncode, kind, field, fmt.Sprintf(detail, args...))
}

func checkStr(kind Kind, field, s string, nonEmpty bool) error {
	if len(s) > maxStr {
		return encodeErr(kind, field, "%d bytes, at most %d", len(s), maxStr)
	}
	if nonEmpty && s == "" {
		return encodeErr(kind, field, "empty")
	}
	return nil
}

// AppendHello appends h encoded. Errors (ErrEncode): a string over 255
// bytes, an empty node id, unknown role bits, sources not ascending and
// distinct or more than MaxHelloSources.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	for _, s := range []struct {
		f, v string
		ne   bool
	}{{"farm", h.Farm, false}, {"token", h.Token, false}, {"node", h.Node, true}, {"address", h.Address, false}} {
		if err := checkStr(KindHello, s.f, s.v, s.ne); err != nil {
			return dst, err
		}
	}
	if h.Roles&^allRoles != 0 {
		return dst, encodeErr(KindHello, "roles", "unknown bits 0x%02x", uint8(h.Roles&^allRoles))
	}
	if len(h.Sources) > MaxHelloSources {
		return dst, encodeErr(KindHello, "sources", "%d ids, at most %d", len(h.Sources), MaxHelloSources)
	}
	for i := 1; i < len(h.Sources); i++ {
		if h.Sources[i] <= h.Sources[i-1] {
			return dst, encodeErr(KindHello, "sources", "not ascending and distinct at index %d", i)
		}
	}
	var ranges [][2]uint32
	for i, s := range h.Sources {
		if i > 0 && s == ranges[len(ranges)-1][1]+1 {
			ranges[len(ranges)-1][1] = s
		} else {
			ranges = append(ranges, [2]uint32{s, s})
		}
	}
	dst, start := appendHeader(dst, KindHello)
	dst = le.AppendUint64(dst, h.Incarnation)
	dst = append(dst, byte(h.Roles), 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(len(ranges)))
	dst = appendStr(dst, h.Farm)
	dst = appendStr(dst, h.Token)
	dst = appendStr(dst, h.Node)
	dst = appendStr(dst, h.Address)
	for _, r := range ranges {
		dst = le.AppendUint32(dst, r[0])
		dst = le.AppendUint32(dst, r[1])
	}
	return finish(dst, start), nil
}

// DecodeHello decodes one hello message filling all of b.
func DecodeHello(b []byte) (Hello, error) {
	r := header(b, KindHello)
	var h Hello
	h.Incarnation = r.u64("incarnation")
	at := r.off
	h.Roles = Roles(r.u8("roles"))
	if r.err == nil && h.Roles&^allRoles != 0 {
		r.fail("roles", at, schemas.ErrBadHeader, "unknown role bits 0x%02x", uint8(h.Roles&^allRoles))
	}
	r.zero("reserved", 3)
	nAt := r.off
	n := r.u32("n_ranges")
	h.Farm = r.str("farm", false)
	h.Token = r.str("token", false)
	h.Node = r.str("node", true)
	h.Address = r.str("address", false)
	if r.err == nil && uint64(n)*8 > uint64(len(b)-r.off) {
		r.fail("n_ranges", nAt, schemas.ErrSizeOverflow, "%d ranges need %d bytes, %d left", n, uint64(n)*8, len(b)-r.off)
	}
	total := 0
	var prevLast uint32
	for i := 0; i < int(n) && r.err == nil; i++ {
		at := r.off
		first, last := r.u32("sources"), r.u32("sources")
		switch {
		case r.err != nil:
		case last < first:
			r.fail("sources", at, schemas.ErrInconsistent, "range %d ends (%d) before it starts (%d)", i, last, first)
		case i > 0 && uint64(first) <= uint64(prevLast)+1:
			r.fail("sources", at, schemas.ErrInconsistent, "range %d starts at %d, not past the previous range's end %d plus one", i, first, prevLast)
		case total+int(last-first)+1 > MaxHelloSources:
			r.fail("sources", at, schemas.ErrSizeOverflow, "more than %d source ids", MaxHelloSources)
		default:
			total += int(last-first) + 1
			for s := uint64(first); s <= uint64(last); s++ {
				h.Sources = append(h.Sources, uint32(s))
			}
			prevLast = last
		}
	}
	r.end()
	if r.err != nil {
		return Hello{}, r.err
	}
	return h, nil
}

// AppendBye appends b encoded (errors as AppendHello's).
func AppendBye(dst []byte, b Bye) ([]byte, error) {
	for _, s := range []struct {
		f, v string
		ne   bool
	}{{"farm", b.Farm, false}, {"token", b.Token, false}, {"node", b.Node, true}} {
		if err := checkStr(KindBye, s.f, s.v, s.ne); err != nil {
			return dst, err
		}
	}
	dst, start := appendHeader(dst, KindBye)
	dst = le.AppendUint64(dst, b.Incarnation)
	dst = appendStr(dst, b.Farm)
	dst = appendStr(dst, b.Token)
	dst = appendStr(dst, b.Node)
	return finish(dst, start), nil
}

// DecodeBye decodes one bye message filling all of b.
func DecodeBye(b []byte) (Bye, error) {
	r := header(b, KindBye)
	var y Bye
	y.Incarnation = r.u64("incarnation")
	y.Farm = r.str("farm", false)
	y.Token = r.str("token", false)
	y.Node = r.str("node", true)
	r.end()
	if r.err != nil {
		return Bye{}, r.err
	}
	return y, nil
}

// AppendHeartbeat appends h encoded (36 bytes).
func AppendHeartbeat(dst []byte, h Heartbeat) []byte {
	dst, start := appendHeader(dst, KindHeartbeat)
	dst = le.AppendUint64(dst, h.Incarnation)
	dst = le.AppendUint64(dst, h.Seq)
	dst = le.AppendUint64(dst, uint64(h.UnixNano))
	return finish(dst, start)
}

// DecodeHeartbeat decodes one heartbeat filling all of b.
func DecodeHeartbeat(b []byte) (Heartbeat, error) {
	r := header(b, KindHeartbeat)
	h := Heartbeat{Incarnation: r.u64("incarnation"), Seq: r.u64("seq"), UnixNano: int64(r.u64("unix_ns"))}
	r.end()
	if r.err != nil {
		return Heartbeat{}, r.err
	}
	return h, nil
}

// AppendCredit appends c encoded. Errors (ErrEncode): an empty or too long
// BU id.
func AppendCredit(dst []byte, c Credit) ([]byte, error) {
	if err := checkStr(KindCredit, "bu", c.BU, true); err != nil {
		return dst, err
	}
	dst, start := appendHeader(dst, KindCredit)
	dst = le.AppendUint64(dst, c.Epoch)
	dst = le.AppendUint64(dst, c.Incarnation)
	dst = le.AppendUint64(dst, c.Bytes)
	dst = le.AppendUint32(dst, c.Events)
	dst = appendStr(dst, c.BU)
	return finish(dst, start), nil
}

// DecodeCredit decodes one credit message filling all of b.
func DecodeCredit(b []byte) (Credit, error) {
	r := header(b, KindCredit)
	var c Credit
	c.Epoch = r.u64("epoch")
	c.Incarnation = r.u64("incarnation")
	c.Bytes = r.u64("bytes")
	c.Events = r.u32("events")
	c.BU = r.str("bu", true)
	r.end()
	if r.err != nil {
		return Credit{}, r.err
	}
	return c, nil
}

// unit reads a unit: run, resync, kind, 3 reserved bytes, count,
// n_ranges, then the ranges.
func (r *reader) unit() Unit { return r.unitWith(nil) }

// unitWith reads a unit whose ranges follow other fields, read by between
// (the assign's bu).
func (r *reader) unitWith(between func()) Unit {
	var u Unit
	u.Run = r.u32("run")
	u.Resync = r.u32("resync")
	kAt := r.off
	u.Kind = UnitKind(r.u8("unit"))
	if r.err == nil && u.Kind != UnitEvents && u.Kind != UnitPackets {
		r.fail("unit", kAt, schemas.ErrBadHeader, "unknown unit kind %d", uint8(u.Kind))
	}
	r.zero("reserved", 3)
	countAt := r.off
	count := r.u32("count")
	nAt := r.off
	n := r.u32("n_ranges")
	if r.err == nil && n == 0 {
		r.fail("n_ranges", nAt, schemas.ErrBadHeader, "no range")
	}
	if between != nil {
		between()
	}
	var total uint64
	u.Ranges, total = r.ranges("n_ranges", nAt, "ranges", n)
	if r.err == nil && total != uint64(count) {
		r.fail("count", countAt, schemas.ErrInconsistent, "count %d, ranges hold %d", count, total)
	}
	return u
}

// ranges reads n ranges (first u64, n u32), ascending and separated, none
// empty; nField at nAt is the count's field (for a size error). It
// returns them and the elements they hold.
func (r *reader) ranges(nField string, nAt int, field string, n uint32) ([]Range, uint64) {
	if r.err == nil && uint64(n)*12 > uint64(len(r.b)-r.off) {
		r.fail(nField, nAt, schemas.ErrSizeOverflow, "%d ranges need %d bytes, %d left", n, uint64(n)*12, len(r.b)-r.off)
	}
	if r.err != nil {
		return nil, 0
	}
	out := make([]Range, 0, n)
	var total uint64
	for i := 0; i < int(n) && r.err == nil; i++ {
		at := r.off
		rg := Range{First: r.u64(field), N: r.u32(field)}
		switch {
		case r.err != nil:
		case rg.N == 0:
			r.fail(field, at+8, schemas.ErrBadHeader, "range %d is empty", i)
		case rg.First > math.MaxUint64-uint64(rg.N)+1:
			r.fail(field, at, schemas.ErrSizeOverflow, "range %d passes 2^64", i)
		case i > 0 && !separated(out[i-1], rg):
			r.fail(field, at, schemas.ErrInconsistent, "range %d starts at %d, not past the previous range's end plus one", i, rg.First)
		default:
			total += uint64(rg.N)
			out = append(out, rg)
		}
	}
	return out, total
}

// checkUnit validates a unit for encoding.
func checkUnit(kind Kind, u Unit) error {
	if u.Kind != UnitEvents && u.Kind != UnitPackets {
		return encodeErr(kind, "unit", "unknown unit kind %d", uint8(u.Kind))
	}
	if len(u.Ranges) == 0 {
		return encodeErr(kind, "ranges", "no range")
	}
	return checkRanges(kind, "ranges", u.Ranges)
}

// checkRanges validates ranges for encoding: none empty, ascending and
// separated, within 2^64, at most 2^32-1 elements together.
func checkRanges(kind Kind, field string, rs []Range) error {
	var total uint64
	for i, r := range rs {
		if r.N == 0 {
			return encodeErr(kind, field, "range %d is empty", i)
		}
		if r.First > math.MaxUint64-uint64(r.N)+1 {
			return encodeErr(kind, field, "range %d passes 2^64", i)
		}
		if i > 0 && !separated(rs[i-1], r) {
			return encodeErr(kind, field, "range %d starts at %d, not past the previous range's end %d plus one", i, r.First, rs[i-1].Last())
		}
		total += uint64(r.N)
	}
	if total > math.MaxUint32 {
		return encodeErr(kind, "count", "%d elements, at most 2^32-1", total)
	}
	return nil
}

func appendAssign(dst []byte, kind Kind, a Assign) ([]byte, error) {
	if err := checkStr(kind, "bu", a.BU, true); err != nil {
		return dst, err
	}
	if a.ID == 0 {
		return dst, encodeErr(kind, "id", "0 is not an assignment id")
	}
	if err := checkUnit(kind, a.Unit); err != nil {
		return dst, err
	}
	dst, start := appendHeader(dst, kind)
	dst = le.AppendUint64(dst, a.Epoch)
	dst = le.AppendUint64(dst, a.ID)
	dst = le.AppendUint64(dst, a.Supersedes)
	dst = le.AppendUint64(dst, a.Incarnation)
	dst = le.AppendUint32(dst, a.Unit.Run)
	dst = le.AppendUint32(dst, a.Unit.Resync)
	dst = append(dst, byte(a.Unit.Kind), 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(a.Unit.Len()))
	dst = le.AppendUint32(dst, uint32(len(a.Unit.Ranges)))
	dst = appendStr(dst, a.BU)
	for _, r := range a.Unit.Ranges {
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.N)
	}
	return finish(dst, start), nil
}

func decodeAssign(b []byte, kind Kind) (Assign, error) {
	r := header(b, kind)
	var a Assign
	a.Epoch = r.u64("epoch")
	idAt := r.off
	a.ID = r.u64("id")
	if r.err == nil && a.ID == 0 {
		r.fail("id", idAt, schemas.ErrBadHeader, "0 is not an assignment id")
	}
	a.Supersedes = r.u64("supersedes")
	a.Incarnation = r.u64("incarnation")
	a.Unit = r.unitWith(func() { a.BU = r.str("bu", true) })
	r.end()
	if r.err != nil {
		return Assign{}, r.err
	}
	return a, nil
}

// AppendAssign appends a encoded. Errors (ErrEncode): an empty or too long
// BU id, id 0, an unknown unit kind, no range, an empty range, ranges not
// ascending and separated, or more than 2^32-1 elements.
func AppendAssign(dst []byte, a Assign) ([]byte, error) { return appendAssign(dst, KindAssign, a) }

// DecodeAssign decodes one assign message filling all of b.
func DecodeAssign(b []byte) (Assign, error) { return decodeAssign(b, KindAssign) }

// AppendRequest appends q encoded (errors as AppendAssign's).
func AppendRequest(dst []byte, q Request) ([]byte, error) {
	return appendAssign(dst, KindRequest, Assign(q))
}

// DecodeRequest decodes one request message filling all of b.
func DecodeRequest(b []byte) (Request, error) {
	a, err := decodeAssign(b, KindRequest)
	return Request(a), err
}

// AppendData appends the data header d encoded (48 bytes). Errors
// (ErrEncode): unknown flag bits.
func AppendData(dst []byte, d DataHeader) ([]byte, error) {
	if d.Flags&^allDataFlags != 0 {
		return dst, encodeErr(KindData, "flags", "unknown bits 0x%x", uint32(d.Flags&^allDataFlags))
	}
	dst, start := appendHeader(dst, KindData)
	dst = le.AppendUint64(dst, d.Assignment)
	dst = le.AppendUint64(dst, d.Incarnation)
	dst = le.AppendUint64(dst, d.PayloadBytes)
	dst = le.AppendUint32(dst, d.Group)
	dst = le.AppendUint32(dst, d.Packets)
	dst = le.AppendUint32(dst, uint32(d.Flags))
	return finish(dst, start), nil
}

// DecodeData decodes one data header filling all of b.
func DecodeData(b []byte) (DataHeader, error) {
	r := header(b, KindData)
	var d DataHeader
	at := r.off
	d.Assignment = r.u64("assignment")
	if r.err == nil && d.Assignment == 0 {
		r.fail("assignment", at, schemas.ErrBadHeader, "0 is not an assignment id")
	}
	d.Incarnation = r.u64("incarnation")
	d.PayloadBytes = r.u64("payload")
	d.Group = r.u32("group")
	d.Packets = r.u32("packets")
	at = r.off
	d.Flags = DataFlags(r.u32("flags"))
	if r.err == nil && d.Flags&^allDataFlags != 0 {
		r.fail("flags", at, schemas.ErrBadHeader, "unknown flag bits 0x%x", uint32(d.Flags&^allDataFlags))
	}
	r.end()
	if r.err != nil {
		return DataHeader{}, r.err
	}
	return d, nil
}

// AppendRelease appends rel encoded. Errors (ErrEncode): an empty or too
// long BU id, no entry, an entry with assignment id 0 or an unknown
// outcome.
func AppendRelease(dst []byte, rel Release) ([]byte, error) {
	if err := checkStr(KindRelease, "bu", rel.BU, true); err != nil {
		return dst, err
	}
	if len(rel.Entries) == 0 {
		return dst, encodeErr(KindRelease, "entries", "none")
	}
	for i, e := range rel.Entries {
		if e.Assignment == 0 {
			return dst, encodeErr(KindRelease, "entries", "entry %d: 0 is not an assignment id", i)
		}
		if e.Outcome < OutcomeReceived || e.Outcome > OutcomeReturned {
			return dst, encodeErr(KindRelease, "entries", "entry %d: unknown outcome %d", i, uint8(e.Outcome))
		}
		if err := checkRanges(KindRelease, "unbuilt", e.Unbuilt); err != nil {
			return dst, err
		}
	}
	dst, start := appendHeader(dst, KindRelease)
	dst = le.AppendUint64(dst, rel.Incarnation)
	dst = le.AppendUint32(dst, uint32(len(rel.Entries)))
	dst = appendStr(dst, rel.BU)
	for _, e := range rel.Entries {
		dst = le.AppendUint64(dst, e.Assignment)
		var flags byte
		if len(e.Unbuilt) > 0 {
			flags = releaseUnbuilt
		}
		dst = append(dst, byte(e.Outcome), flags, 0, 0)
		dst = le.AppendUint32(dst, e.Events)
		dst = le.AppendUint64(dst, e.Bytes)
		if flags&releaseUnbuilt != 0 {
			dst = le.AppendUint32(dst, uint32(len(e.Unbuilt)))
			for _, r := range e.Unbuilt {
				dst = le.AppendUint64(dst, r.First)
				dst = le.AppendUint32(dst, r.N)
			}
		}
	}
	return finish(dst, start), nil
}

// DecodeRelease decodes one release message filling all of b.
func DecodeRelease(b []byte) (Release, error) {
	r := header(b, KindRelease)
	var rel Release
	rel.Incarnation = r.u64("incarnation")
	nAt := r.off
	n := r.u32("n")
	if r.err == nil && n == 0 {
		r.fail("n", nAt, schemas.ErrBadHeader, "no entry")
	}
	rel.BU = r.str("bu", true)
	if r.err == nil && uint64(n)*24 > uint64(len(b)-r.off) {
		r.fail("n", nAt, schemas.ErrSizeOverflow, "%d entries need %d bytes, %d left", n, uint64(n)*24, len(b)-r.off)
	}
	if r.err == nil {
		rel.Entries = make([]ReleaseEntry, 0, n)
	}
	for i := 0; i < int(n) && r.err == nil; i++ {
		at := r.off
		var e ReleaseEntry
		e.Assignment = r.u64("entries")
		if r.err == nil && e.Assignment == 0 {
			r.fail("entries", at, schemas.ErrBadHeader, "entry %d: 0 is not an assignment id", i)
		}
		e.Outcome = Outcome(r.u8("entries"))
		if r.err == nil && (e.Outcome < OutcomeReceived || e.Outcome > OutcomeReturned) {
			r.fail("entries", at+8, schemas.ErrBadHeader, "entry %d: unknown outcome %d", i, uint8(e.Outcome))
		}
		fAt := r.off
		flags := r.u8("entries")
		if r.err == nil && flags&^releaseUnbuilt != 0 {
			r.fail("entries", fAt, schemas.ErrBadHeader, "entry %d: unknown flags 0x%02x", i, flags)
		}
		r.zero("entries", 2)
		e.Events = r.u32("entries")
		e.Bytes = r.u64("entries")
		if r.err == nil && flags&releaseUnbuilt != 0 {
			mAt := r.off
			m := r.u32("unbuilt")
			if r.err == nil && m == 0 {
				r.fail("unbuilt", mAt, schemas.ErrBadHeader, "entry %d: unbuilt flag with no range", i)
			}
			var total uint64
			e.Unbuilt, total = r.ranges("unbuilt", mAt, "unbuilt", m)
			if r.err == nil && total > math.MaxUint32 {
				r.fail("unbuilt", mAt, schemas.ErrSizeOverflow, "entry %d: %d unbuilt ids, at most 2^32-1", i, total)
			}
		}
		rel.Entries = append(rel.Entries, e)
	}
	r.end()
	if r.err != nil {
		return Release{}, r.err
	}
	return rel, nil
}

// AppendAnnounce appends an announce encoded. Errors (ErrEncode): an
// unknown unit kind, no range, an empty range, ranges not ascending and
// separated, or more than 2^32-1 elements.
func AppendAnnounce(dst []byte, an Announce) ([]byte, error) {
	if err := checkUnit(KindAnnounce, an.Unit); err != nil {
		return dst, err
	}
	dst, start := appendHeader(dst, KindAnnounce)
	dst = le.AppendUint32(dst, an.Unit.Run)
	dst = le.AppendUint32(dst, an.Unit.Resync)
	dst = append(dst, byte(an.Unit.Kind), 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(an.Unit.Len()))
	dst = le.AppendUint32(dst, uint32(len(an.Unit.Ranges)))
	for _, r := range an.Unit.Ranges {
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.N)
	}
	return finish(dst, start), nil
}

// DecodeAnnounce decodes one announce message filling all of b.
func DecodeAnnounce(b []byte) (Announce, error) {
	r := header(b, KindAnnounce)
	var an Announce
	an.Unit = r.unit()
	r.end()
	if r.err != nil {
		return Announce{}, r.err
	}
	return an, nil
}

// AppendInventory appends inv encoded. Errors (ErrEncode): an empty or too
// long node id, an entry with id 0, an unknown outcome, or a bad unit.
func AppendInventory(dst []byte, inv Inventory) ([]byte, error) {
	if err := checkStr(KindInventory, "node", inv.Node, true); err != nil {
		return dst, err
	}
	for i, e := range inv.Entries {
		if e.ID == 0 {
			return dst, encodeErr(KindInventory, "entries", "entry %d: 0 is not an assignment id", i)
		}
		if e.Reached > OutcomeReturned {
			return dst, encodeErr(KindInventory, "entries", "entry %d: unknown outcome %d", i, uint8(e.Reached))
		}
		if err := checkUnit(KindInventory, e.Unit); err != nil {
			return dst, err
		}
		if err := checkStr(KindInventory, "entries.bu", e.BU, true); err != nil {
			return dst, err
		}
	}
	dst, start := appendHeader(dst, KindInventory)
	dst = le.AppendUint64(dst, inv.Epoch)
	dst = le.AppendUint64(dst, inv.Incarnation)
	dst = le.AppendUint32(dst, uint32(len(inv.Entries)))
	dst = appendStr(dst, inv.Node)
	for _, e := range inv.Entries {
		dst = le.AppendUint64(dst, e.ID)
		dst = le.AppendUint64(dst, e.Supersedes)
		dst = le.AppendUint64(dst, e.Epoch)
		dst = le.AppendUint64(dst, e.Incarnation)
		dst = append(dst, byte(e.Reached), 0, 0, 0)
		dst = le.AppendUint32(dst, e.Unit.Run)
		dst = le.AppendUint32(dst, e.Unit.Resync)
		dst = append(dst, byte(e.Unit.Kind), 0, 0, 0)
		dst = le.AppendUint32(dst, uint32(e.Unit.Len()))
		dst = le.AppendUint32(dst, uint32(len(e.Unit.Ranges)))
		dst = appendStr(dst, e.BU)
		for _, r := range e.Unit.Ranges {
			dst = le.AppendUint64(dst, r.First)
			dst = le.AppendUint32(dst, r.N)
		}
	}
	return finish(dst, start), nil
}

// DecodeInventory decodes one inventory message filling all of b.
func DecodeInventory(b []byte) (Inventory, error) {
	r := header(b, KindInventory)
	var inv Inventory
	inv.Epoch = r.u64("epoch")
	inv.Incarnation = r.u64("incarnation")
	nAt := r.off
	n := r.u32("n")
	inv.Node = r.str("node", true)
	// An entry takes at least 56 + 2 + 12 bytes.
	if r.err == nil && uint64(n)*70 > uint64(len(b)-r.off) {
		r.fail("n", nAt, schemas.ErrSizeOverflow, "%d entries need at least %d bytes, %d left", n, uint64(n)*70, len(b)-r.off)
	}
	for i := 0; i < int(n) && r.err == nil; i++ {
		var e InventoryEntry
		at := r.off
		e.ID = r.u64("entries")
		if r.err == nil && e.ID == 0 {
			r.fail("entries", at, schemas.ErrBadHeader, "entry %d: 0 is not an assignment id", i)
		}
		e.Supersedes = r.u64("entries")
		e.Epoch = r.u64("entries")
		e.Incarnation = r.u64("entries")
		oAt := r.off
		e.Reached = Outcome(r.u8("entries"))
		if r.err == nil && e.Reached > OutcomeReturned {
			r.fail("entries", oAt, schemas.ErrBadHeader, "entry %d: unknown outcome %d", i, uint8(e.Reached))
		}
		r.zero("entries", 3)
		e.Unit = r.unitWith(func() { e.BU = r.str("entries.bu", true) })
		inv.Entries = append(inv.Entries, e)
	}
	r.end()
	if r.err != nil {
		return Inventory{}, r.err
	}
	return inv, nil
}
