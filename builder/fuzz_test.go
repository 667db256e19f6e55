package builder

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// FuzzBuilder drives a small builder (3 sources, tight limits) in event,
// timeslice or assigned mode with fragments decoded from the input: 4
// bytes per fragment (source, event id / timestamp, payload length, and
// bits: truncated flag, CRC corruption, a far id (shifted up 56 bits), a
// Flush first, an Expect of a range at that id first). Whatever the
// sequence, nothing may panic, every release must run exactly once, the
// ledger must balance with nothing left open after Close, and no Arrow
// memory may leak.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte{0, 1, 3, 0, 1, 1, 3, 0, 2, 1, 3, 0})          // one complete event
	f.Add([]byte{0, 1, 3, 0, 0, 1, 3, 0, 5, 1, 3, 2, 1, 0, 0}) // duplicate, unknown source, corrupt
	f.Add([]byte{0x80, 10, 3, 0, 0x81, 12, 3, 0, 0x82, 19, 3, 4, 0x80, 30, 1, 0})
	f.Add([]byte{0, 1, 3, 0, 1, 1, 3, 0, 2, 1, 3, 0, 0, 9, 1, 4, 1, 2, 3, 8, 0, 0, 1, 0})      // far id, flush, reset
	f.Add([]byte{0x40, 5, 3, 16, 1, 5, 3, 0, 2, 5, 3, 0, 0, 6, 1, 0, 1, 99, 1, 0, 2, 7, 1, 8}) // assigned
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4*512 {
			return
		}
		mode, assigned := schemas.ModeEvent, false
		if len(in) > 0 && in[0]&0x80 != 0 {
			mode = schemas.ModeTimeslice
		} else if len(in) > 0 && in[0]&0x40 != 0 {
			assigned = true
		}
		reports := 0
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		b, err := New(Config{
			Mode: mode, Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1}}, {Name: "b", Sources: []uint32{2}}},
			SliceDuration: 8, Overlap: 2, Timeout: time.Hour, MaxOpenEvents: 4, MaxBufferedBytes: 64,
			BatchEvents: 3, BatchLatency: time.Millisecond, LateWindow: 8, Allocator: mem,
			SuspectDistance: 4, MaxSuspectEvents: 4, Assigned: assigned,
			OnAssignmentDone: func(AssignmentReport) { reports++ },
		})
		if err != nil {
			t.Fatal(err)
		}
		done := consume(b)
		rel := newReleases()
		payload := make([]byte, 16)
		for op := 0; op+4 <= len(in); op += 4 {
			src := uint32(in[op] & 0x7f % 4) // 3 is unknown
			id := uint64(in[op+1])
			if in[op+3]&4 != 0 {
				id <<= 56
			}
			p := payload[:in[op+2]%17]
			binary.LittleEndian.PutUint32(payload, uint32(op))
			var flags schemas.FragmentFlag
			if in[op+3]&1 != 0 {
				flags = schemas.FlagTruncated
			}
			fr := frag(src, id, string(p), in[op+3]&2 != 0, flags)
			// Tight limits with events that never complete would block
			// until the timeout: give up at once instead, as "cancelled".
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			if in[op+3]&8 != 0 {
				_ = b.Flush(ctx)
			}
			if in[op+3]&16 != 0 {
				_ = b.Expect(Assignment{ID: uint64(op), Ranges: []Range{{First: id, N: uint32(in[op+2]%8 + 1)}}})
			}
			_ = b.AddFragment(ctx, fr, rel.next())
			cancel()
		}
		finish(t, b, done)
		rel.check(t)
		if l := b.Ledger(); uint64(reports) != l.AssignmentsDone {
			t.Fatalf("%d assignment reports, %d done", reports, l.AssignmentsDone)
		}
	})
}
