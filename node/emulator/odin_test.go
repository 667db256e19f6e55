package emulator

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/transport/file"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

// Looping an MDF file shifts the event ids of every pass after the first;
// the ODIN event numbers in the data must follow, so that every event built
// from the replay joins back into an MDF record whose ODIN number is its
// event id, with a valid checksum, and otherwise the same bytes as the
// file's event.
func TestEmulatorLoopRenumbersODIN(t *testing.T) {
	const loops = 3
	path := filepath.Join(t.TempDir(), "loop.mfp")
	// Packing 3 over the sample's 10 events: ODIN banks in every fragment
	// position of a packet, and a last packet of one fragment.
	sum, err := Run(context.Background(), Config{To: "file://" + path, From: sampleMDF, Loop: loops, Packing: 3})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(sampleMDF)
	if err != nil {
		t.Fatal(err)
	}
	sources, err := lhcb.ScanSources(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Every fragment is in the file: a timeout only makes events
	// incomplete when the machine starves the reader (the default 1 s did
	// under -race at a load of 30).
	b, err := builder.New(builder.Config{Groups: []schemas.SourceGroup{{Name: "lhcb", Sources: sources}}, Run: 1, Allocator: mem, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		id   uint64
		body []byte // the joined record's body
		odin int    // offset of the ODIN payload in body
	}
	var events []event
	done := make(chan error, 1)
	go func() {
		var err error
		j := lhcb.NewJoiner()
		for rec := range b.Batches() {
			if err == nil {
				eb, eerr := schemas.NewEventBatch(rec)
				err = eerr
				for i := 0; err == nil && i < eb.Len(); i++ {
					var out []byte
					if out, err = j.Join(nil, eb, i); err != nil {
						break
					}
					var r lhcb.Record
					if r, _, err = lhcb.DecodeRecord(out); err != nil { // verifies the checksum
						break
					}
					if r.Checksum != lhcb.ChecksumValid {
						t.Errorf("event %d: checksum %v, want valid", eb.EventID(i), r.Checksum)
					}
					ev := event{id: eb.EventID(i), body: bytes.Clone(r.Body), odin: -1}
					for at := 0; at < len(r.Body); {
						bk, n, berr := lhcb.DecodeBank(r.Body[at:])
						if berr != nil {
							err = berr
							break
						}
						if bk.Type == lhcb.BankTypeODIN && ev.odin < 0 {
							o, oerr := lhcb.DecodeODIN(bk.Version, bk.Data)
							if oerr != nil {
								err = oerr
								break
							}
							if o.EventNumber != ev.id {
								t.Errorf("event id %d carries ODIN event number %d", ev.id, o.EventNumber)
							}
							ev.odin = at + lhcb.BankHeaderSize
						}
						at += n
					}
					if ev.odin < 0 {
						t.Errorf("event %d has no ODIN bank", ev.id)
					}
					events = append(events, ev)
				}
			}
			rec.Release()
		}
		done <- err
	}()
	if err := file.NewInput(path).Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	led := b.Ledger()
	if !led.Balanced() || led.EventsIncomplete != 0 || led.EventsCorrupt != 0 || led.Discards() != 0 {
		t.Fatalf("builder ledger %+v", led)
	}
	if sum.PacketsSent == 0 || len(events) != loops*10 {
		t.Fatalf("%d events built from %d packets, want %d", len(events), sum.PacketsSent, loops*10)
	}
	// The sample's ODIN numbers are 6001..6010: pass k holds 6001+10k...
	first := map[uint64]event{}
	for _, ev := range events {
		if ev.id < 6001 || ev.id >= 6001+loops*10 {
			t.Fatalf("event id %d outside 6001..%d", ev.id, 6000+loops*10)
		}
		if ev.id < 6011 {
			first[ev.id] = ev
		}
	}
	// ... and apart from the ODIN event number, the same bytes as pass 0.
	for _, ev := range events {
		orig, ok := first[6001+(ev.id-6001)%10]
		if !ok {
			t.Fatalf("event %d of the first pass missing", 6001+(ev.id-6001)%10)
		}
		body := bytes.Clone(ev.body)
		if ev.odin >= 0 {
			putODINEventNumber(body[ev.odin:], 6001+(ev.id-6001)%10)
		}
		if !bytes.Equal(body, orig.body) {
			t.Errorf("event %d differs from event %d beyond the ODIN event number", ev.id, orig.id)
		}
	}
}
