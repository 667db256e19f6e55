package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

// splitSeeds are small streams of every format that splits, written by the
// format packages' encoders from real sample content where there is some.
func splitSeeds(t testing.TB) [][]byte {
	sample := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Two MDF records of the sample's first event's first banks.
	rec, _, err := lhcb.DecodeRecord(sample("lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"))
	if err != nil {
		t.Fatal(err)
	}
	banks, err := lhcb.AppendBanks(nil, rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for _, b := range banks[:6] {
		if body, err = lhcb.AppendBank(body, b); err != nil {
			t.Fatal(err)
		}
	}
	mdf, err := lhcb.AppendRecord(nil, rec.Header, body, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mdf, err = lhcb.AppendRecord(mdf, rec.Header, body[:len(body)/2/4*4], 0); err != nil {
		t.Fatal(err)
	}
	fed, err := cms.AppendFED(nil, &cms.FED{SourceID: 700, LV1ID: 1, Payload: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	frd, err := cms.AppendFRD(nil, &cms.FRDEvent{Version: 6, Run: 362000, Event: 9, Data: append(fed, fed...)})
	if err != nil {
		t.Fatal(err)
	}
	rod := atlas.ROD{Version: atlas.RODVersion, SourceID: 0x110000, Run: 431000, L1ID: 5, Data: []uint32{1, 2, 3}}
	ev := atlas.FullEvent{Version: atlas.VersionV40, ChecksumType: atlas.ChecksumAdler32, GlobalID: 10, RunNumber: 431000,
		ROBs: []atlas.ROB{{Version: atlas.VersionV40, SourceID: 0x110000, Status: []uint32{0}, ChecksumType: atlas.ChecksumCRC16CCITT, Payload: rod.AppendWords(nil)}}}
	eformat, err := atlas.AppendFullEvent(nil, &ev, binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	native := schemas.AppendMFP(nil, 1, 40, 0, 3, [][]byte{[]byte("a"), nil}, nil)
	native = schemas.AppendFragment(native, &schemas.Fragment{SourceID: 2, EventID: 41, Payload: []byte("b")}, true)
	ferol, err := cms.AppendFEROL(nil, 700, 1, fed)
	if err != nil {
		t.Fatal(err)
	}
	if ferol, err = cms.AppendFEROL(ferol, 700, 2, fed); err != nil {
		t.Fatal(err)
	}
	return [][]byte{mdf, frd, eformat, native, ferol, sample("baseband/sample_mwa.vdif")[:2*544]} // two VDIF frames: the second confirms the first
}

// FuzzSplit splits whatever the registry detects as a format that splits:
// Sources and Split never panic, fail only with the formats' errors, and
// every fragment Split hands on comes from a source Sources listed. A
// Framer's Frames (the records the emulator sends as they are) never
// panics either, fails only with the formats' errors, and, when Split
// succeeds too, frames as many fragments, of the sources Sources listed.
func FuzzSplit(f *testing.F) {
	seeds := splitSeeds(f)
	for _, s := range seeds {
		if _, ok := Detect(s[:min(len(s), format.HeadBytes)]).(format.Splitter); !ok {
			f.Fatalf("a seed of %d bytes is not detected as a format that splits", len(s))
		}
		f.Add(s)
	}
	known := func(err error) bool {
		var de *schemas.DecodeError
		return errors.As(err, &de) || errors.Is(err, schemas.ErrInconsistent) || errors.Is(err, lhcb.ErrUnknownSource)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sp, ok := Detect(b[:min(len(b), format.HeadBytes)]).(format.Splitter)
		if !ok {
			return
		}
		groups, err := sp.Sources(bytes.NewReader(b))
		if err != nil {
			if !known(err) {
				t.Fatalf("%s: Sources: %v (%T)", sp.Name(), err, err)
			}
			return
		}
		listed := map[uint32]bool{}
		for _, g := range groups {
			for _, s := range g.Sources {
				listed[s] = true
			}
		}
		split := 0
		err = sp.Split(bytes.NewReader(b), groups, func(p format.Piece) error {
			for _, fr := range p.Fragments {
				if !listed[fr.SourceID] {
					t.Fatalf("%s: a fragment of source %#x, which Sources did not list", sp.Name(), fr.SourceID)
				}
			}
			split += len(p.Fragments)
			return nil
		})
		if err != nil && !known(err) {
			t.Fatalf("%s: Split: %v (%T)", sp.Name(), err, err)
		}
		fm, ok := sp.(format.Framer)
		if !ok {
			return
		}
		framed := 0
		ferr := fm.Frames(b, func(r format.Frame) error {
			if r.Fragments < 1 || len(r.Bytes) == 0 {
				t.Fatalf("%s: a frame of %d fragments, %d bytes", sp.Name(), r.Fragments, len(r.Bytes))
			}
			if err == nil && !listed[r.Source] {
				t.Fatalf("%s: a frame of source %#x, which Sources did not list", sp.Name(), r.Source)
			}
			framed += r.Fragments
			return nil
		})
		if ferr != nil && !known(ferr) {
			t.Fatalf("%s: Frames: %v (%T)", sp.Name(), ferr, ferr)
		}
		if err == nil && ferr == nil && framed != split {
			t.Fatalf("%s: Frames framed %d fragments, Split split %d", sp.Name(), framed, split)
		}
	})
}
