package atlas

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func FuzzDecodeFullEvent(f *testing.F) {
	for _, o := range orders {
		for _, ck := range []ChecksumType{ChecksumNone, ChecksumAdler32} {
			for _, e := range []FullEvent{testEvent(ck), testEventV50(ck)} {
				b, _ := AppendFullEvent(nil, &e, o)
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, o, err := DecodeFullEvent(b)
		decodetest.Check(t, err, len(b))
		if err == nil || errors.Is(err, schemas.ErrCRCMismatch) {
			if n > len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			for i := range e.ROBs {
				_, err := e.ROBs[i].ROD()
				decodetest.Check(t, err, len(b))
			}
			frags, err := SplitFullEvent(nil, &e)
			if err == nil && len(frags) != len(e.ROBs)+1 {
				t.Fatalf("%d fragments for %d ROBs and the header", len(frags), len(e.ROBs))
			}
			if err == nil && e.ChecksumOK && o != nil {
				if _, err := AppendFullEvent(nil, &e, o); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzDecodeROB(f *testing.F) {
	for _, o := range orders {
		for _, ck := range []ChecksumType{ChecksumNone, ChecksumCRC16CCITT, ChecksumAdler32} {
			r := testROB(0x420001, ck, 3)
			b, _ := AppendROB(nil, &r, o)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, _, err := DecodeROB(b)
		decodetest.Check(t, err, len(b))
		if err == nil {
			if n > len(b) || n != 4*r.Words() {
				t.Fatalf("consumed %d of %d, Words %d", n, len(b), r.Words())
			}
			_, err := r.ROD()
			decodetest.Check(t, err, len(b))
		}
	})
}

func FuzzDecodeROD(f *testing.F) {
	for _, after := range []bool{false, true} {
		r := testROD(7, 4, after)
		f.Add(AppendROD(nil, &r, binary.LittleEndian))
		f.Add(AppendROD(nil, &r, binary.BigEndian))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, o, err := DecodeROD(b)
		decodetest.Check(t, err, len(b))
		if err == nil {
			if again := AppendROD(nil, &r, o); string(again) != string(b) {
				t.Fatal("a valid ROD does not re-encode to its bytes")
			}
		}
	})
}
