package atlas

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

// TestRoundTripBuilder: full events (big- and little-endian) -> split ->
// native fragments in shuffled arrival order -> the real builder ->
// Joiner.Join in the input's byte order: every event comes back
// byte for byte, header words, ROB order and checksums included.
func TestRoundTripBuilder(t *testing.T) {
	for _, o := range orders {
		srcs := []uint32{0x420001, 0x110000, 0x7c0002, 0x130005}
		var wire [][]byte
		orig := map[uint64][]byte{}
		for k := range 5 {
			e := testEvent(ChecksumCRC16CCITT)
			e.GlobalID, e.L1ID, e.BCID, e.LumiBlock = uint64(900+k), uint32(0x01000000+k), uint32(7*k), uint32(1+k/2)
			e.StreamTags = []uint32{uint32(k)}
			e.ROBs = nil
			for j, s := range srcs {
				e.ROBs = append(e.ROBs, testROB(s, ChecksumType(j%3), j+k))
			}
			b, err := AppendFullEvent(nil, &e, o)
			if err != nil {
				t.Fatal(err)
			}
			orig[uint64(e.GlobalID)] = b
			d, _, _, err := DecodeFullEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			frags, err := SplitFullEvent(nil, &d)
			if err != nil {
				t.Fatal(err)
			}
			for i := range frags {
				wire = append(wire, schemas.AppendFragment(nil, &frags[i], false))
			}
		}
		rand.New(rand.NewPCG(7, 8)).Shuffle(len(wire), func(i, j int) { wire[i], wire[j] = wire[j], wire[i] })
		// Ascending: the event schema stores a group's sources sorted, so
		// a builder given another order would mislabel payloads.
		sources := slices.Sorted(slices.Values(append([]uint32{HeaderSource}, srcs...)))
		out, l := buildAndJoin(t, sources, wire, o)
		if !l.Balanced() || l.Discards() != 0 || l.FragmentsIn != uint64(len(wire)) || l.EventsComplete != 5 {
			t.Fatalf("ledger %+v", l)
		}
		if len(out) != len(orig) {
			t.Fatalf("%d events joined, want %d", len(out), len(orig))
		}
		for id, b := range orig {
			if !bytes.Equal(out[id], b) {
				t.Fatalf("%v: event %d joined differs from the original", o, id)
			}
		}
	}
}

func buildAndJoin(t *testing.T, sources []uint32, wire [][]byte, o ByteOrder) (map[uint64][]byte, builder.Ledger) {
	t.Helper()
	out := map[uint64][]byte{}
	cfg := builder.Config{Groups: []schemas.SourceGroup{{Name: "rob", Sources: sources}}, Run: 431000, BatchEvents: 2}
	led := buildtest.Run(t, cfg, buildtest.Fragments(t, wire), func(eb *schemas.EventBatch, i int) {
		j, err := Joiner{Order: o}.Join(nil, eb, i)
		if err != nil || eb.Status(i) != 0 {
			t.Errorf("event %d, status %b: %v", eb.EventID(i), eb.Status(i), err)
		}
		out[eb.EventID(i)] = j
	})
	return out, led
}

func TestJoinerErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	e := testEvent(ChecksumNone)
	e.ROBs = e.ROBs[:2] // sources 0x110000, 0x420001
	frags, err := SplitFullEvent(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1, hdr := frags[0].Payload, frags[1].Payload, frags[2].Payload
	all := []uint32{0x110000, 0x420001, HeaderSource}
	join := func(event uint64, payloads ...[]byte) ([]byte, error) {
		rec := buildtest.OneRow(t, mem, "rob", 431000, event, all, payloads)
		defer rec.Release()
		eb, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		return Joiner{Order: binary.LittleEndian}.Join(nil, eb, 0)
	}
	want, _ := AppendFullEvent(nil, &e, binary.LittleEndian)
	if got, err := join(123456, r0, r1, hdr); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("join: %v", err)
	}
	// Without the header fragment the events are not eformat's (e.g. LHCb
	// events exported as eformat): said so, naming the run and event.
	_, err = join(123456, r0, r1, nil)
	if !errors.Is(err, format.ErrForeignEvents) || !strings.Contains(err.Error(), "not atlas-full-event events: run 431000 event 123456 has no fragment of source 0xffffffff") {
		t.Fatalf("no header fragment: %v", err)
	}
	_, err = join(123455, r0, r1, hdr)
	decodetest.Want(t, err, schemas.ErrInconsistent, 4*(9+1))
	_, err = join(123456, r0, r1, hdr[:len(hdr)-4])
	decodetest.Want(t, err, schemas.ErrInconsistent, int64(len(hdr)-12))
	_, err = join(123456, r1, r0, hdr)
	decodetest.Want(t, err, schemas.ErrInconsistent, 16)
	if _, err := join(123456, r1, r0, hdr); err == nil || !strings.Contains(err.Error(), "holds ROB 0x420001") {
		t.Fatalf("ROB 0x420001 under source 0x110000: %v", err)
	}
	// A ROB that did not arrive is left out.
	got, err := join(123456, nil, r1, hdr)
	d, _, _, derr := DecodeFullEvent(got)
	if err != nil || derr != nil || len(d.ROBs) != 1 || d.ROBs[0].SourceID != 0x420001 {
		t.Fatalf("event without ROB 0x110000: %v %v", err, derr)
	}
}
