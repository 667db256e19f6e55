package node

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/schemas"
)

// watcher turns quiet trouble into WARN records, at most one of each kind
// per interval, naming the sources or inputs responsible: sources in no
// event since the inputs opened (once, after warnings.silent_after),
// incomplete events and late fragments above their fractions, inputs
// waiting for the builder above theirs. It reads every built batch (observe,
// from the decide stage) and the node's counters at each interval.
type watcher struct {
	cfg config.Warnings
	log *slog.Logger

	mu sync.Mutex
	// unseen are the configured sources in no event so far; silent those
	// of them reported silent.
	unseen map[uint32]bool
	silent []uint32
	// This interval: events observed, incomplete ones, and how many of
	// those each source was missing from.
	events, incomplete uint64
	missing            map[uint32]uint64
	last               []string // the warnings of the last interval
	// notInFile are configured sources an embedded emulator's file does
	// not contain (reported at start).
	notInFile []uint32
	// setAbsent declares sources absent in the builder (silent_absent)
	// and returns those it declared; absent lists them now. Nil: none.
	setAbsent func([]uint32) []uint32
	absent    func() []uint32
	// Counters at the start of the interval.
	prevReceived, prevLate uint64
	prevLateBy             map[uint32]uint64 // Ledger.FragmentsLate
	prevWait               []uint64
	prevAt                 time.Time // when they were read
}

func newWatcher(cfg config.Warnings, groups []schemas.SourceGroup, log *slog.Logger) *watcher {
	w := &watcher{cfg: cfg, log: log, unseen: map[uint32]bool{}, missing: map[uint32]uint64{}}
	for _, g := range groups {
		for _, s := range g.Sources {
			w.unseen[s] = true
		}
	}
	return w
}

// observe counts one built batch.
func (w *watcher) observe(ev *schemas.EventBatch) {
	n := ev.Len()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events += uint64(n)
	for i := range n {
		if ev.Status(i)&schemas.StatusIncomplete == 0 {
			if len(w.unseen) > 0 {
				for s := range w.unseen {
					w.seen(s)
				}
			}
			continue
		}
		w.incomplete++
		miss := ev.MissingSources(i)
		for _, s := range miss {
			w.missing[s]++
		}
		for s := range w.unseen {
			if !slices.Contains(miss, s) {
				w.seen(s)
			}
		}
	}
}

// seen: source s is in an event. Called with mu held.
func (w *watcher) seen(s uint32) {
	delete(w.unseen, s)
	if i := slices.Index(w.silent, s); i >= 0 {
		w.silent = slices.Delete(w.silent, i, i+1)
		w.log.Info("silent source sent its first fragments", "source", s)
	}
}

// checkSilent reports the sources in no event so far, once.
func (w *watcher) checkSilent() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.unseen) == 0 {
		return
	}
	w.silent = slices.Sorted(maps.Keys(w.unseen))
	msg := "sources silent: in no event built since the inputs opened"
	if w.events == 0 {
		msg = "sources silent: no event built since the inputs opened"
	}
	extra, absent := w.makeAbsentLocked(w.silent)
	if absent {
		msg += "; treated as absent: events no longer wait for them (warnings.silent_absent)"
	}
	w.log.Warn(msg, append([]any{"sources", schemas.FormatSourceList(w.silent), "count", len(w.silent), "after", w.cfg.SilentAfter.String()}, extra...)...)
}

// useBuilder gives the watcher the builder's absent sources, once it exists.
func (w *watcher) useBuilder(setAbsent func([]uint32) []uint32, absent func() []uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setAbsent, w.absent = setAbsent, absent
}

// makeAbsentLocked declares ids absent when warnings.silent_absent says so
// and returns the attributes of the caller's one warning: ok says some
// were declared (the warning then says so, instead of that events wait
// for them), attrs which ("absent": not always all of ids, as a source
// that already sent fragments is not, and a timeslice builder declares
// none). Called with mu held.
func (w *watcher) makeAbsentLocked(ids []uint32) (attrs []any, ok bool) {
	if !w.cfg.SilentAbsent || w.setAbsent == nil {
		return nil, false
	}
	got := w.setAbsent(ids)
	if len(got) == 0 {
		return nil, false
	}
	return []any{"absent", schemas.FormatSourceList(got)}, true
}

