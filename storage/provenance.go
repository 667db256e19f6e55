package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// ProvenanceVersion is the encoding of the provenance records this build
// writes (byte 0 of each; layout in doc.go). It reads version 1 too (no
// build section); a replay adding a pass to one writes it as version 2.
const ProvenanceVersion = 2

// Build section flags (doc.go).
const (
	builtDuplicated = 1 << 0
	builtLate       = 1 << 1
	builtBU         = 1 << 2
)

// buildUnit is the farm node a store's events are built by (Store.SetBuildUnit).
type buildUnit struct {
	name        string
	incarnation uint64
}

// SetBuildUnit names the farm builder unit (node name, membership
// incarnation) that builds the events Put writes from now on: their
// provenance records it, with each event's assignment. "" (the default):
// a single node, nothing recorded.
func (s *Store) SetBuildUnit(name string, incarnation uint64) {
	if old := s.bu.Load(); old != nil && old.name == name && old.incarnation == incarnation {
		return // each assignment sets it: no allocation when nothing changed
	}
	s.bu.Store(&buildUnit{name: name, incarnation: incarnation})
}

// provPrefix is the first byte of the provenance record keys (not a
// stream: parseKey refuses it). A record is keyed by (run, event id) alone,
// so it follows its event from the deferred to the accepted stream and
// stays beside a tombstone.
const provPrefix byte = 0x10

// metaPluginPrefix starts the keys of the plugin table: "\x00plugin" + the
// entry's index (4 bytes big-endian), holding a schemas.PluginID as JSON.
var metaPluginPrefix = []byte{metaPrefix, 'p', 'l', 'u', 'g', 'i', 'n'}

func appendProvKey(dst []byte, k Key) []byte {
	dst = append(dst, provPrefix)
	dst = binary.BigEndian.AppendUint32(dst, k.Run)
	return binary.BigEndian.AppendUint64(dst, k.EventID)
}

func pluginKey(i uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte{}, metaPluginPrefix...), i)
}

// pluginTable is the store's table of the plugins its events' steps name,
// each once: a step stores the entry's index. Entries are only added.
type pluginTable struct {
	mu      sync.Mutex
	ids     []*schemas.PluginID // by index; pointers stay valid as it grows
	byValue map[schemas.PluginID]uint32
	byPtr   map[*schemas.PluginID]uint32 // the trigger host's own pointers, for a cheap lookup
	stored  []bool                       // by index: its record is in the store
}

func newPluginTable() *pluginTable {
	return &pluginTable{byValue: map[schemas.PluginID]uint32{}, byPtr: map[*schemas.PluginID]uint32{}}
}

// load reads the table's records.
func (t *pluginTable) load(db *badger.DB) error {
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: metaPluginPrefix, PrefetchValues: true})
		defer it.Close()
		t.mu.Lock()
		defer t.mu.Unlock()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != len(metaPluginPrefix)+4 {
				continue
			}
			i := binary.BigEndian.Uint32(k[len(metaPluginPrefix):])
			var id schemas.PluginID
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &id) }); err != nil {
				return fmt.Errorf("store: plugin table entry %d: %w", i, err)
			}
			if int(i) != len(t.ids) {
				return fmt.Errorf("store: plugin table entry %d after %d entries: %w", i, len(t.ids), schemas.ErrInconsistent)
			}
			t.ids = append(t.ids, &id)
			t.byValue[id] = i
			t.stored = append(t.stored, true)
		}
		return nil
	})
}

// index returns id's entry, adding it when new; unstored collects the
// entries the current write must also write (new ones, and ones a failed
// write added but did not store).
func (t *pluginTable) index(id *schemas.PluginID, unstored *[]uint32) uint32 {
	i, ok := t.byPtr[id]
	if !ok {
		if i, ok = t.byValue[*id]; !ok {
			i = uint32(len(t.ids))
			cp := *id
			t.ids = append(t.ids, &cp)
			t.byValue[cp] = i
			t.stored = append(t.stored, false)
		}
		t.byPtr[id] = i
	}
	if !t.stored[i] && !contains(*unstored, i) {
		*unstored = append(*unstored, i)
	}
	return i
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// records are the key-value pairs of entries is.
func (t *pluginTable) records(is []uint32) ([][2][]byte, error) {
	out := make([][2][]byte, 0, len(is))
	for _, i := range is {
		b, err := json.Marshal(t.ids[i])
		if err != nil {
			return nil, err
		}
		out = append(out, [2][]byte{pluginKey(i), b})
	}
	return out, nil
}

// markStored records that a write holding entries is was applied.
func (t *pluginTable) markStored(is []uint32) {
	if len(is) == 0 {
		return
	}
	t.mu.Lock()
	for _, i := range is {
		t.stored[i] = true
	}
	t.mu.Unlock()
}

// lookup is entry i, nil when the table has none such.
func (t *pluginTable) lookup(i uint32) *schemas.PluginID {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(i) < len(t.ids) {
		return t.ids[i]
	}
	return nil
}

// Plugins is the store's plugin table: every plugin its events' provenance
// names, in the order first stored.
func (s *Store) Plugins() []schemas.PluginID {
	t := s.plugins
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]schemas.PluginID, len(t.ids))
	for i, id := range t.ids {
		out[i] = *id
	}
	return out
}

