package storage

import (
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// TestPutLeavesOutEventsTooLarge: an event larger than the store's value
// limit (its value-log file, 1 MiB here) is left out of the write and
// named in Ack.TooLarge; the other events of the batch are stored (badger
// failed the whole write with a hex dump of the value).
func TestPutLeavesOutEventsTooLarge(t *testing.T) {
	s := openTest(t, func(o *Options) { o.ValueLogFileSize = 1 << 20 })
	if s.MaxEventBytes() != 1<<20 {
		t.Fatalf("MaxEventBytes %d", s.MaxEventBytes())
	}
	evs := genEvents(1, 0, 3, 1, 1000)
	evs[1] = genEvent(1, 1, 2<<20)
	rec := buildBatch(t, nil, evs)
	defer rec.Release()
	eb, _ := newView(t, rec)
	ack, err := s.Put(Deferred, eb, make([]schemas.Verdict, 3), nil)
	if err != nil || ack.Events != 2 || len(ack.TooLarge) != 1 || ack.TooLarge[0] != 1 {
		t.Fatalf("Put of 3 events, the second of 2.7MiB: ack %+v, %v", ack, err)
	}
	keys, _ := readAll(t, s, Deferred, CursorOptions{})
	if len(keys) != 2 || keys[0].EventID != 0 || keys[1].EventID != 2 {
		t.Fatalf("stored %v, want events 0 and 2", keys)
	}
	// A batch of only too large events writes nothing and says so.
	rec2 := buildBatch(t, nil, evs[1:2])
	defer rec2.Release()
	eb2, _ := newView(t, rec2)
	if ack, err := s.Put(Deferred, eb2, make([]schemas.Verdict, 1), nil); err != nil || ack.Events != 0 || len(ack.TooLarge) != 1 || !ack.Durable {
		t.Fatalf("Put of one too large event: ack %+v, %v", ack, err)
	}
}