// emulatorFile is called when an embedded emulator has read its file: the
// configured sources of groups it does not contain are reported at once,
// by name (and in /status), and made absent under silent_absent; the
// file's sources that no group of all configures are reported too (their
// fragments will be discarded as unknown_source, counted in the ledger).
func (w *watcher) emulatorFile(input, file string, has []uint32, groups, all []schemas.SourceGroup) {
	in := make(map[uint32]bool, len(has))
	for _, s := range has {
		in[s] = true
	}
	configured := make(map[uint32]bool)
	for _, g := range all {
		for _, s := range g.Sources {
			configured[s] = true
		}
	}
	var unknown []uint32
	for _, s := range has {
		if !configured[s] {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		unknown = slices.Compact(unknown)
		w.log.Warn("sources in the emulator's file that no source group configures: their fragments are discarded (unknown_source)",
			"input", input, "file", file, "sources", schemas.FormatSourceList(unknown), "count", len(unknown))
	}
	var missing []uint32
	for _, g := range groups {
		for _, s := range g.Sources {
			if !in[s] {
				missing = append(missing, s)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	slices.Sort(missing)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notInFile = slices.Compact(append(w.notInFile, missing...))
	slices.Sort(w.notInFile)
	msg := "configured sources not in the emulator's file: events wait builder.timeout for them (warnings.silent_absent: true stops that)"
	extra, absent := w.makeAbsentLocked(missing)
	if absent {
		msg = "configured sources not in the emulator's file: treated as absent, events do not wait for them (warnings.silent_absent)"
	}
	w.log.Warn(msg, append([]any{"input", input, "file", file, "sources", schemas.FormatSourceList(missing), "count", len(missing)}, extra...)...)
}

// interval ends one interval at now: l is the node's ledger now, wait each
// input's wall-clock nanoseconds spent waiting for the builder so far
// (transport.Stats.SinkWaitNs), uris the inputs' names. An input's
// backpressure fraction is its wait over the time since the last interval
// as measured (a tick delayed on a busy machine makes a longer interval,
// not a fraction over 100 %).
func (w *watcher) interval(now time.Time, l *Ledger, wait []uint64, uris []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	warn := func(msg string, args ...any) {
		w.log.Warn(msg, args...)
		out = append(out, fmt.Sprintf("%s %s", msg, kvText(args)))
	}
	if f := w.cfg.IncompleteFraction; f > 0 && w.events > 0 {
		if frac := float64(w.incomplete) / float64(w.events); frac > f {
			warn("events incomplete above the threshold", "fraction", round3(frac), "threshold", f,
				"events", w.events, "incomplete", w.incomplete, "missing_most", w.missingMost(5))
		}
	}
	received, late := l.FragmentsReceived-w.prevReceived, l.FragmentsDiscarded["late"]-w.prevLate
	if f := w.cfg.LateFraction; f > 0 && received > 0 {
		if frac := float64(late) / float64(received); frac > f {
			// A late fragment's source was missing from its event when
			// it was built: the sources of the interval's late fragments,
			// by their share of them, whether those events went out
			// incomplete or not (a source's counter reset makes late
			// fragments for events built complete).
			lateBy := map[uint32]uint64{}
			for s, v := range l.FragmentsLate {
				if d := v - w.prevLateBy[s]; d > 0 {
					lateBy[s] = d
				}
			}
			warn("fragments late above the threshold (they came after their event was built, at the builder timeout)",
				"fraction", round3(frac), "threshold", f, "late", late, "received", received, "missing_most", mostOf(lateBy, late, 5))
		}
	}
	if f, span := w.cfg.BackpressureFraction, now.Sub(w.prevAt); f > 0 && span > 0 && len(wait) == len(w.prevWait) {
		var slow []string
		for i := range wait {
			if frac := float64(wait[i]-w.prevWait[i]) / float64(span); frac > f {
				slow = append(slow, fmt.Sprintf("%s (%.0f%%)", uris[i], 100*frac))
			}
		}
		if len(slow) > 0 {
			warn("inputs waiting for the builder above the threshold", "inputs", strings.Join(slow, ", "), "threshold", f)
		}
	}
	w.last = out
	w.events, w.incomplete = 0, 0
	clear(w.missing)
	w.prevReceived, w.prevLate, w.prevWait, w.prevAt = l.FragmentsReceived, l.FragmentsDiscarded["late"], slices.Clone(wait), now
	w.prevLateBy = maps.Clone(l.FragmentsLate)
}

// missingMost names the n sources missing from the most incomplete events
// of the interval, with the fraction of the events. Called with mu held.
func (w *watcher) missingMost(n int) string { return mostOf(w.missing, w.events, n) }

// mostOf names the n sources with the largest counts, each with its
// count's percentage of total, and how many more there are.
func mostOf(counts map[uint32]uint64, total uint64, n int) string {
	ids := slices.Collect(maps.Keys(counts))
	slices.SortFunc(ids, func(a, b uint32) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, n)
	for _, s := range ids[:min(n, len(ids))] {
		parts = append(parts, fmt.Sprintf("%d (%.0f%%)", s, 100*float64(counts[s])/float64(total)))
	}
	if len(ids) > n {
		parts = append(parts, fmt.Sprintf("and %d more", len(ids)-n))
	}
	return strings.Join(parts, ", ")
}

// status is the watcher's part of /status.
func (w *watcher) status() WarningStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := WarningStatus{SilentSources: schemas.FormatSourceList(w.silent), NotInEmulatorFile: schemas.FormatSourceList(w.notInFile),
		Last: slices.Clone(w.last)}
	if w.absent != nil {
		st.AbsentSources = schemas.FormatSourceList(w.absent())
	}
	return st
}

// WarningStatus is what the node warned about (GET /status "warnings").
type WarningStatus struct {
	// SilentSources were reported silent (in no event since the inputs
	// opened, after warnings.silent_after) and have still sent nothing: a
	// source list such as "12,40-47"; "" when none.
	SilentSources string `json:"silent_sources"`
	// NotInEmulatorFile are configured sources an embedded emulator's
	// file does not contain (reported at start); "" when none.
	NotInEmulatorFile string `json:"not_in_emulator_file,omitempty"`
	// AbsentSources are treated as absent now (warnings.silent_absent):
	// events do not wait for them; "" when none.
	AbsentSources string `json:"absent_sources,omitempty"`
	// Last are the warnings of the last interval.
	Last []string `json:"last"`
}

// run calls checkSilent once after silent_after and interval at each
// interval, until stop closes.
func (w *watcher) run(stop <-chan struct{}, sample func() (*Ledger, []uint64, []string)) {
	silent := time.NewTimer(w.cfg.SilentAfter)
	defer silent.Stop()
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	l, wait, _ := sample()
	w.mu.Lock()
	w.prevReceived, w.prevLate, w.prevWait, w.prevAt = l.FragmentsReceived, l.FragmentsDiscarded["late"], wait, time.Now()
	w.prevLateBy = maps.Clone(l.FragmentsLate)
	w.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-silent.C:
			w.checkSilent()
		case <-tick.C:
			l, wait, uris := sample()
			w.interval(time.Now(), l, wait, uris)
		}
	}
}

func kvText(args []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(args); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%v=%v", args[i], args[i+1])
	}
	return b.String()
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// ownGroups are groups with only the sources of list (a source list, as
// farm.sources; validated at start): a farm node's own readout sources.
func ownGroups(groups []schemas.SourceGroup, list string) []schemas.SourceGroup {
	ids, _ := schemas.ParseSourceList(list)
	own := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		own[id] = true
	}
	var out []schemas.SourceGroup
	for _, g := range groups {
		h := g
		h.Sources = nil
		for _, s := range g.Sources {
			if own[s] {
				h.Sources = append(h.Sources, s)
			}
		}
		if len(h.Sources) > 0 {
			out = append(out, h)
		}
	}
	return out
}
