package cms

import (
	"bytes"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/internal/samples"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// ferolSamples are the real FEROL captures (testdata/third_party/cms).
var ferolSamples = []string{"mol_run55.dat.gz", "mol_run2.dat.gz"}

// TestFEROLSamples: both captures hold 300 single-block fragments of FED
// 931, LV1 1..300, 152 words each, every CRC-16 valid (as the samples'
// provenance says).
func TestFEROLSamples(t *testing.T) {
	for _, name := range ferolSamples {
		b := samples.Read(t, "cms/"+name)
		if len(b) != 369600 {
			t.Fatalf("%s: %d bytes", name, len(b))
		}
		if m := FEROLFormat.Detect(b[:format.HeadBytes]); m != format.Certain {
			t.Fatalf("%s: detect %v", name, m)
		}
		s, _, err := format.NewStream(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := FEROLFormat.Inspect(s, 3)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := rep.Section.(*FEROLReport)
		if rep.Records != 300 || rep.Events != 300 || rep.NumSources != 1 || rep.Sources[0] != 931 ||
			rep.Checksums.Valid != 300 || rep.Checksums.Bad != 0 || rep.Bytes != 369600 {
			t.Fatalf("%s: report %+v", name, rep)
		}
		if c.Blocks != 300 || c.Fragments != 300 || c.EventRange != [2]uint32{1, 300} || c.FEDCRCBad != 0 ||
			c.HeaderMismatch != 0 || c.NotCanonical != 0 || rep.RecordBytes.Min != 16+152*8 || rep.RecordBytes.Max != 16+152*8 {
			t.Fatalf("%s: section %+v sizes %+v", name, c, rep.RecordBytes)
		}
	}
}

// TestFEROLRoundTrip: real FEROL stream -> Split -> native fragments ->
// a real builder -> the FEROL joiner, events in order: the original bytes.
func TestFEROLRoundTrip(t *testing.T) {
	split := FEROLFormat.(format.Splitter)
	joiner := FEROLFormat.(format.Joiner).NewJoiner()
	for _, name := range ferolSamples {
		b := samples.Read(t, "cms/"+name)
		groups, err := split.Sources(bytes.NewReader(b))
		if err != nil || len(groups) != 1 || len(groups[0].Sources) != 1 || groups[0].Sources[0] != 931 {
			t.Fatalf("%s: sources %v: %v", name, groups, err)
		}
		var wire [][]byte
		err = split.Split(bytes.NewReader(b), groups, func(p format.Piece) error {
			for i := range p.Fragments {
				wire = append(wire, schemas.AppendFragment(nil, &p.Fragments[i], false))
			}
			return nil
		})
		if err != nil || len(wire) != 300 {
			t.Fatalf("%s: %d fragments: %v", name, len(wire), err)
		}
		out := map[uint64][]byte{}
		cfg := builder.Config{Groups: groups, BatchEvents: 16}
		led := buildtest.Run(t, cfg, buildtest.Fragments(t, wire), func(eb *schemas.EventBatch, i int) {
			if eb.Status(i) != 0 {
				t.Errorf("event %d built with status %b", eb.EventID(i), eb.Status(i))
			}
			j, err := joiner.Join(nil, eb, i)
			if err != nil {
				t.Error(err)
			}
			out[eb.EventID(i)] = j
		})
		if !led.Balanced() || led.EventsComplete != 300 {
			t.Fatalf("%s: ledger %+v", name, led)
		}
		var joined []byte
		for ev := uint64(1); ev <= 300; ev++ {
			joined = append(joined, out[ev]...)
		}
		if !bytes.Equal(joined, b) {
			t.Fatalf("%s: joined stream (%d bytes) differs from the original (%d)", name, len(joined), len(b))
		}
	}
}

// TestFEROLMultiBlock: a FED fragment over one block is framed in full
// blocks and read back whole; a stream framed otherwise reads the same
// but is counted as not canonical.
func TestFEROLMultiBlock(t *testing.T) {
	fed := mustFED(t, &FED{SourceID: 1100, LV1ID: 77, Payload: payloadWords(1100, 1200)}) // 9616 bytes: 3 blocks
	b, err := AppendFEROL(nil, 1100, 77, fed)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != len(fed)+3*FEROLHeaderSize {
		t.Fatalf("%d bytes for a %d-byte FED", len(b), len(fed))
	}
	f, err := NewFEROLReader(bytes.NewReader(b)).Next()
	if err != nil || f.Blocks != 3 || !f.Canonical || !bytes.Equal(f.Data, fed) || f.FEDID != 1100 || f.Event != 77 {
		t.Fatalf("read %+v: %v", f, err)
	}
	// Offsets in the FED map past the block headers.
	if got := f.StreamOffset(FEROLMaxPayload + 5); got != 2*FEROLHeaderSize+FEROLMaxPayload+5 {
		t.Fatalf("StreamOffset %d", got)
	}
	// Two blocks of 8 bytes then the rest: legal, not canonical.
	var odd []byte
	odd = AppendFEROLHeader(odd, FEROLBlock{First: true, Words: 1, FEDID: 1100, Event: 77})
	odd = append(odd, fed[:8]...)
	odd = AppendFEROLHeader(odd, FEROLBlock{Words: 1, FEDID: 1100, Event: 77})
	odd = append(odd, fed[8:16]...)
	rest := fed[16:]
	for len(rest) > 0 {
		n := min(len(rest), FEROLMaxPayload)
		odd = AppendFEROLHeader(odd, FEROLBlock{Last: n == len(rest), Words: uint16(n / 8), FEDID: 1100, Event: 77})
		odd = append(odd, rest[:n]...)
		rest = rest[n:]
	}
	f, err = NewFEROLReader(bytes.NewReader(odd)).Next()
	if err != nil || f.Canonical || !bytes.Equal(f.Data, fed) {
		t.Fatalf("odd framing: %+v %v", f.Canonical, err)
	}
	s, _, _ := format.NewStream(bytes.NewReader(odd))
	rep, err := FEROLFormat.Inspect(s, 0)
	if err != nil || rep.Section.(*FEROLReport).NotCanonical != 1 {
		t.Fatalf("inspect odd framing: %v", err)
	}
}

func TestFEROLErrors(t *testing.T) {
	b := samples.Read(t, "cms/mol_run55.dat.gz")[:3*1232]
	read := func(b []byte) error {
		fr := NewFEROLReader(bytes.NewReader(b))
		for {
			f, err := fr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if _, _, _, _, err := ferolFED(&f); err != nil {
				return err
			}
		}
	}
	if err := read(b); err != nil {
		t.Fatal(err)
	}
	mod := func(off int, x byte) []byte {
		c := bytes.Clone(b)
		c[off] ^= x
		return c
	}
	decodetest.Want(t, read(mod(1232, 0xFF)), schemas.ErrBadMagic, 1232)           // signature of block 1
	decodetest.Want(t, read(mod(1232+4, 0x80)), schemas.ErrInconsistent, 1232+4)   // first bit cleared
	decodetest.Want(t, read(mod(1232+4, 0x40)), schemas.ErrInconsistent, 2*1232+4) // last bit cleared: block 2 starts anew
	decodetest.Want(t, read(mod(1232+7, 0x98)), schemas.ErrSizeOverflow, 1232+6)   // length 0
	decodetest.Want(t, read(b[:1232+10]), schemas.ErrTruncated, 1232)              // inside a header
	decodetest.Want(t, read(b[:1232+100]), schemas.ErrTruncated, 1232+16)          // inside a payload
	decodetest.Want(t, read(mod(1232+16+7, 0xF0)), schemas.ErrBadMagic, 1232+16+7) // the FED's BOE_1, at its stream offset
	// A corrupt payload byte is a bad CRC-16: counted, and flagged by Split.
	c := mod(1232+16+100, 1)
	s, _, _ := format.NewStream(bytes.NewReader(c))
	rep, err := FEROLFormat.Inspect(s, 0)
	if err != nil || rep.Checksums.Bad != 1 || rep.Checksums.Valid != 2 {
		t.Fatalf("corrupt payload: %+v %v", rep.Checksums, err)
	}
	var flags []schemas.FragmentFlag
	FEROLFormat.(format.Splitter).Split(bytes.NewReader(c), nil, func(p format.Piece) error {
		flags = append(flags, p.Fragments[0].Flags)
		return nil
	})
	if len(flags) != 3 || flags[0] != 0 || flags[1] != schemas.FlagSourceError || flags[2] != 0 {
		t.Fatalf("flags %v", flags)
	}
}
