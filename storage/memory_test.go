package storage

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The store's share is spent as planMemory documents, and the sizes badger
// gets stay within it.
func TestPlanMemory(t *testing.T) {
	for _, m := range []int64{MinMemoryBytes, 64 << 20, 77 << 20, 1 << 30} {
		o := Options{MemoryBytes: m}
		p := planMemory(&o)
		if p.Bytes() > m {
			t.Errorf("share %d: plan %+v takes %d", m, p, p.Bytes())
		}
		if p.NumMemtables < 1 || p.MemTableSize < 2<<20 || p.ValueLogFileSz < 4<<20 || p.ValueLogFileSz > p.Mapped && p.Mapped >= 8<<20 {
			t.Errorf("share %d: plan %+v", m, p)
		}
	}
}

// Writing ten times the store's mapped bound to segment files maps none of
// it: the store's mapped resident pages stay below the bound without a
// trim, and reading it all back maps none either.
func TestSegmentsNotMapped(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.MemoryBytes = MinMemoryBytes // mapped bound 8 MiB
		o.MemTableSize, o.ValueLogFileSize = 0, 0
	})
	bound := s.plan.Mapped
	evs := genEvents(1, 0, 800, 1, 100<<10) // ~80 MiB
	for i := 0; i < len(evs); i += 40 {
		put(t, s, Deferred, evs[i:i+40])
	}
	rss := func() int64 {
		s.trim.mu.Lock() // mappings shares the trimmer's buffer with its ticks
		defer s.trim.mu.Unlock()
		maps, err := s.trim.mappings()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, m := range maps {
			n += m.rss
		}
		return n
	}
	if n := rss(); n > bound/2 {
		t.Errorf("after writing 80 MiB, %d bytes of the store's mappings are resident, want <= %d", n, bound/2)
	}
	keys, _ := readAll(t, s, Deferred, CursorOptions{})
	if len(keys) != len(evs) {
		t.Fatalf("read back %d events of %d", len(keys), len(evs))
	}
	if n := rss(); n > bound/2 {
		t.Errorf("after reading 80 MiB back, %d bytes of the store's mappings are resident, want <= %d", n, bound/2)
	}
}

// Writing ten times the store's mapped bound as a version-1 store held it
// (values in badger's mapped value log): the resident pages of its mapped
// files are measured and trimmed, staying near the bound, while every
// event reads back.
func TestMappedPagesTrimmed(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.MemoryBytes = MinMemoryBytes // mapped bound 8 MiB
		o.MemTableSize, o.ValueLogFileSize = 0, 0
	})
	bound := s.plan.Mapped
	evs := genEvents(1, 0, 800, 1, 100<<10) // ~80 MiB
	for i := 0; i < len(evs); i += 40 {
		putInline(t, s, Deferred, evs[i:i+40])
		s.trim.touched(40 * 100 << 10) // as Put did, writing through the mapping
	}
	if s.Memory().Trims == 0 {
		t.Fatalf("no trim after %d MiB written with a bound of %d MiB", 80, bound>>20)
	}
	s.trim.mu.Lock() // mappings shares the trimmer's buffer with its ticks
	maps, err := s.trim.mappings()
	s.trim.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) == 0 {
		t.Fatal("no mapping of the store's files found in /proc/self/maps")
	}
	var rss int64
	for _, m := range maps {
		rss += m.rss
	}
	if rss > bound/2 {
		t.Errorf("after a trim %d bytes of the store's mappings are resident, want <= %d", rss, bound/2)
	}
	if peak := s.Memory().MappedPeakBytes; peak > bound+bound/2 || peak == 0 {
		t.Errorf("peak resident mapped bytes %d, bound %d", peak, bound)
	}
	// Counting reads no value.
	for sel, want := range map[Selection]uint64{{}: 800, {MinEvent: 100, MaxEvent: 199}: 100, {MinRun: 2}: 0} {
		if n, err := s.Count(Deferred, sel); err != nil || n != want {
			t.Errorf("Count(%+v) = %d, %v; want %d", sel, n, err, want)
		}
	}
	// Reading everything back trims too.
	trims := s.Memory().Trims
	keys, _ := readAll(t, s, Deferred, CursorOptions{})
	if len(keys) != len(evs) {
		t.Fatalf("read back %d events of %d", len(keys), len(evs))
	}
	if s.Memory().Trims == trims {
		t.Error("reading 80 MiB back through the value log's mapping trimmed nothing")
	}
}

// The trimmer's measure (maps and pagemap) agrees with the kernel's own
// account of the same mappings in /proc/self/smaps.
func TestMappingsMatchSmaps(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.MemoryBytes = 64 << 20 // a mapped bound of 32 MiB: nothing trimmed below
		o.MemTableSize, o.ValueLogFileSize = 0, 0
	})
	putInline(t, s, Deferred, genEvents(1, 0, 100, 1, 100<<10)) // ~10 MiB through the value log
	// Under the trimmer's lock, as trim measures: the store's own trims
	// (its background tick, Put) neither share the read buffer nor page
	// out between the two readings.
	var maps []mapping
	var want map[uintptr]int64
	err := func() error {
		s.trim.mu.Lock()
		defer s.trim.mu.Unlock()
		m, err := s.trim.mappings()
		maps, want = m, smapsRSS(t, s.trim.dir)
		return err
	}()
	if err != nil {
		t.Fatal(err)
	}
	var got, resident int64
	for _, m := range maps {
		w, ok := want[m.start]
		if !ok {
			t.Errorf("mapping %#x-%#x not in smaps", m.start, m.end)
			continue
		}
		got += m.rss
		resident += w
	}
	if len(maps) != len(want) {
		t.Errorf("%d mappings of the store's files, smaps lists %d", len(maps), len(want))
	}
	if resident < 8<<20 {
		t.Fatalf("smaps: %d bytes of the store's mappings resident after writing 10 MiB through them", resident)
	}
	// Both read while nothing writes; allow a page or two of badger's own
	// background work in between.
	if d := got - resident; d < -64<<10 || d > 64<<10 {
		t.Errorf("resident bytes of the store's mappings: %d by pagemap, %d by smaps", got, resident)
	}
}

// smapsRSS is the Rss of every mapping of a file under dir, by start
// address, as /proc/self/smaps reports it.
func smapsRSS(t *testing.T, dir string) map[uintptr]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	out := map[uintptr]int64{}
	var cur uintptr
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if lo, _, ok := strings.Cut(fs[0], "-"); ok && !strings.HasSuffix(fs[0], ":") {
			in = len(fs) >= 6 && strings.HasPrefix(fs[5], dir)
			if in {
				v, _ := strconv.ParseUint(lo, 16, 64)
				cur = uintptr(v)
				out[cur] = 0
			}
			continue
		}
		if in && fs[0] == "Rss:" && len(fs) >= 2 {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			out[cur] = kb << 10
		}
	}
	return out
}