// builtBound is the most bytes appendBuilt writes for row i of eb.
func builtBound(eb *schemas.EventBatch, i int, bu *buildUnit) int {
	n := 1 + 5*(2+len(eb.DuplicateSources(i))+len(eb.LateSources(i)))
	if bu != nil && bu.name != "" {
		n += 10 + len(bu.name) + 10 + 10
	}
	return n
}

// appendBuilt encodes the build section (layout in doc.go): the
// duplicated and late sources, and the builder unit with the assignment.
func appendBuilt(dst []byte, dup, late []uint32, bu *buildUnit, asg uint64) []byte {
	var flags byte
	if len(dup) > 0 {
		flags |= builtDuplicated
	}
	if len(late) > 0 {
		flags |= builtLate
	}
	if bu != nil && bu.name != "" {
		flags |= builtBU
	}
	dst = append(dst, flags)
	for _, ids := range [][]uint32{dup, late} {
		if len(ids) == 0 {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(ids)))
		for _, id := range ids {
			dst = binary.AppendUvarint(dst, uint64(id))
		}
	}
	if flags&builtBU != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(bu.name)))
		dst = append(dst, bu.name...)
		dst = binary.AppendUvarint(dst, bu.incarnation)
		dst = binary.AppendUvarint(dst, asg)
	}
	return dst
}

// provBound is the most bytes appendPass writes for v's steps.
func provBound(v *schemas.Verdict) int {
	n := 1 + 10 + 1 // flags, at, n_steps
	step := func(reason string) { n += 5 + 1 + 10 + 10 + 5 + len(reason) }
	for i := range v.Trail {
		step(v.Trail[i].Reason)
	}
	step(v.Reason.Text)
	return n
}

// Pass flags (doc.go).
const passReplay = 1 << 0

// appendPass encodes one pass of v's steps (layout in doc.go); the
// caller holds t.mu.
func (t *pluginTable) appendPass(dst []byte, replay bool, at uint64, v *schemas.Verdict, unstored *[]uint32) []byte {
	var flags byte
	if replay {
		flags |= passReplay
	}
	own := v.Stage != "" || v.Plugin != nil
	n := len(v.Trail)
	if own {
		n++
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, at)
	dst = append(dst, byte(min(n, 255)))
	step := func(st schemas.Step) {
		var ref uint64 // 0: no plugin; else the table's index + 1
		if st.Plugin != nil {
			ref = uint64(t.index(st.Plugin, unstored)) + 1
		}
		dst = binary.AppendUvarint(dst, ref)
		dst = append(dst, byte(st.Decision))
		dst = binary.AppendUvarint(dst, st.Fired)
		dst = binary.AppendUvarint(dst, st.Lines)
		dst = binary.AppendUvarint(dst, uint64(len(st.Reason)))
		dst = append(dst, st.Reason...)
	}
	for i := range v.Trail[:min(len(v.Trail), 255)] {
		step(v.Trail[i])
	}
	if own && n <= 255 {
		step(v.Step())
	}
	return dst
}

// newProvenance encodes a record of one pass; built is its build section
// (appendBuilt; nil: an empty one).
func (t *pluginTable) newProvenance(dst, built []byte, replay bool, at uint64, v *schemas.Verdict, unstored *[]uint32) []byte {
	dst = append(dst, ProvenanceVersion)
	if len(built) == 0 {
		dst = append(dst, 0)
	} else {
		dst = append(dst, built...)
	}
	dst = append(dst, 1)
	return t.appendPass(dst, replay, at, v, unstored)
}

