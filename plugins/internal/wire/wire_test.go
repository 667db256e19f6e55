package wire

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-daq/sluice/internal/shmspace"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

func batch(t testing.TB, mem memory.Allocator, events int) arrow.RecordBatch {
	t.Helper()
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: 7, Events: events, FragmentSize: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestStreamRoundTrip encodes a batch into a fixed buffer and decodes it
// without copying; a too small buffer gives ErrNoRoom.
func TestStreamRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, 50)
	defer rec.Release()
	buf := make([]byte, StreamSize(rec))
	n, err := EncodeBatch(buf, rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	got, release, err := DecodeBatch(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(rec, got) {
		t.Fatal("decoded batch differs")
	}
	ev, err := schemas.NewEventBatch(got)
	if err != nil || ev.EventID(49) != 56 {
		t.Fatalf("event batch view: %v", err)
	}
	release()
	if _, err := EncodeBatch(buf[:n/2], rec, mem); err != ErrNoRoom {
		t.Fatalf("half-size buffer: %v", err)
	}
	for _, cut := range []int{0, 7, 100, n / 2, n - 9} {
		if _, _, err := DecodeBatch(buf[:cut]); err == nil {
			t.Errorf("stream cut at %d of %d decoded", cut, n)
		}
	}
}

// TestArena allocates until the region is full (then from the heap), frees
// in a scattered order and checks that the free spans coalesce back to one.
func TestArena(t *testing.T) {
	a, err := NewArena(t.TempDir(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var bufs [][]byte
	for i := 0; i < 70; i++ {
		b := a.Allocate(1000) // 1024 bytes of region each
		if len(b) != 1000 || uintptr(len(b)) == 0 {
			t.Fatal("short allocation")
		}
		_, in := a.Offset(b)
		if in != (i < 64) {
			t.Fatalf("allocation %d in region: %v", i, in)
		}
		b[999] = 1
		bufs = append(bufs, b)
	}
	if a.FreeBytes() != 0 {
		t.Fatalf("%d bytes free in a full arena", a.FreeBytes())
	}
	for _, i := range []int{5, 3, 4, 60, 0, 63, 1, 2} {
		a.Free(bufs[i])
	}
	b := a.Reallocate(3000, a.Allocate(10)) // at 0, then moved to 64 in the 6 KiB span
	if off, ok := a.Offset(b); !ok || off != 64 || b[2999] != 0 {
		t.Fatalf("reallocation at %d (%v)", off, ok)
	}
	a.Free(b)
	for i, b := range bufs {
		switch i {
		case 5, 3, 4, 60, 0, 63, 1, 2:
		default:
			a.Free(b)
		}
	}
	if len(a.free) != 1 || a.FreeBytes() != 64<<10 {
		t.Fatalf("free spans after freeing everything: %v", a.free)
	}
}

// TestUnzeroed: the unzeroed view allocates from the same region without
// clearing; the zeroing allocator clears reused memory.
func TestUnzeroed(t *testing.T) {
	a, err := NewArena(t.TempDir(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	u := a.Unzeroed()
	b := u.Allocate(100)
	b[50] = 7
	u.Free(b)
	if b = u.Allocate(100); b[50] != 7 {
		t.Fatal("unzeroed allocation was cleared (or moved)")
	}
	b = u.Reallocate(3000, b)
	if off, ok := a.Offset(b); !ok || off != 128 || b[50] != 7 {
		t.Fatalf("reallocation at %d (%v) lost the data", off, ok)
	}
	u.Free(b)
	if b = a.Allocate(100); b[50] != 0 {
		t.Fatal("zeroing allocation returned old data")
	}
	a.Free(b)
	if a.FreeBytes() != 4096 {
		t.Fatalf("%d bytes free", a.FreeBytes())
	}
}

// TestLayoutRoundTrip builds a batch in an arena and reads it back from its
// layout over the region; a batch outside the arena has no layout.
func TestLayoutRoundTrip(t *testing.T) {
	a, err := NewArena(t.TempDir(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mem := memory.NewCheckedAllocator(a)
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, 200)
	defer rec.Release()
	sb, err := SchemaBytes(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	l, ok := a.Layout(rec, sb)
	if !ok {
		t.Fatal("batch built in the arena has no layout")
	}
	var r LayoutReader
	got, err := r.Read(l, a.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(rec, got) {
		t.Fatal("batch read from its layout differs")
	}
	got.Release()
	heap := batch(t, memory.NewGoAllocator(), 3)
	defer heap.Release()
	if _, ok := a.Layout(heap, sb); ok {
		t.Fatal("heap batch has a layout")
	}
	// Out-of-region buffers and wrong lengths are errors, not panics.
	bad := proto.Clone(l).(*pluginpb.SharedLayout)
	bad.Columns[0].Buffers[1].Offset = uint64(len(a.Data)) - 8
	if _, err := r.Read(bad, a.Data); err == nil {
		t.Fatal("buffer past the region accepted")
	}
	bad = proto.Clone(l).(*pluginpb.SharedLayout)
	bad.Columns[0].Length = 5000
	if _, err := r.Read(bad, a.Data); err == nil {
		t.Fatal("column longer than its buffer accepted")
	}
}

// FuzzLayout: LayoutReader.Read never panics on a corrupted layout, and
// what it accepts can be read through the event batch view without running
// past its buffers. The schema bytes are kept valid: they come from the
// host, and arrow-go's IPC schema reader trusts the counts in its
// flatbuffer (a corrupted one can make it allocate without bound).
func FuzzLayout(f *testing.F) {
	a, err := NewArena(f.TempDir(), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	defer a.Close()
	rec := batch(f, a, 5)
	sb, _ := SchemaBytes(rec.Schema())
	l, _ := a.Layout(rec, sb)
	seed, _ := proto.Marshal(l)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var l pluginpb.SharedLayout
		if proto.Unmarshal(b, &l) != nil {
			return
		}
		l.Schema = sb
		var r LayoutReader
		if rec, err := r.Read(&l, a.Data); err == nil {
			ev, err := schemas.NewEventBatch(rec)
			if err == nil {
				for i := 0; i < ev.Len(); i++ {
					for g := range ev.Groups {
						ev.Fragments(g, i, func(uint32, []byte) bool { return true })
					}
				}
			}
			rec.Release()
		}
	})
}

// TestRegionReservedAtCreation: a region larger than the free space of its
// tmpfs is refused at creation, naming the sizes, and leaves no file; it
// is never created sparse, to SIGBUS its writer at the first page the tmpfs
// cannot give (the builder's arena did, on Docker's 64 MiB /dev/shm).
func TestRegionReservedAtCreation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer unix.Unmount(dir, 0)
	_, err := NewArena(dir, 4<<20)
	if !errors.Is(err, shmspace.ErrNoSpace) || !strings.Contains(err.Error(), "4MiB needed; "+dir+" has 2MiB free of 2MiB") {
		t.Fatalf("arena of 4MiB on a 2MiB tmpfs: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	r, err := CreateRegion(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if free, _, _ := shmspace.Free(dir); free != 1<<20 {
		t.Fatalf("a 1MiB region leaves %d bytes of 2MiB free, want its pages reserved", free)
	}
}

// FuzzLayoutSplit builds event batches in the arena from the fuzzer's
// bytes, cut into fragments at points it chooses (each cuts byte one
// fragment's length; 255: the source is missing), two sources an event,
// and reads their layout over the region cut at a point it chooses, as
// nats-server's fuzzers split a stream across reads: so that the last
// buffer ends at, inside or before the end of what the plugin maps. A
// region that holds every buffer must give back every fragment byte for
// byte; one that cuts any buffer must be refused with an error, never a
// panic or a read past the region.
func FuzzLayoutSplit(f *testing.F) {
	a, err := NewArena(f.TempDir(), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	defer a.Close()
	f.Add([]byte("0123456789abcdefghij"), []byte{3, 7, 0, 255, 10}, uint16(0))
	f.Add([]byte("0123456789abcdefghij"), []byte{20, 1}, uint16(1))
	f.Add([]byte{}, []byte{255, 255}, uint16(9))
	groups := []schemas.SourceGroup{{Name: "tracker", Sources: []uint32{4, 9}}}
	f.Fuzz(func(t *testing.T, payload, cuts []byte, cut uint16) {
		var events []synthbatch.Event
		var frags [][]byte
		rest := payload
		for _, c := range cuts[:min(len(cuts), 64)] {
			if c == 255 {
				frags = append(frags, nil)
			} else {
				k := min(int(c), len(rest))
				frags = append(frags, rest[:k:k])
				rest = rest[k:]
			}
			if len(frags) == 2 {
				events = append(events, synthbatch.Event{ID: uint64(len(events)), Fragments: [][][]byte{frags}})
				frags = nil
			}
		}
		if len(events) == 0 {
			return
		}
		rec, err := synthbatch.Build(a, groups, events)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		sb, _ := SchemaBytes(rec.Schema())
		l, ok := a.Layout(rec, sb)
		if !ok {
			t.Fatal("a batch built in the arena has no layout")
		}
		end := layoutEnd(l.Columns)
		at := end - int(cut)%(end+1)
		var r LayoutReader
		got, err := r.Read(l, a.Data[:at])
		if at < end {
			if err == nil {
				got.Release()
				t.Fatalf("layout read over a region cut at %d, its buffers end at %d", at, end)
			}
			return
		}
		if err != nil {
			t.Fatalf("layout over the whole region: %v", err)
		}
		defer got.Release()
		ev, err := schemas.NewEventBatch(got)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Len() != len(events) {
			t.Fatalf("%d events read, %d built", ev.Len(), len(events))
		}
		for i, want := range events {
			k := 0
			ev.Fragments(0, i, func(src uint32, p []byte) bool {
				if w := want.Fragments[0][k]; !bytes.Equal(p, w) {
					t.Fatalf("event %d source %d: %q, built %q", i, src, p, w)
				}
				k++
				return true
			})
		}
	})
}

// layoutEnd is where the last present, non-empty buffer of the columns ends.
func layoutEnd(cols []*pluginpb.ArrayLayout) int {
	end := 0
	for _, c := range cols {
		for _, b := range c.GetBuffers() {
			if !b.GetAbsent() && b.GetLength() > 0 {
				end = max(end, int(b.GetOffset()+b.GetLength()))
			}
		}
		end = max(end, layoutEnd(c.GetChildren()))
	}
	return end
}
