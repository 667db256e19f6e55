package schemas

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

func payloads(n int) [][]byte {
	var ps [][]byte
	for i := 0; i < n; i++ {
		ps = append(ps, bytes.Repeat([]byte{byte(i + 1)}, i*3+1))
	}
	return ps
}

func TestMFPRoundTrip(t *testing.T) {
	for _, align := range []uint8{0, 2, 3, 12} {
		t.Run(fmt.Sprint("align", align), func(t *testing.T) {
			ps := payloads(10)
			b := AppendMFP(nil, 1023, 5000, FlagTruncated, align, ps, nil)
			sizes := make([]int, len(ps))
			for i, p := range ps {
				sizes[i] = len(p)
			}
			if len(b) != MFPLen(sizes, align) {
				t.Fatalf("encoded %d bytes, MFPLen %d", len(b), MFPLen(sizes, align))
			}
			p, n, err := DecodeMFP(append(b, 1, 2, 3))
			if err != nil {
				t.Fatal(err)
			}
			if n != len(b) || p.N != 10 || p.SourceID != 1023 || p.FirstEventID != 5000 || p.Flags != FlagTruncated || p.Align != align {
				t.Fatalf("header %+v, %d bytes", p, n)
			}
			seen := 0
			p.Fragments(func(i int, ev uint64, crc uint32, pl []byte) bool {
				if ev != 5000+uint64(i) || !bytes.Equal(pl, ps[i]) || crc != Checksum(ps[i]) {
					t.Fatalf("fragment %d: event %d, %d bytes, crc %08x", i, ev, len(pl), crc)
				}
				if align > 0 && (cap(pl) != len(pl)) {
					t.Fatalf("payload %d can be appended into padding", i)
				}
				seen++
				return true
			})
			if seen != 10 {
				t.Fatalf("iterated %d fragments, want 10", seen)
			}
		})
	}
}

func TestMFPInjectedCRC(t *testing.T) {
	ps := payloads(3)
	b := AppendMFP(nil, 1, 1, 0, 0, ps, []uint32{Checksum(ps[0]), 0, Checksum(ps[2])})
	p, _, err := DecodeMFP(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.CRC(1) != 0 || p.CRC(0) != Checksum(ps[0]) {
		t.Fatal("injected CRCs not written as given")
	}
}

func TestMFPErrors(t *testing.T) {
	good := AppendMFP(nil, 9, 100, 0, 2, payloads(4), nil)
	mod := func(fn func(b []byte)) []byte { b := bytes.Clone(good); fn(b); return b }
	le := binary.LittleEndian
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"short header", good[:20], ErrTruncated, 0},
		{"magic", mod(func(b []byte) { b[3] = 0 }), ErrBadMagic, 0},
		{"version", mod(func(b []byte) { b[4] = 0 }), ErrBadVersion, 4},
		{"align", mod(func(b []byte) { b[5] = 13 }), ErrBadHeader, 5},
		{"n zero", mod(func(b []byte) { le.PutUint32(b[12:], 0) }), ErrBadHeader, 12},
		{"n huge", mod(func(b []byte) { le.PutUint32(b[12:], 1<<20) }), ErrBadHeader, 12},
		{"packet cut", good[:len(good)-4], ErrTruncated, 0},
		{"packet_size small", mod(func(b []byte) { le.PutUint32(b[24:], 40) }), ErrInconsistent, 24},
		{"size overflows", mod(func(b []byte) { le.PutUint32(b[32+4*2:], 0xFFFFFFF0) }), ErrSizeOverflow, 32 + 4*2},
		{"sizes short of packet", mod(func(b []byte) { le.PutUint32(b[32:], 0) }), ErrInconsistent, 24},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeMFP(c.b)
			wantDecodeErr(t, err, c.sentinel, c.off)
		})
	}
}

func FuzzDecodeMFP(f *testing.F) {
	f.Add(AppendMFP(nil, 1, 2, 0, 0, payloads(3), nil))
	f.Add(AppendMFP(nil, 1024, 1<<50, FlagEmpty, 3, [][]byte{{}, {1}, {}}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err := DecodeMFP(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		total := 0
		p.Fragments(func(i int, _ uint64, _ uint32, pl []byte) bool {
			total += len(pl)
			return true
		})
		if total > n {
			t.Fatalf("payloads %d bytes exceed packet %d", total, n)
		}
	})
}