// addPass encodes old (a record, or nil for none) with one more pass, as
// version 2 (a version-1 record gets an empty build section). A record
// that does not decode, or one with 255 passes already, is started afresh
// (its build section kept when readable): the newest passes are the ones
// to keep.
func (t *pluginTable) addPass(dst, old []byte, replay bool, at uint64, v *schemas.Verdict, unstored *[]uint32) []byte {
	built, passes, err := splitProvenance(old)
	if err != nil || passes[0] == 255 {
		return t.newProvenance(dst, built, replay, at, v, unstored)
	}
	dst = append(dst, ProvenanceVersion)
	if len(built) == 0 {
		dst = append(dst, 0)
	} else {
		dst = append(dst, built...)
	}
	n := len(dst)
	dst = append(dst, passes...)
	dst[n]++
	return t.appendPass(dst, replay, at, v, unstored)
}

// splitProvenance splits a record into its build section (nil for
// version 1) and the rest, from n_passes on (at least one byte). Errors
// are *schemas.DecodeError.
func splitProvenance(v []byte) (built, passes []byte, err error) {
	const format = "provenance record"
	if len(v) < 1 {
		return nil, nil, schemas.Errorf(format, "header", 0, schemas.ErrTruncated, "empty record")
	}
	switch v[0] {
	case 1:
		if len(v) < 2 {
			return nil, nil, schemas.Errorf(format, "n_passes", 1, schemas.ErrTruncated, "record ends")
		}
		return nil, v[1:], nil
	case 2:
		var b schemas.Built
		off, err := decodeBuilt(v, 1, &b)
		if err != nil {
			return nil, nil, err
		}
		if off >= len(v) {
			return v[1:off], nil, schemas.Errorf(format, "n_passes", int64(off), schemas.ErrTruncated, "record ends")
		}
		return v[1:off], v[off:], nil
	}
	return nil, nil, schemas.Errorf(format, "version", 0, schemas.ErrBadVersion, "version %d, this build reads versions 1 and %d", v[0], ProvenanceVersion)
}

// decodeBuilt parses the build section at v[off:] into b and returns the
// offset after it.
func decodeBuilt(v []byte, off int, b *schemas.Built) (int, error) {
	const format = "provenance record"
	uvarint := func(field string) (uint64, error) {
		x, n := binary.Uvarint(v[off:])
		if n <= 0 {
			return 0, schemas.Errorf(format, field, int64(off), schemas.ErrTruncated, "bad or cut varint")
		}
		off += n
		return x, nil
	}
	if off >= len(v) {
		return off, schemas.Errorf(format, "built.flags", int64(off), schemas.ErrTruncated, "record ends")
	}
	flags := v[off]
	if flags&^(builtDuplicated|builtLate|builtBU) != 0 {
		return off, schemas.Errorf(format, "built.flags", int64(off), schemas.ErrBadHeader, "unknown flags %#x", flags)
	}
	off++
	ids := func(field string) ([]uint32, error) {
		n, err := uvarint(field)
		if err != nil {
			return nil, err
		}
		if n == 0 || n > uint64(len(v)-off) { // each id takes a byte at least
			return nil, schemas.Errorf(format, field, int64(off), schemas.ErrInconsistent, "%d source ids, %d bytes left", n, len(v)-off)
		}
		out := make([]uint32, n)
		for i := range out {
			x, err := uvarint(field)
			if err != nil {
				return nil, err
			}
			if x > 1<<32-1 {
				return nil, schemas.Errorf(format, field, int64(off), schemas.ErrInconsistent, "source id %d over 32 bits", x)
			}
			out[i] = uint32(x)
		}
		return out, nil
	}
	var err error
	if flags&builtDuplicated != 0 {
		if b.Duplicated, err = ids("built.duplicated"); err != nil {
			return off, err
		}
	}
	if flags&builtLate != 0 {
		if b.Late, err = ids("built.late"); err != nil {
			return off, err
		}
	}
	if flags&builtBU != 0 {
		n, err := uvarint("built.bu_len")
		if err != nil {
			return off, err
		}
		if n == 0 {
			return off, schemas.Errorf(format, "built.bu", int64(off), schemas.ErrInconsistent, "flagged but empty")
		}
		if n > uint64(len(v)-off) {
			return off, schemas.Errorf(format, "built.bu", int64(off), schemas.ErrTruncated, "needs %d bytes, %d left", n, len(v)-off)
		}
		b.BU = string(v[off : off+int(n)])
		off += int(n)
		if b.Incarnation, err = uvarint("built.incarnation"); err != nil {
			return off, err
		}
		if b.Assignment, err = uvarint("built.assignment"); err != nil {
			return off, err
		}
	}
	return off, nil
}

