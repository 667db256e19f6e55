package schemas

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestSourceList(t *testing.T) {
	ids, err := ParseSourceList(" 5, 0-3 ,3,1024")
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{0, 1, 2, 3, 5, 1024}
	if len(ids) != len(want) {
		t.Fatalf("got %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("got %v, want %v", ids, want)
		}
	}
	if s := FormatSourceList(ids); s != "0-3,5,1024" {
		t.Fatalf("FormatSourceList = %q", s)
	}
	for _, bad := range []string{"x", "5-3", "1-", "0-99999999", "-1"} {
		if _, err := ParseSourceList(bad); err == nil {
			t.Errorf("ParseSourceList(%q) accepted", bad)
		}
	}
}

// TestEventBatchView builds a two-event batch by hand with the event schema
// and reads it back through the typed view.
func TestEventBatchView(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	groups := []SourceGroup{{Name: "ecal", Sources: []uint32{10, 11}}, {Name: "muon", Sources: []uint32{20}}}
	s, err := EventSchema(ModeEvent, groups)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EventSchema(ModeEvent, []SourceGroup{{Name: "a"}, {Name: "a"}}); err == nil {
		t.Fatal("duplicate group names accepted")
	}
	unsorted := []SourceGroup{{Name: "a", Sources: []uint32{3, 1, 3}}}
	if _, err := EventSchema(ModeEvent, unsorted); err == nil {
		t.Fatal("unsorted sources accepted")
	}
	if g := SortGroups(unsorted); len(g[0].Sources) != 2 || g[0].Sources[0] != 1 || unsorted[0].Sources[0] != 3 {
		t.Fatalf("SortGroups = %v (input %v)", g, unsorted)
	}
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	// Event 100: complete. Event 101: source 11 missing, source 20 corrupt.
	rb.Field(0).(*array.Uint64Builder).AppendValues([]uint64{100, 101}, nil)
	rb.Field(1).(*array.Uint32Builder).AppendValues([]uint32{7, 7}, nil)
	rb.Field(2).(*array.Uint64Builder).AppendValues([]uint64{1, 2}, nil)
	rb.Field(3).(*array.Uint32Builder).AppendValues([]uint32{0, uint32(StatusIncomplete | StatusCorrupt)}, nil)
	rb.Field(4).(*array.Uint32Builder).AppendValues([]uint32{3, 2}, nil)
	appendList := func(col int, vals ...uint32) {
		lb := rb.Field(col).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Uint32Builder).AppendValues(vals, nil)
	}
	appendList(5)
	appendList(5, 11)
	appendList(6)
	appendList(6, 20)
	rb.Field(7).(*array.BinaryBuilder).Append([]byte("aaabb"))
	rb.Field(7).(*array.BinaryBuilder).Append([]byte("ccc"))
	appendList(8, 3, 2)
	appendList(8, 3, 0)
	rb.Field(9).(*array.BinaryBuilder).Append([]byte("m"))
	rb.Field(9).(*array.BinaryBuilder).Append([]byte("nn"))
	appendList(10, 1)
	appendList(10, 2)
	rec := rb.NewRecordBatch()
	defer rec.Release()

	eb, err := NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if eb.Len() != 2 || eb.EventID(1) != 101 || eb.Run(0) != 7 || eb.Status(1) != StatusIncomplete|StatusCorrupt || eb.NumFragments(0) != 3 {
		t.Fatal("metadata columns read back wrong")
	}
	if m := eb.MissingSources(1); len(m) != 1 || m[0] != 11 || len(eb.MissingSources(0)) != 0 {
		t.Fatalf("missing sources %v", m)
	}
	if c := eb.CorruptSources(1); len(c) != 1 || c[0] != 20 {
		t.Fatalf("corrupt sources %v", c)
	}
	if p, ok := eb.Payload(11, 0); !ok || !bytes.Equal(p, []byte("bb")) {
		t.Fatalf("payload of source 11 in event 0 = %q", p)
	}
	if p, ok := eb.Payload(11, 1); !ok || len(p) != 0 {
		t.Fatalf("missing source 11 in event 1 has payload %q", p)
	}
	if _, ok := eb.Payload(99, 0); ok {
		t.Fatal("unknown source reported present")
	}
	var got []string
	eb.Fragments(eb.GroupIndex("ecal"), 0, func(src uint32, p []byte) bool {
		got = append(got, string(p))
		return true
	})
	if len(got) != 2 || got[0] != "aaa" || got[1] != "bb" {
		t.Fatalf("ecal fragments of event 0: %q", got)
	}
	// Row 1: source 11 is missing, so only 10 and 20 are present, in order.
	frags, order := eb.PresentFragments(1)
	if len(order) != 2 || order[0] != 10 || order[1] != 20 || string(frags[10]) != "ccc" || string(frags[20]) != "nn" {
		t.Fatalf("PresentFragments(1) = %v, %v", frags, order)
	}
	var visited []uint32
	eb.EachFragment(0, func(src uint32, _ []byte) bool {
		visited = append(visited, src)
		return src != 11 // stop after the second source
	})
	if len(visited) != 2 || visited[1] != 11 {
		t.Fatalf("EachFragment visited %v, want [10 11] then stop", visited)
	}
	g, err := GroupsOf(s)
	if err != nil || len(g) != 2 || g[1].Name != "muon" || g[0].Sources[1] != 11 {
		t.Fatalf("GroupsOf = %+v, %v", g, err)
	}
}

func TestEventStatusNames(t *testing.T) {
	if s := (StatusIncomplete | StatusReplayed).String(); s != "incomplete|replayed" {
		t.Fatalf("String = %q", s)
	}
	if s := EventStatus(0).String(); s != "ok" {
		t.Fatalf("no bit: %q", s)
	}
	if n := (StatusCorrupt | 1<<20).Names(); len(n) != 2 || n[0] != "corrupt" || n[1] != "0x100000" {
		t.Fatalf("Names with an unknown bit = %v", n)
	}
}

func TestJoinOrder(t *testing.T) {
	list := []byte{5, 0, 0, 0, 9, 0, 0, 0, 7, 0, 0, 0} // 5, 9, 7
	present := map[uint32][]byte{5: {1}, 7: {1}, 3: {1}, 100: {1}}
	got := JoinOrder(list, present, []uint32{3, 5, 7, 100}, 100)
	want := []uint32{5, 7, 3} // listed and present (9 is missing), then unlisted; not the header 100
	if len(got) != len(want) {
		t.Fatalf("JoinOrder = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("JoinOrder = %v, want %v", got, want)
		}
	}
}
