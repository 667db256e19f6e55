package storage

import (
	"errors"
	"io"
	"slices"
	"testing"
)

// TestVoid moves the events of some id ranges out of both streams into
// tombstones: the accepted stream and replay's cursor no longer see them,
// the void stream lists them with their values unchanged, a second call
// voids nothing, and they survive a reopen.
func TestVoid(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, func(o *Options) { o.Dir = dir })
	var acc, def []testEvent
	for id := uint64(10); id < 30; id++ {
		e := genEvent(5, id, 100)
		if id%2 == 0 {
			acc = append(acc, e)
		} else {
			def = append(def, e)
		}
	}
	acc = append(acc, genEvent(6, 12, 100)) // another run, same id: not voided
	put(t, s, Accepted, acc)
	put(t, s, Deferred, def)
	ranges := []IDRange{{Run: 5, First: 12, N: 4}, {Run: 5, First: 25, N: 100}, {Run: 5, First: 1000, N: 0}}
	v, err := s.Void(ranges)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(run uint32, ids ...uint64) []Key {
		var out []Key
		for _, id := range ids {
			out = append(out, Key{Run: run, EventID: id})
		}
		return out
	}
	if want := keys(5, 12, 14, 26, 28); !slices.Equal(v.Accepted, want) {
		t.Fatalf("voided accepted %v, want %v", v.Accepted, want)
	}
	if want := keys(5, 13, 15, 25, 27, 29); !slices.Equal(v.Deferred, want) {
		t.Fatalf("voided deferred %v, want %v", v.Deferred, want)
	}
	again, err := s.Void(ranges)
	if err != nil || again.Len() != 0 {
		t.Fatalf("second void: %+v, %v", again, err)
	}
	check := func(s *Store) {
		t.Helper()
		list := func(st Stream) []Key {
			var out []Key
			if err := s.List(st, Selection{}, 0, func(e EventInfo) bool { out = append(out, e.Key); return true }); err != nil {
				t.Fatal(err)
			}
			return out
		}
		if got, want := list(Accepted), keys(5, 10, 16, 18, 20, 22, 24); !slices.Equal(got, append(want, Key{6, 12})) {
			t.Fatalf("accepted after void: %v", got)
		}
		if got, want := list(Void), keys(5, 12, 13, 14, 15, 25, 26, 27, 28, 29); !slices.Equal(got, want) {
			t.Fatalf("void stream: %v, want %v", got, want)
		}
		c, err := s.NewCursor(Deferred, CursorOptions{BatchSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ids []uint64
		for {
			b, err := c.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < b.Events.Len(); i++ {
				ids = append(ids, b.Events.EventID(i))
			}
			b.Release()
		}
		if want := []uint64{11, 17, 19, 21, 23}; !slices.Equal(ids, want) {
			t.Fatalf("replay sees %v, want %v", ids, want)
		}
		// A tombstone keeps its value: decodable, with its decision.
		c2, err := s.NewCursor(Void, CursorOptions{BatchSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		b, err := c2.Next()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		for i := 0; i < b.Events.Len(); i++ {
			id := b.Events.EventID(i)
			var want testEvent
			for _, e := range append(slices.Clone(acc), def...) {
				if e.run == 5 && e.id == id {
					want = e
				}
			}
			if err := checkRow(b.Events, b.Verdicts[i], i, want, want.status); err != nil {
				t.Error(err)
			}
		}
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if n := len(st.Streams); n != 3 || st.Streams[2].Stream != Void || st.Streams[2].Events != 9 {
			t.Fatalf("stats streams %+v", st.Streams)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, func(o *Options) { o.Dir = dir })
	check(s2)
}
