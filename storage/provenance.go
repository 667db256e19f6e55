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
// writes and reads (byte 0 of each; layout in doc.go).
const ProvenanceVersion = 1

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

// newProvenance encodes a record of one pass.
func (t *pluginTable) newProvenance(dst []byte, replay bool, at uint64, v *schemas.Verdict, unstored *[]uint32) []byte {
	dst = append(dst, ProvenanceVersion, 1)
	return t.appendPass(dst, replay, at, v, unstored)
}

// addPass encodes old (a record, or nil for none) with one more pass.
// A record of another version, or one with 255 passes already, is started
// afresh: the newest passes are the ones to keep.
func (t *pluginTable) addPass(dst, old []byte, replay bool, at uint64, v *schemas.Verdict, unstored *[]uint32) []byte {
	if len(old) < 2 || old[0] != ProvenanceVersion || old[1] == 255 {
		return t.newProvenance(dst, replay, at, v, unstored)
	}
	dst = append(dst, old...)
	dst[len(dst)-len(old)+1]++
	return t.appendPass(dst, replay, at, v, unstored)
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
	if v[0] != ProvenanceVersion {
		return p, schemas.Errorf(format, "version", 0, schemas.ErrBadVersion, "version %d, this build reads version %d", v[0], ProvenanceVersion)
	}
	off := 2
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
	p.Passes = make([]schemas.Pass, 0, v[1])
	for range int(v[1]) {
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
