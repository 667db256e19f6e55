package fill

import (
	"testing"
	"time"
)

// FuzzParseSchedule: any bytes give a schedule or an error wrapping
// ErrSchedule, never a panic; a schedule's state at each of its changes is
// that change's mode, and its period and next fill lie the right way
// round.
func FuzzParseSchedule(f *testing.F) {
	f.Add([]byte(fillsDoc))
	f.Add([]byte("format: 1\nfills: []\n"))
	f.Add([]byte("format: 1\nmodes:\n  - {at: 2026-12-01T07:10:00Z, mode: INJECTION PHYSICS BEAM, fill: 9001}\n  - {at: 2026-12-01T08:00:00Z, mode: STABLE BEAMS}\n  - {at: 2026-12-01T20:00:00Z, mode: BEAM DUMP}\n"))
	f.Add([]byte("format: 1\nfills: [{start: 2026-12-01T08:00:00Z, end: 2026-12-01T07:00:00Z}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSchedule(b)
		if err != nil {
			return
		}
		for i, c := range s.changes {
			if i > 0 && c.at.Before(s.changes[i-1].at) {
				t.Fatalf("changes out of order: %v", s.changes)
			}
			for _, now := range []time.Time{c.at, c.at.Add(-time.Nanosecond), c.at.Add(time.Nanosecond)} {
				st := s.at(now)
				if now.Equal(c.at) && (i+1 == len(s.changes) || s.changes[i+1].at.After(c.at)) && st.Mode != c.mode {
					t.Fatalf("at change %d (%s %s): mode %s", i, c.at, c.mode, st.Mode)
				}
				if !st.Since.IsZero() && st.Since.After(now) || !st.Until.IsZero() && !st.Until.After(now) ||
					st.Mode.Beam() && !st.NextFill.IsZero() && st.NextFill.Before(st.Until) || !st.Mode.Beam() && st.NextFill != st.Until {
					t.Fatalf("at %s: %+v", now, st)
				}
			}
		}
	})
}

// FuzzParseDocument: what an HTTP endpoint or an etcd key holds gives a
// known state or an error wrapping ErrSource, never a panic.
func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"mode": "STABLE BEAMS", "fill": 9001, "since": "2026-12-01T08:00:00Z", "until": "2026-12-01T20:00:00Z", "next_fill": "2026-12-01T22:00:00Z"}`))
	f.Add([]byte(`{"mode": "no beam"}`))
	f.Add([]byte(`{"mode": 5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseDocument(b)
		if err == nil && !st.Known() {
			t.Fatalf("%q parsed to an unknown state", b)
		}
	})
}