// decodeProvenance parses a record; steps name entries of t (a step
// naming an entry t does not have is an error). Errors are
// *schemas.DecodeError with the byte offset in v.
func (t *pluginTable) decodeProvenance(v []byte) (schemas.Provenance, error) {
	const format = "provenance record"
	var p schemas.Provenance
	if len(v) < 2 {
		return p, schemas.Errorf(format, "header", 0, schemas.ErrTruncated, "%d bytes, header needs 2", len(v))
	}
	off := 1
	switch v[0] {
	case 1:
	case 2:
		var err error
		if off, err = decodeBuilt(v, 1, &p.Built); err != nil {
			return p, err
		}
		if off >= len(v) {
			return p, schemas.Errorf(format, "n_passes", int64(off), schemas.ErrTruncated, "record ends")
		}
	default:
		return p, schemas.Errorf(format, "version", 0, schemas.ErrBadVersion, "version %d, this build reads versions 1 and %d", v[0], ProvenanceVersion)
	}
	nPasses := int(v[off])
	off++
	uvarint := func(field string) (uint64, error) {
		x, n := binary.Uvarint(v[off:])
		if n <= 0 {
			return 0, schemas.Errorf(format, field, int64(off), schemas.ErrTruncated, "bad or cut varint")
		}
		off += n
		return x, nil
	}
	byteAt := func(field string) (byte, error) {
		if off >= len(v) {
			return 0, schemas.Errorf(format, field, int64(off), schemas.ErrTruncated, "record ends")
		}
		off++
		return v[off-1], nil
	}
	p.Passes = make([]schemas.Pass, 0, nPasses)
	for range nPasses {
		var ps schemas.Pass
		flags, err := byteAt("flags")
		if err != nil {
			return p, err
		}
		ps.Replay = flags&passReplay != 0
		if ps.At, err = uvarint("at"); err != nil {
			return p, err
		}
		n, err := byteAt("n_steps")
		if err != nil {
			return p, err
		}
		ps.Steps = make([]schemas.Step, n)
		for j := range ps.Steps {
			st := &ps.Steps[j]
			ref, err := uvarint("plugin")
			if err != nil {
				return p, err
			}
			if ref > 0 {
				if ref > 1<<32 {
					st.Plugin = nil
				} else {
					st.Plugin = t.lookup(uint32(ref - 1))
				}
				if st.Plugin == nil {
					return p, schemas.Errorf(format, "plugin", int64(off), schemas.ErrInconsistent, "plugin table entry %d, which the store does not have", ref-1)
				}
			}
			d, err := byteAt("decision")
			if err != nil {
				return p, err
			}
			if st.Decision = schemas.Decision(d); st.Decision > schemas.DecisionDefer {
				return p, schemas.Errorf(format, "decision", int64(off-1), schemas.ErrBadHeader, "decision %d is not none/accept/reject/defer", d)
			}
			if st.Fired, err = uvarint("fired"); err != nil {
				return p, err
			}
			if st.Lines, err = uvarint("lines"); err != nil {
				return p, err
			}
			rl, err := uvarint("reason_len")
			if err != nil {
				return p, err
			}
			if rl > uint64(len(v)-off) {
				return p, schemas.Errorf(format, "reason", int64(off), schemas.ErrTruncated, "needs %d bytes, %d left", rl, len(v)-off)
			}
			st.Reason = string(v[off : off+int(rl)])
			off += int(rl)
		}
		p.Passes = append(p.Passes, ps)
	}
	if off != len(v) {
		return p, schemas.Errorf(format, "end", int64(off), schemas.ErrInconsistent, "%d bytes after the last pass", len(v)-off)
	}
	return p, nil
}

// provenanceOf reads k's record in txn; ok is false when there is none
// (an event stored by a sluice before provenance).
func (s *Store) provenanceOf(txn *badger.Txn, k Key) (p schemas.Provenance, ok bool, err error) {
	item, err := txn.Get(appendProvKey(nil, k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	err = item.Value(func(v []byte) (err error) {
		p, err = s.plugins.decodeProvenance(v)
		return err
	})
	return p, err == nil, err
}
