package lhcb

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// Seeds for every decoder come from the real samples: small records and
// packets rebuilt from real banks and fragments, plus raw slices of the
// files (which exercise the truncation paths).

// sampleBanks returns the first n banks of the MDF sample's first event.
func sampleBanksN(t testing.TB, n int) []Bank {
	data := readFile(t, mdfSample)
	rec, _, err := DecodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	banks, err := AppendBanks(nil, rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return banks[:n]
}

func bankBody(t testing.TB, banks []Bank) []byte {
	var body []byte
	for _, b := range banks {
		var err error
		if body, err = AppendBank(body, b); err != nil {
			t.Fatal(err)
		}
	}
	return body
}

func FuzzDecodeRecord(f *testing.F) {
	data := readFile(f, mdfSample)
	body := bankBody(f, sampleBanksN(f, 12))
	for _, level := range []int{0, 1} {
		for _, v := range []uint8{0, 2, 3} {
			rec, err := AppendRecord(nil, Header{Version: v, DataType: DataTypeBanks, Run: sampleRun}, body, level)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(rec)
		}
	}
	f.Add(data[:600])
	mep := readFile(f, mepSample)
	f.Add(mep[:300])
	f.Fuzz(func(t *testing.T, b []byte) {
		// The streaming reader never panics and never loops: each record
		// takes at least a header's bytes.
		r := NewReader(bytes.NewReader(b))
		r.Checksums = ChecksumReport
		for i := 0; i <= len(b)/BaseHeaderSize; i++ {
			if _, err := r.Next(); err != nil && r.err != nil {
				break
			}
		}
		rec, n, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if n != int(rec.Header.Size) || n > len(b) {
			t.Fatalf("record of %d bytes, size %d, input %d", n, rec.Header.Size, len(b))
		}
		// What decodes re-encodes to a record with the same header and body.
		re, err := AppendRecord(nil, rec.Header, rec.Body, 0)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := DecodeRecord(re)
		if err != nil || !bytes.Equal(again.Body, rec.Body) || again.Header.Run != rec.Header.Run || again.Header.TriggerMask != rec.Header.TriggerMask {
			t.Fatalf("re-encoded record: %v", err)
		}
		// The streaming reader agrees.
		r = NewReader(bytes.NewReader(b[:n]))
		rrec, err := r.Next()
		if err != nil || !bytes.Equal(rrec.Body, rec.Body) {
			t.Fatalf("Reader: %v", err)
		}
	})
}

func FuzzBanks(f *testing.F) {
	body := bankBody(f, sampleBanksN(f, 30))
	f.Add(body)
	f.Add(body[:100])
	f.Add(bankBody(f, sampleBanksN(f, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		banks, err := AppendBanks(nil, b)
		if err != nil {
			return
		}
		total := 0
		keys := map[uint32]bool{}
		for i := range banks {
			total += banks[i].PaddedLen()
			keys[banks[i].Key()] = true
		}
		if total != len(b) {
			t.Fatalf("banks cover %d of %d bytes", total, len(b))
		}
		// Split and the header fragment round-trip whatever decodes.
		var sources []uint32
		for k := range keys {
			sources = append(sources, k)
		}
		sp, err := NewSplitter(sources)
		if err != nil {
			t.Fatal(err)
		}
		h := Header{Version: 3, DataType: DataTypeBanks}
		frags, err := sp.Split(nil, &h, b, 7)
		if err != nil {
			// Every bank decoded and every source is in the set: only a
			// malformed ODIN bank can fail the split.
			var de *schemas.DecodeError
			if !errors.As(err, &de) || de.Format != formatODIN {
				t.Fatalf("split: %v", err)
			}
			return
		}
		n := 0
		for _, fr := range frags[1:] {
			got, err := AppendBanks(nil, fr.Payload)
			if err != nil {
				t.Fatalf("fragment of %#x does not hold banks: %v", fr.SourceID, err)
			}
			n += len(got)
		}
		if n != len(banks) {
			t.Fatalf("fragments hold %d banks, event has %d", n, len(banks))
		}
	})
}

func FuzzODIN(f *testing.F) {
	for _, b := range sampleBanksN(f, 1238) {
		if b.Type == BankTypeODIN {
			f.Add(b.Version, b.Data)
		}
	}
	f.Fuzz(func(t *testing.T, version uint8, p []byte) {
		o, err := DecodeODIN(version, p)
		if err != nil {
			return
		}
		again, err := DecodeODIN(version, AppendODIN(nil, &o))
		if err != nil || again != o {
			t.Fatalf("ODIN round trip: %+v vs %+v, %v", again, o, err)
		}
	})
}

// smallMEP rebuilds a MEP of the first n blocks of the sample.
func smallMEP(t testing.TB, n int) []byte {
	_, body := mepBody(t)
	m, err := DecodeMEP(body)
	if err != nil {
		t.Fatal(err)
	}
	m.Blocks = m.Blocks[:n]
	b, err := AppendMEP(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeMEP(f *testing.F) {
	f.Add(smallMEP(f, 3))
	f.Add(smallMEP(f, 1))
	_, body := mepBody(f)
	f.Add(body[:700])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMEP(b)
		if err != nil {
			return
		}
		re, err := AppendMEP(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeMEP(re)
		if err != nil || len(m2.Blocks) != len(m.Blocks) {
			t.Fatalf("re-encoded MEP: %v", err)
		}
		for k := 0; k < m.PackingFactor; k++ {
			a, b := m.Event(k, nil), m2.Event(k, nil)
			for i := range a {
				if a[i].Type != b[i].Type || a[i].SourceID != b[i].SourceID || !bytes.Equal(a[i].Data, b[i].Data) {
					t.Fatalf("event %d bank %d differs after re-encoding", k, i)
				}
			}
		}
	})
}

func FuzzDecodePCIe40MFP(f *testing.F) {
	_, body := mepBody(f)
	m, err := DecodeMEP(body)
	if err != nil {
		f.Fatal(err)
	}
	for i, align := range []uint8{0, 2, 5} {
		blk := m.Blocks[i]
		p, err := AppendPCIe40MFP(nil, &PCIe40MFP{SourceID: blk.SourceID, Align: align, Version: uint8(blk.Version), Types: blk.Types, Fragments: blk.Fragments})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err := DecodePCIe40MFP(b)
		if err != nil {
			return
		}
		re, err := AppendPCIe40MFP(nil, &p)
		if err != nil || len(re) != n {
			t.Fatalf("re-encoded to %d bytes (decoded %d): %v", len(re), n, err)
		}
		p2, _, err := DecodePCIe40MFP(re)
		if err != nil || len(p2.Fragments) != len(p.Fragments) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range p.Fragments {
			if !bytes.Equal(p.Fragments[i], p2.Fragments[i]) || p.Types[i] != p2.Types[i] {
				t.Fatalf("fragment %d differs", i)
			}
		}
	})
}
