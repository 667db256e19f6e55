package schemas

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSourceRanges: ranges come ascending, overlapping and adjacent ones
// joined, and name exactly the ids ParseSourceList lists, on random lists.
func TestSourceRanges(t *testing.T) {
	rs, err := ParseSourceRanges(" 5, 0-3 ,3,4,1024, 7-9, 8-12, 4294967295")
	if err != nil {
		t.Fatal(err)
	}
	want := []SourceRange{{0, 5}, {7, 12}, {1024, 1024}, {4294967295, 4294967295}}
	if !slices.Equal(rs, want) {
		t.Fatalf("got %v, want %v", rs, want)
	}
	if n := CountSources(rs); n != 6+6+1+1 {
		t.Fatalf("CountSources = %d, want 14", n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var items []string
		set := map[uint32]bool{}
		for range rng.IntN(8) {
			a := rng.Uint32N(300)
			if rng.IntN(2) == 0 {
				items = append(items, fmt.Sprint(a))
				set[a] = true
				continue
			}
			b := a + rng.Uint32N(40)
			items = append(items, fmt.Sprintf("%d-%d", a, b))
			for v := a; v <= b; v++ {
				set[v] = true
			}
		}
		list := strings.Join(items, ",")
		rs, err := ParseSourceRanges(list)
		if err != nil {
			t.Fatalf("%q: %v", list, err)
		}
		var got []uint32
		for i, r := range rs {
			if i > 0 && uint64(r.Lo) <= uint64(rs[i-1].Hi)+1 {
				t.Fatalf("%q: ranges %v and %v not joined", list, rs[i-1], r)
			}
			for v := r.Lo; v <= r.Hi; v++ {
				got = append(got, v)
			}
		}
		ids, _ := ParseSourceList(list)
		if !slices.Equal(got, ids) || len(ids) != len(set) || CountSources(rs) != uint64(len(set)) {
			t.Fatalf("%q: ranges %v give %v, ParseSourceList %v, %d distinct ids", list, rs, got, ids, len(set))
		}
	}
	for _, bad := range []string{"x", "5-3", "1-", "0-99999999", "-1", "0-1048576"} {
		if _, err := ParseSourceRanges(bad); err == nil {
			t.Errorf("ParseSourceRanges(%q) accepted", bad)
		}
	}
}

// TestSourceRangesDoNotList: 16 ranges of 2^20 sources (16 Mi ids, 64 MiB
// as a list) parse into 16 ranges with a few hundred bytes allocated.
func TestSourceRangesDoNotList(t *testing.T) {
	var items []string
	for g := range 16 {
		items = append(items, fmt.Sprintf("%d-%d", g<<20, g<<20+1<<20-1))
	}
	list := strings.Join(items, ",")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rs, err := ParseSourceRanges(list)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n := CountSources(rs); n != 16<<20 || len(rs) != 1 {
		t.Fatalf("got %d ranges of %d sources, want 1 of %d", len(rs), n, 16<<20)
	}
	if b := after.TotalAlloc - before.TotalAlloc; b > 64<<10 {
		t.Fatalf("parsing allocated %d bytes, want < 64KiB (the ids are not listed)", b)
	}
}
