package cms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

func TestSplitFRD(t *testing.T) {
	in := FRDEvent{Version: 4, Run: 362000, Lumi: 5, Event: 1 << 40, Padding: 8, Data: fedBlock(t, 10, 700, 3)}
	frags, err := SplitFRD(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 4 {
		t.Fatalf("%d fragments, want 3 FEDs and the header", len(frags))
	}
	for i, want := range []uint32{10, 700, 3, HeaderSource} {
		f := frags[i]
		if f.SourceID != want || f.EventID != in.Event || f.Flags != 0 || !f.CRCValid() {
			t.Fatalf("fragment %d: source %d event %d flags %b crc ok %v", i, f.SourceID, f.EventID, f.Flags, f.CRCValid())
		}
		if want == HeaderSource {
			break
		}
		fed, err := DecodeFED(f.Payload)
		if err != nil || uint32(fed.SourceID) != want || fed.LV1ID != 42 {
			t.Fatalf("fragment %d payload is not FED %d: %v", i, want, err)
		}
	}
	// The header fragment: an FRD v4 event without data (32-byte header, 8
	// bytes of padding), then the FED list.
	h := frags[3].Payload
	e, n, err := DecodeFRD(h)
	if err != nil || n != 40 || e.Run != 362000 || e.Lumi != 5 || e.Event != 1<<40 || e.Padding != 8 || len(e.Data) != 0 {
		t.Fatalf("header fragment event %+v (%d bytes): %v", e, n, err)
	}
	le := binary.LittleEndian
	if le.Uint32(h[40:]) != 3 || le.Uint32(h[44:]) != 10 || le.Uint32(h[48:]) != 700 || le.Uint32(h[52:]) != 3 || len(h) != 56 {
		t.Fatalf("FED list % x", h[40:])
	}
}

func TestSplitFRDFlagsAndErrors(t *testing.T) {
	data := fedBlock(t, 10, 700, 3)
	data[24+9] ^= 1 // corrupt FED 700's payload
	frags, err := SplitFRD(nil, &FRDEvent{Version: 5, Event: 1, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if frags[1].Flags != schemas.FlagSourceError || frags[0].Flags != 0 || frags[2].Flags != 0 {
		t.Fatalf("flags %b %b %b, want only FED 700 flagged", frags[0].Flags, frags[1].Flags, frags[2].Flags)
	}
	// The corrupt FED joins back as it came, its CRC-16 still failing.
	out, err := JoinFRD(nil, &FRDEvent{Version: 5, Event: 1}, func(yield func([]byte) bool) {
		for _, f := range frags[:3] {
			yield(f.Payload)
		}
	})
	if e, _, err2 := DecodeFRD(out); err != nil || err2 != nil || !bytes.Equal(e.Data, data) {
		t.Fatalf("joining a FED with a bad CRC-16: %v, %v", err, err2)
	}
	// A FED whose trailer carries the F (SLINK error) bit is flagged too.
	slink := mustFED(t, &FED{SourceID: 5, SlinkError: true})
	frags, _ = SplitFRD(nil, &FRDEvent{Version: 5, Data: slink})
	if frags[0].Flags != schemas.FlagSourceError {
		t.Fatal("SLINK error not flagged")
	}
	// The same FED twice in one event.
	dup := fedBlock(t, 10, 700, 10)
	prev := []schemas.Fragment{{SourceID: 1}}
	got, err := SplitFRD(prev, &FRDEvent{Version: 5, Event: 7, Data: dup})
	decodetest.Want(t, err, schemas.ErrInconsistent, 1)
	if len(got) != 1 {
		t.Fatalf("failed split left %d fragments in dst, want the 1 already there", len(got))
	}
	// A broken walk.
	_, err = SplitFRD(nil, &FRDEvent{Version: 5, Data: data[:len(data)-8]})
	decodetest.Want(t, err, schemas.ErrBadMagic, int64(len(data)-9))
	// Joining a malformed FED fails with its offset inside the fragment.
	bad := slices.Clone(data[24:56])
	bad[7] = 0
	_, err = JoinFRD(nil, &FRDEvent{Version: 5}, slices.Values([][]byte{bad}))
	decodetest.Want(t, err, schemas.ErrBadMagic, 7)
}

// buildAndJoin feeds the wire fragments to a real builder expecting
// sources, joins every built event back to FRD and returns the joined
// events by event number, with the builder's ledger.
func buildAndJoin(t *testing.T, sources []uint32, run uint32, wire [][]byte) (map[uint64][]byte, builder.Ledger) {
	t.Helper()
	out := map[uint64][]byte{}
	cfg := builder.Config{Groups: []schemas.SourceGroup{{Name: "fed", Sources: sources}}, Run: run, BatchEvents: 2}
	led := buildtest.Run(t, cfg, buildtest.Fragments(t, wire), func(eb *schemas.EventBatch, i int) {
		if eb.Status(i) != 0 {
			t.Errorf("event %d built with status %b", eb.EventID(i), eb.Status(i))
		}
		j, err := Joiner{}.Join(nil, eb, i)
		if err != nil {
			t.Error(err)
		}
		out[eb.EventID(i)] = j
	})
	return out, led
}

// TestRoundTripBuilder: FRD file -> split -> native fragments in shuffled
// arrival order -> builder -> Joiner.Join: every event comes back byte for
// byte (header fields, FED order, checksum), and the joined file reads
// back with valid checksums.
func TestRoundTripBuilder(t *testing.T) {
	ids := []uint16{700, 3, 1023, 10, 55}
	var evs []FRDEvent
	for k := range 6 {
		var data []byte
		for j, id := range ids {
			var err error
			if data, err = AppendFED(data, &FED{SourceID: id, LV1ID: uint32(k), BXID: uint16(100 + k), Payload: payloadWords(id, j+k)}); err != nil {
				t.Fatal(err)
			}
		}
		v := []uint16{3, 4, 5, 6, 6, 6}[k]
		e := FRDEvent{Version: v, Run: 362000, Lumi: uint32(1 + k/3), Event: uint64(5000 + k), Data: data}
		if v <= 4 {
			e.Padding = 8
		}
		if v == 6 && k == 5 {
			e.Flags = FRDFlagGenData
		}
		evs = append(evs, e)
	}
	file, err := AppendFRDFile(nil, &FRDFileHeader{Version: 2, Run: 362000}, evs)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := NewFileReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var wire [][]byte
	orig := map[uint64][]byte{}
	for range evs {
		e, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		orig[e.Event], _ = AppendFRD(nil, &e)
		frags, err := SplitFRD(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		for i := range frags {
			wire = append(wire, schemas.AppendFragment(nil, &frags[i], false))
		}
	}
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(wire), func(i, j int) { wire[i], wire[j] = wire[j], wire[i] })
	// Ascending: the event schema stores a group's sources sorted
	// (schemas.FormatSourceList), so a builder given another order would
	// label payloads with the wrong sources.
	sources := []uint32{HeaderSource}
	for _, id := range ids {
		sources = append(sources, uint32(id))
	}
	slices.Sort(sources)
	out, l := buildAndJoin(t, sources, 362000, wire)
	if !l.Balanced() || l.Discards() != 0 || l.FragmentsIn != uint64(len(wire)) || l.EventsComplete != uint64(len(evs)) {
		t.Fatalf("ledger %+v", l)
	}
	if len(out) != len(evs) {
		t.Fatalf("%d events joined, want %d", len(out), len(evs))
	}
	var joined []byte
	for _, e := range evs {
		j := out[e.Event]
		if !bytes.Equal(j, orig[e.Event]) {
			t.Fatalf("event %d: joined FRD event differs from the original", e.Event)
		}
		joined = append(joined, j...)
	}
	fr, _ = NewFileReader(bytes.NewReader(joined))
	for k := range evs {
		if e, err := fr.Next(); err != nil || e.Event != evs[k].Event {
			t.Fatalf("reading the joined file: event %d: %v", e.Event, err)
		}
	}
}

func TestJoinerErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	frags, err := SplitFRD(nil, &FRDEvent{Version: 5, Run: 362000, Event: 9, Data: fedBlock(t, 3, 10)})
	if err != nil {
		t.Fatal(err)
	}
	fed3, fed10, hdr := frags[0].Payload, frags[1].Payload, frags[2].Payload
	join := func(event uint64, sources []uint32, payloads ...[]byte) error {
		rec := buildtest.OneRow(t, mem, "fed", 362000, event, sources, payloads)
		defer rec.Release()
		eb, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Joiner{}.Join(nil, eb, 0)
		return err
	}
	all := []uint32{3, 10, HeaderSource}
	if err := join(9, all, fed3, fed10, hdr); err != nil {
		t.Fatal(err)
	}
	if err := join(9, all, fed3, fed10, nil); !errors.Is(err, format.ErrForeignEvents) || !strings.Contains(err.Error(), "not cms-frd events: run 362000 event 9 has no fragment of source 0x1000") {
		t.Fatalf("no header fragment: %v", err)
	}
	decodetest.Want(t, join(8, all, fed3, fed10, hdr), schemas.ErrInconsistent, 12)
	decodetest.Want(t, join(9, all, fed3, fed10, hdr[:len(hdr)-2]), schemas.ErrInconsistent, 24)
	decodetest.Want(t, join(9, all, fed10, fed3, hdr), schemas.ErrInconsistent, 1)
	// A FED that did not arrive is left out, as CMS does.
	rec := buildtest.OneRow(t, mem, "fed", 362000, 9, all, [][]byte{nil, fed10, hdr})
	defer rec.Release()
	eb, _ := schemas.NewEventBatch(rec)
	b, err := Joiner{}.Join(nil, eb, 0)
	if e, _, err2 := DecodeFRD(b); err != nil || err2 != nil || !bytes.Equal(e.Data, fed10) {
		t.Fatalf("event without FED 3: %v %v", err, err2)
	}
	if err := join(9, all, fed10, fed3, hdr); err == nil || !strings.Contains(err.Error(), "holds FED 10") {
		t.Fatalf("FED 10 under source 3: %v", err)
	}
}

// Events built from bare FED fragments (a FEROL stream: no header
// fragment among their sources) join into FRD v6 events, the FEDs in
// ascending order, run and event number from the row.
func TestJoinBareFEDs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	frags, err := SplitFRD(nil, &FRDEvent{Version: 5, Run: 362000, Event: 9, Data: fedBlock(t, 3, 10)})
	if err != nil {
		t.Fatal(err)
	}
	fed3, fed10 := frags[0].Payload, frags[1].Payload
	join := func(sources []uint32, payloads ...[]byte) ([]byte, error) {
		rec := buildtest.OneRow(t, mem, "fed", 362001, 1<<24|9, sources, payloads)
		defer rec.Release()
		eb, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		return Joiner{}.Join(nil, eb, 0)
	}
	b, err := join([]uint32{3, 10}, fed3, fed10)
	if err != nil {
		t.Fatal(err)
	}
	e, n, err := DecodeFRD(b)
	if err != nil || n != len(b) || e.Version != BareFRDVersion || e.Run != 362001 || e.Event != 1<<24|9 || e.Lumi != 0 ||
		!bytes.Equal(e.Data, append(append([]byte(nil), fed3...), fed10...)) {
		t.Fatalf("joined %+v (%d of %d bytes): %v", e, n, len(b), err)
	}
	if _, err := join([]uint32{3, 4096 + 7}, fed3, []byte("not a FED")); !errors.Is(err, format.ErrForeignEvents) {
		t.Fatalf("a source over 12 bits: %v", err)
	}
	if _, err := join([]uint32{3, 10}, fed10, fed3); err == nil || !strings.Contains(err.Error(), "holds FED 10") {
		t.Fatalf("FED 10 under source 3: %v", err)
	}
}
