package lhcb

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

// syntheticEvent is a v3 event without ODIN in which source (type 5,
// source 7) has three banks, two of them not adjacent, and (type 5,
// source 8) one bank with an unpadded length.
func syntheticEvent(t *testing.T) (Header, []byte) {
	t.Helper()
	var body []byte
	var err error
	for _, b := range []Bank{
		{Type: 5, Version: 1, SourceID: 7, Data: []byte("first")},
		{Type: 5, Version: 2, SourceID: 7, Data: []byte("second")},
		{Type: 5, Version: 1, SourceID: 8, Data: []byte("xyz")},
		{Type: 5, Version: 3, SourceID: 7, Data: []byte("third, after another source")},
	} {
		if body, err = AppendBank(body, b); err != nil {
			t.Fatal(err)
		}
	}
	return Header{Version: 3, DataType: DataTypeBanks, TriggerMask: [4]uint32{1, 0, 0, 8}, Run: 42, Orbit: 1234, Bunch: 77}, body
}

func TestSplitSynthetic(t *testing.T) {
	h, body := syntheticEvent(t)
	s7, s8, s9 := SourceID(5, 7), SourceID(5, 8), SourceID(6, 7)
	sp, err := NewSplitter([]uint32{s9, s8, s7})
	if err != nil {
		t.Fatal(err)
	}
	frags, err := sp.Split(nil, &h, body, 99)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 4 || frags[0].SourceID != HeaderSource || frags[1].SourceID != s7 || frags[2].SourceID != s8 || frags[3].SourceID != s9 {
		t.Fatalf("fragments %+v", frags)
	}
	for _, f := range frags {
		if f.EventID != 99 || !f.CRCValid() {
			t.Fatalf("fragment of %#x: event id %d (want the index 99: no ODIN), CRC valid %v", f.SourceID, f.EventID, f.CRCValid())
		}
	}
	// All three banks of source (5,7), in their order, with their headers.
	banks, err := AppendBanks(nil, frags[1].Payload)
	if err != nil || len(banks) != 3 || string(banks[0].Data) != "first" || string(banks[2].Data) != "third, after another source" || banks[1].Version != 2 {
		t.Fatalf("source (5,7) fragment: %+v, %v", banks, err)
	}
	if len(frags[2].Payload) != 12 || frags[2].Flags != 0 {
		t.Fatalf("source (5,8): %d bytes, flags %b (want the padded 11-byte bank)", len(frags[2].Payload), frags[2].Flags)
	}
	if len(frags[3].Payload) != 0 || frags[3].Flags != schemas.FlagEmpty {
		t.Fatalf("source (6,7) has no bank: %d bytes, flags %b; want an empty fragment", len(frags[3].Payload), frags[3].Flags)
	}
	// The header fragment: the header, then 4 banks in order.
	hp := frags[0].Payload
	if got, err := DecodeHeader(hp); err != nil || got.Run != 42 || got.Orbit != 1234 || got.Bunch != 77 || got.TriggerMask != h.TriggerMask {
		t.Fatalf("header fragment header: %+v, %v", got, err)
	}
	if len(hp) != 48+4+4*4 {
		t.Fatalf("header fragment of %d bytes", len(hp))
	}

	// Unknown source.
	sp2, _ := NewSplitter([]uint32{s7})
	if _, err := sp2.Split(nil, &h, body, 0); !errors.Is(err, ErrUnknownSource) {
		t.Fatalf("split with (5,8) missing from the set: %v", err)
	}
	if _, err := NewSplitter([]uint32{1 << 25}); err == nil {
		t.Fatal("NewSplitter accepted source id 2^25")
	}
	// A malformed bank: offset in the body.
	bad := bytes.Clone(body)
	bad[16] = 0
	_, err = sp.Split(nil, &h, bad, 0)
	decodetest.Want(t, err, schemas.ErrBadMagic, 16)
}

// TestJoinSynthetic round-trips the scattered banks through the builder,
// then checks the joiner's errors on an event missing a source.
func TestJoinSynthetic(t *testing.T) {
	h, body := syntheticEvent(t)
	want, err := AppendRecord(nil, h, body, 0)
	if err != nil {
		t.Fatal(err)
	}
	sources := []uint32{SourceID(5, 7), SourceID(5, 8), SourceID(6, 7), HeaderSource}
	sp, _ := NewSplitter(sources)
	var frags []schemas.Fragment
	for i := uint64(0); i < 2; i++ {
		f, err := sp.Split(nil, &h, body, i)
		if err != nil {
			t.Fatal(err)
		}
		for k := range f {
			f[k].Payload = bytes.Clone(f[k].Payload)
		}
		frags = append(frags, f...)
	}
	out, l := buildAndJoin(t, sources, func(ctx context.Context, b *builder.Builder) {
		// Out of order, event 0 (fragments 0..3) losing source (5,8)
		// (fragment 2); event 0 opens before event 1 is complete, since the
		// builder counts fragments of an id below every recently emitted
		// one as late.
		for _, i := range []int{7, 6, 5, 3, 1, 0, 4} {
			if err := b.AddFragment(ctx, frags[i], nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	if l.EventsBuilt != 2 || l.EventsIncomplete != 1 {
		t.Fatalf("ledger %+v", l)
	}
	for _, j := range out {
		switch j.id {
		case 1:
			if j.err != nil || !bytes.Equal(j.record, want) {
				t.Fatalf("event 1: %v; record equal %v", j.err, bytes.Equal(j.record, want))
			}
		case 0:
			if len(j.missing) != 1 || j.missing[0] != SourceID(5, 8) {
				t.Fatalf("event 0 missing %v", j.missing)
			}
			de := decodetest.Want(t, j.err, schemas.ErrInconsistent, 0)
			if de.Field != "fragment of source 0x50008" {
				t.Fatalf("field %q", de.Field)
			}
		}
	}
}
