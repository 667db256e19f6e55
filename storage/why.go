package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// Why is what the store knows of why one event is where it is: its
// stream, its sources, its status and every trigger pass over it. It is
// what `sluice store why` prints, and its JSON form is the `--json`
// output and the Flight "why" action's result.
type Why struct {
	Run       uint32   `json:"run"`
	EventID   uint64   `json:"event_id"`
	Stream    string   `json:"stream"` // accepted, deferred or void (a tombstone)
	Timestamp uint64   `json:"timestamp_ns"`
	Status    []string `json:"status"` // schemas.EventStatus names; empty: ok
	Fragments uint32   `json:"fragments"`
	Bytes     int      `json:"bytes"` // encoded value bytes
	// Decision, Stage, Reason and Lines (names) are the stored verdict:
	// what the last pass decided.
	Decision string     `json:"decision"`
	Stage    string     `json:"stage"`
	Reason   string     `json:"reason"`
	Lines    []string   `json:"lines"`
	Sources  WhySources `json:"sources"`
	// Built names the farm builder unit that built the event and the
	// assignment it built it for; empty outside a farm.
	Built WhyBuilt `json:"built"`
	// Passes are the trigger passes, oldest first: the online pass, then
	// one per replay that decided it. Empty for an event stored before
	// sluice kept provenance.
	Passes []WhyPass `json:"passes"`
}

// WhySources says which sources the event has.
type WhySources struct {
	Expected    int      `json:"expected"`    // sources of the store's schema
	Contributed int      `json:"contributed"` // sources whose fragment is in the event
	Missing     []uint32 `json:"missing"`     // sent nothing before the event's timeout
	Corrupt     []uint32 `json:"corrupt"`     // fragment kept, CRC failed
	// Duplicated sent more than one fragment (the builder kept the first,
	// discarded the rest).
	Duplicated []uint32 `json:"duplicated"`
	// Late sent their fragment after the event was emitted at its
	// timeout (so they are among Missing), while it still waited in the
	// builder for its batch; fragments later than that are only counted
	// in the builder's ledger (discarded "late").
	Late []uint32 `json:"late"`
	// Duplicates: the status bit, duplicate fragments arrived and were
	// discarded (Duplicated names the sources when the store has them).
	Duplicates bool `json:"duplicates"`
	// SourceError: a source flagged an error or a truncation.
	SourceError bool `json:"source_error"`
}

// WhyBuilt is the farm builder unit that built an event.
type WhyBuilt struct {
	BU          string `json:"bu"`          // node name; "": not built in a farm
	Incarnation string `json:"incarnation"` // its membership lease id, hex; "" outside a farm
	Assignment  uint64 `json:"assignment"`  // the event manager's assignment id; 0: none
}

// WhyPass is one trigger pass.
type WhyPass struct {
	Pass   int       `json:"pass"` // 0: online; 1, 2, ...: replays
	Replay bool      `json:"replay"`
	At     time.Time `json:"at"` // when its outcome was stored
	Steps  []WhyStep `json:"steps"`
}

// WhyStep is what one stage did in a pass.
type WhyStep struct {
	Stage    string `json:"stage"`
	Plugin   string `json:"plugin"`
	Version  string `json:"version"`
	SHA256   string `json:"sha256"`
	Decision string `json:"decision"`
	// Fired are the lines the plugin fired, Kept those the prescales
	// left, Prescaled those they removed.
	Fired     []string `json:"fired"`
	Kept      []string `json:"kept"`
	Prescaled []string `json:"prescaled"`
	Reason    string   `json:"reason"`
}

