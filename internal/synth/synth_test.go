package synth

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

func TestDeterministicAndDecodable(t *testing.T) {
	for _, k := range []Kind{KindECAL, KindHCAL, KindMuon, KindTracker} {
		a := Append(nil, k, 7, 1234, 42, 128)
		b := Append(nil, k, 7, 1234, 42, 128)
		if !bytes.Equal(a, b) || len(a) != 128 {
			t.Fatalf("%v: not deterministic or wrong size %d", k, len(a))
		}
		if c := Append(nil, k, 7, 1235, 42, 128); k != KindMuon && bytes.Equal(a, c) {
			t.Fatalf("%v: event 1235 has the same payload as 1234", k)
		}
		p, err := Decode(a)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != k || p.Source != 42 {
			t.Fatalf("decoded kind %v source %d", p.Kind, p.Source)
		}
		if k != KindMuon && p.Count != (128-HeaderSize)/RecordSize {
			t.Fatalf("%v: count %d, want every slot used", k, p.Count)
		}
	}
}

// TestSpectra checks the generator's physics over many events: the fraction
// of ECAL fragments with a hard tower (> 2 GeV) and of muon candidates above
// 1.4 GeV are near their design values, so trigger examples select a few
// percent, not nothing or everything.
func TestSpectra(t *testing.T) {
	const n = 20000
	hard, muons, hiPt := 0, 0, 0
	for ev := uint64(0); ev < n; ev++ {
		p, _ := Decode(Append(nil, KindECAL, 1, ev, 3, 256))
		for i := 0; i < p.Count; i++ {
			if _, et := p.Tower(i); et > 2000 {
				hard++
				break
			}
		}
		m, _ := Decode(Append(nil, KindMuon, 1, ev, 9, 64))
		for i := 0; i < m.Count; i++ {
			muons++
			if pt, q := m.Muon(i); pt > 1400 {
				hiPt++
			} else if q != 1 && q != -1 {
				t.Fatalf("charge %d", q)
			}
		}
	}
	if f := float64(hard) / n; f < 0.01 || f > 0.04 {
		t.Fatalf("hard-tower fraction %.4f, want about %.2f", f, hardFraction)
	}
	if muons == 0 {
		t.Fatal("no muon candidates generated")
	}
	if f := float64(hiPt) / float64(muons); f < 0.02 || f > 0.09 {
		t.Fatalf("fraction of muons above 1.4 GeV %.4f, want about exp(-1400/450)=0.045", f)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := Append(nil, KindECAL, 1, 1, 1, 64)
	cases := []struct {
		name string
		b    []byte
		want error
		off  int64
	}{
		{"truncated", good[:5], schemas.ErrTruncated, 0},
		{"version", append([]byte{1, 9}, good[2:]...), schemas.ErrBadVersion, 1},
		{"kind", append([]byte{0, 1}, good[2:]...), schemas.ErrBadHeader, 0},
		{"count", append(append([]byte{}, good[:2]...), append([]byte{0xFF, 0xFF}, good[4:]...)...), schemas.ErrSizeOverflow, 2},
	}
	for _, c := range cases {
		_, err := Decode(c.b)
		var de *schemas.DecodeError
		if !errors.Is(err, c.want) || !errors.As(err, &de) || de.Offset != c.off {
			t.Errorf("%s: got %v, want %v at offset %d", c.name, err, c.want, c.off)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, k := range []Kind{KindECAL, KindHCAL, KindMuon, KindTracker} {
		f.Add(Append(nil, k, 1, 5, 2, 96))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		for i := 0; i < p.Count; i++ {
			p.Tower(i)
			p.Muon(i)
			p.Hit(i)
		}
	})
}
