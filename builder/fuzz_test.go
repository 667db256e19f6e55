package builder

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// FuzzBuilder drives a small builder (3 sources, tight limits) in either
// mode with fragments decoded from the input: 4 bytes per fragment (source,
// event id / timestamp, payload length, flags and CRC corruption). Whatever
// the sequence, nothing may panic, every release must run exactly once, the
// ledger must balance with nothing left open after Close, and no Arrow
// memory may leak.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte{0, 1, 3, 0, 1, 1, 3, 0, 2, 1, 3, 0})          // one complete event
	f.Add([]byte{0, 1, 3, 0, 0, 1, 3, 0, 5, 1, 3, 2, 1, 0, 0}) // duplicate, unknown source, corrupt
	f.Add([]byte{0x80, 10, 3, 0, 0x81, 12, 3, 0, 0x82, 19, 3, 4, 0x80, 30, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4*512 {
			return
		}
		mode := schemas.ModeEvent
		if len(in) > 0 && in[0]&0x80 != 0 {
			mode = schemas.ModeTimeslice
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		b, err := New(Config{
			Mode: mode, Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1}}, {Name: "b", Sources: []uint32{2}}},
			SliceDuration: 8, Overlap: 2, Timeout: time.Hour, MaxOpenEvents: 4, MaxBufferedBytes: 64,
			BatchEvents: 3, BatchLatency: time.Millisecond, LateWindow: 8, Allocator: mem,
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
			_ = b.AddFragment(ctx, fr, rel.next())
			cancel()
		}
		finish(t, b, done)
		rel.check(t)
	})
}