// Why returns what the store knows of event (run, id): found in the
// accepted, deferred or void stream, in that order. Errors: ErrNoEvent,
// ErrClosed, decoding errors naming the record.
func (s *Store) Why(run uint32, id uint64) (Why, error) {
	if s.closed.Load() {
		return Why{}, ErrClosed
	}
	names, err := s.LineNames()
	if err != nil {
		return Why{}, err
	}
	k := Key{Run: run, EventID: id}
	var w Why
	err = s.db.View(func(txn *badger.Txn) error {
		var found bool
		for _, st := range []Stream{Accepted, Deferred, Void} {
			item, err := txn.Get(appendKey(nil, st, k))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			var r record
			var buf []byte
			err = s.eventValue(item, &buf, func(v []byte) error {
				info, err := infoOf(st, k, v, &r)
				if err != nil {
					return err
				}
				w = whyOf(info, r.missing, r.corrupt, names)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s run %d event %d: %w", st, run, id, err)
			}
			found = true
			break
		}
		if !found {
			return fmt.Errorf("run %d event %d: %w", run, id, ErrNoEvent)
		}
		p, _, err := s.provenanceOf(txn, k)
		if err != nil {
			return fmt.Errorf("run %d event %d: %w", run, id, err)
		}
		w.Passes = whyPasses(p, names)
		w.Sources.Duplicated, w.Sources.Late = orEmpty(p.Built.Duplicated), orEmpty(p.Built.Late)
		w.Built = WhyBuilt{BU: p.Built.BU, Assignment: p.Built.Assignment}
		if p.Built.BU != "" {
			w.Built.Incarnation = fmt.Sprintf("%x", p.Built.Incarnation)
		}
		return nil
	})
	if err != nil {
		return Why{}, fmt.Errorf("store %s: %w", s.opts.Dir, err)
	}
	if ss := s.schema.Load(); ss != nil {
		if g, err := ss.groups(); err == nil {
			for _, gr := range g {
				w.Sources.Expected += len(gr.Sources)
			}
		}
	}
	w.Sources.Contributed = w.Sources.Expected - len(w.Sources.Missing)
	return w, nil
}

func whyOf(info EventInfo, missing, corrupt []byte, names map[string][]string) Why {
	v := info.Verdict
	w := Why{
		Run: info.Key.Run, EventID: info.Key.EventID, Stream: info.Stream.String(), Timestamp: info.Timestamp,
		Status: info.Status.Names(), Fragments: info.NumFragments, Bytes: info.Bytes,
		Decision: v.Decision.String(), Stage: v.Stage, Reason: v.Reason.Text,
		Lines: lineNames(v.Lines, names[v.Stage]),
		Sources: WhySources{
			Missing: u32s(missing), Corrupt: u32s(corrupt),
			Duplicates:  info.Status&schemas.StatusDuplicates != 0,
			SourceError: info.Status&schemas.StatusSourceError != 0,
		},
	}
	if w.Status == nil {
		w.Status = []string{}
	}
	return w
}

func whyPasses(p schemas.Provenance, names map[string][]string) []WhyPass {
	out := make([]WhyPass, 0, len(p.Passes))
	for i, ps := range p.Passes {
		wp := WhyPass{Pass: i, Replay: ps.Replay, At: time.Unix(0, int64(ps.At)).UTC(), Steps: make([]WhyStep, 0, len(ps.Steps))}
		for _, st := range ps.Steps {
			var ws WhyStep
			if st.Plugin != nil {
				ws = WhyStep{Stage: st.Plugin.Stage, Plugin: st.Plugin.Name, Version: st.Plugin.Version, SHA256: st.Plugin.Digest}
			}
			ln := names[ws.Stage]
			ws.Decision, ws.Reason = st.Decision.String(), st.Reason
			ws.Fired, ws.Kept, ws.Prescaled = lineNames(st.Fired, ln), lineNames(st.Lines, ln), lineNames(st.Fired&^st.Lines, ln)
			wp.Steps = append(wp.Steps, ws)
		}
		out = append(out, wp)
	}
	return out
}

// lineNames names the bits of lines; never nil (JSON []).
func lineNames(lines uint64, names []string) []string {
	out := []string{}
	for _, n := range schemas.FiredLines(lines, names) {
		out = append(out, n)
	}
	return out
}

// orEmpty is ids, or an empty list for nil (JSON []).
func orEmpty(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}

func u32s(le []byte) []uint32 {
	out := make([]uint32, len(le)/4)
	for i := range out {
		out[i] = uint32(le[4*i]) | uint32(le[4*i+1])<<8 | uint32(le[4*i+2])<<16 | uint32(le[4*i+3])<<24
	}
	return out
}
