package cms

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

func FuzzDecodeFED(f *testing.F) {
	f.Add(mustFED(f, &FED{SourceID: 812, LV1ID: 1, Payload: payloadWords(812, 2)}))
	f.Add(mustFED(f, &FED{SourceID: 1, SlinkError: true, CRCModified: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fed, err := DecodeFED(b)
		decodetest.Check(t, err, len(b))
		if err == nil {
			// A valid fragment re-encodes to the same fields (reserved
			// bits are not kept) with a CRC-16 computed afresh over the
			// new bytes: valid, and unlike the stored one when reserved
			// bits were set or the stored one did not match (DecodeFED
			// leaves that to CRCValid).
			out, err := AppendFED(nil, &fed)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeFED(out)
			if err == nil && !again.CRCValid() {
				t.Fatalf("re-encoded %x has a bad CRC-16", out)
			}
			again.raw, fed.raw, again.CRC = nil, nil, fed.CRC
			if err != nil || !reflect.DeepEqual(again, fed) {
				t.Fatalf("re-encoded %+v, decoded %+v: %v", fed, again, err)
			}
		}
	})
}

func FuzzWalkFEDs(f *testing.F) {
	f.Add(fedBlock(f, 10, 700, 3))
	f.Add(fedBlock(f, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		end := len(b)
		err := WalkFEDs(b, func(off int, fed FED) bool {
			if off+fed.Size() != end {
				t.Fatalf("FED at %d of %d bytes does not end where the previous began (%d)", off, fed.Size(), end)
			}
			end = off
			return true
		})
		decodetest.Check(t, err, len(b))
		if err == nil && end != 0 {
			t.Fatalf("walk ended at %d without error", end)
		}
	})
}

func FuzzDecodeFRD(f *testing.F) {
	for _, e := range testEvents(f) {
		b, _ := AppendFRD(nil, &e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := DecodeFRD(b)
		decodetest.Check(t, err, len(b))
		if err == nil {
			if n > len(b) || n != e.EncodedLen() {
				t.Fatalf("consumed %d of %d, EncodedLen %d", n, len(b), e.EncodedLen())
			}
			frags, err := SplitFRD(nil, &e)
			decodetest.Check(t, err, len(b))
			for _, fr := range frags {
				if fr.EventID != e.Event {
					t.Fatalf("fragment of event %d in event %d", fr.EventID, e.Event)
				}
			}
		}
	})
}

func FuzzFRDFile(f *testing.F) {
	evs := testEvents(f)
	for _, h := range []*FRDFileHeader{nil, {Version: 1}, {Version: 2, Run: 7}} {
		b, _ := AppendFRDFile(nil, h, evs[2:])
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := NewFileReader(bytes.NewReader(b))
		decodetest.Check(t, err, len(b))
		if err != nil {
			return
		}
		for range 1000 {
			_, err := fr.Next()
			if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
				if err != io.EOF {
					decodetest.Check(t, err, len(b))
				}
				break
			}
			if fr.Offset() > int64(len(b)) {
				t.Fatalf("offset %d past the %d-byte stream", fr.Offset(), len(b))
			}
		}
	})
}

func FuzzFEROL(f *testing.F) {
	fed := mustFED(f, &FED{SourceID: 931, LV1ID: 1, Payload: payloadWords(931, 3)})
	one, _ := AppendFEROL(nil, 931, 1, fed)
	big, _ := AppendFEROL(nil, 5, 2, mustFED(f, &FED{SourceID: 5, LV1ID: 2, Payload: payloadWords(5, 600)}))
	f.Add(one)
	f.Add(append(bytes.Clone(one), big...))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := NewFEROLReader(bytes.NewReader(b))
		for {
			fed, err := fr.Next()
			if err == io.EOF {
				break
			}
			decodetest.Check(t, err, len(b))
			if err != nil {
				break
			}
			if fr.Offset() > int64(len(b)) || len(fed.Data) == 0 {
				t.Fatalf("offset %d of %d, %d data bytes", fr.Offset(), len(b), len(fed.Data))
			}
			if _, _, _, _, err := ferolFED(&fed); err != nil {
				decodetest.Check(t, err, len(b))
				break
			}
			// A fragment re-framed reads back the same.
			again, err := AppendFEROL(nil, fed.FEDID, fed.Event, fed.Data)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewFEROLReader(bytes.NewReader(again)).Next()
			if err != nil || !bytes.Equal(g.Data, fed.Data) || !g.Canonical {
				t.Fatalf("re-framed fragment reads %v", err)
			}
		}
		s, _, err := format.NewStream(bytes.NewReader(b))
		if err == nil {
			_, err = FEROLFormat.Inspect(s, 2)
			decodetest.Check(t, err, len(b))
		}
	})
}
