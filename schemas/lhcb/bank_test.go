package lhcb

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func TestBanksSample(t *testing.T) {
	data := readFile(t, mdfSample)
	byType := map[uint8]int{}
	keys := map[uint32]bool{}
	total := 0
	err := ForEachEvent(bytes.NewReader(data), func(ev *Event) error {
		banks, err := AppendBanks(nil, ev.Body)
		if err != nil {
			return err
		}
		// Re-encoding every bank gives the body back, padding included.
		var re []byte
		for _, b := range banks {
			byType[b.Type]++
			keys[b.Key()] = true
			if re, err = AppendBank(re, b); err != nil {
				return err
			}
		}
		if !bytes.Equal(re, ev.Body) {
			t.Errorf("event %d: re-encoded banks differ from the body", ev.Index)
		}
		total += len(banks)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint8]int{9: 3500, 13: 100, 16: 10, 21: 280, 22: 80, 32: 24, 33: 10, 63: 2080, 64: 2400, 66: 1800, 73: 2080}
	if total != sampleBanks || len(keys) != sampleSources || len(byType) != len(want) {
		t.Fatalf("%d banks of %d sources and %d types, want %d, %d, %d", total, len(keys), len(byType), sampleBanks, sampleSources, len(want))
	}
	for typ, n := range want {
		if byType[typ] != n {
			t.Errorf("type %d: %d banks, want %d", typ, byType[typ], n)
		}
	}
}

func TestBankErrors(t *testing.T) {
	data := readFile(t, mdfSample)
	body := data[48:sampleRecordOffsets[1]]
	// The first bank of the sample: type 9, version 3, source 1000, length 76.
	b, n, err := DecodeBank(body)
	if err != nil || b.Type != 9 || b.Version != 3 || b.SourceID != 1000 || len(b.Data) != 68 || n != 76 {
		t.Fatalf("first bank %+v (%d bytes), %v", b, n, err)
	}
	t.Run("wrong magic", func(t *testing.T) {
		bad := bytes.Clone(body)
		bad[76] = 0xCA // the second bank's magic
		_, err := AppendBanks(nil, bad)
		decodetest.Want(t, err, schemas.ErrBadMagic, 76)
	})
	t.Run("length below header", func(t *testing.T) {
		bad := bytes.Clone(body)
		bad[76+2], bad[76+3] = 4, 0
		_, err := AppendBanks(nil, bad)
		decodetest.Want(t, err, schemas.ErrBadHeader, 78)
	})
	t.Run("truncated payload", func(t *testing.T) {
		_, err := AppendBanks(nil, body[:76+20])
		decodetest.Want(t, err, schemas.ErrTruncated, 76+8)
	})
	t.Run("truncated header", func(t *testing.T) {
		_, err := AppendBanks(nil, body[:76+5])
		decodetest.Want(t, err, schemas.ErrTruncated, 76)
	})
	t.Run("payload too large to write", func(t *testing.T) {
		if _, err := AppendBank(nil, Bank{Data: make([]byte, MaxBankPayload+1)}); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestODINSample(t *testing.T) {
	data := readFile(t, mdfSample)
	var nums []uint64
	err := ForEachEvent(bytes.NewReader(data), func(ev *Event) error {
		banks, err := AppendBanks(nil, ev.Body)
		if err != nil {
			return err
		}
		for _, b := range banks {
			if b.Type != BankTypeODIN {
				continue
			}
			o, err := DecodeODIN(b.Version, b.Data)
			if err != nil {
				return err
			}
			if o.Run != sampleRun || o.Orbit != 0 || o.TCK != 0 || o.BunchID != 0 {
				t.Errorf("event %d: ODIN %+v", ev.Index, o)
			}
			// w8 is 0x88C20000 in the sample: bunch current 0x88, BX type 3, trigger type 2.
			if o.BunchCurrent != 0x88 || o.BXType != 3 || o.TriggerType != 2 {
				t.Errorf("event %d: word 8 decoded as %+v", ev.Index, o)
			}
			if got := AppendODIN(nil, &o); !bytes.Equal(got, b.Data) {
				t.Errorf("event %d: AppendODIN % x, want % x", ev.Index, got, b.Data)
			}
			nums = append(nums, o.EventNumber)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nums) != 10 {
		t.Fatalf("%d ODIN banks, want 10", len(nums))
	}
	for i, n := range nums {
		if n != 6001+uint64(i) {
			t.Fatalf("event numbers %v, want 6001..6010", nums)
		}
	}
}

func TestODINFields(t *testing.T) {
	o := ODIN{Run: 1, EventType: 0x8002, CalibrationStep: 3, Orbit: 77, EventNumber: 0x1_0000_0002, GPSTime: 1_700_000_000_000_000,
		DetectorStatus: 0xABCDEF, ErrorBits: 1, BunchID: 0xFFF, TAEWindow: 5, TriggerType: 7, CalibrationType: 2, Force: true, BXType: 1, BunchCurrent: 9, TCK: 0x1234}
	p := AppendODIN(nil, &o)
	if len(p) != ODINPayloadSize {
		t.Fatalf("payload %d bytes", len(p))
	}
	got, err := DecodeODIN(6, p)
	if err != nil || got != o {
		t.Fatalf("DecodeODIN = %+v, %v; want %+v", got, err, o)
	}
	_, err = DecodeODIN(5, p)
	decodetest.Want(t, err, schemas.ErrBadVersion, 0)
	_, err = DecodeODIN(6, p[:36])
	decodetest.Want(t, err, schemas.ErrTruncated, 0)
}
