package inspect

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// Samples written by the format packages' encoders.

func fragments(t testing.TB) []byte {
	var b []byte
	for i, src := range []uint32{7, 3, 7} {
		b = schemas.AppendFragment(b, &schemas.Fragment{SourceID: src, EventID: uint64(100 + i/2), Payload: []byte("payload")}, true)
	}
	b[len(b)-1] ^= 1 // the last fragment's payload no longer matches its CRC
	return b
}

func mfps(t testing.TB) []byte {
	b := schemas.AppendMFP(nil, 1, 500, 0, 3, [][]byte{[]byte("a"), []byte("bb")}, nil)
	// The second packet's CRCs are zero: right for its empty payload
	// (CRC-32C of nothing is 0), wrong for "c".
	return schemas.AppendMFP(b, 2, 500, schemas.FlagTruncated, 0, [][]byte{[]byte("c"), nil}, []uint32{0, 0})
}

func fed(t testing.TB, id uint16, words int) []byte {
	b, err := cms.AppendFED(nil, &cms.FED{SourceID: id, LV1ID: 1, Payload: make([]byte, 8*words)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func frdFile(t testing.TB, hdr *cms.FRDFileHeader) []byte {
	data := append(fed(t, 10, 1), fed(t, 700, 2)...)
	evs := []cms.FRDEvent{
		{Version: 6, Run: 362000, Lumi: 4, Event: 1, Data: data},
		{Version: 6, Run: 362000, Lumi: 4, Event: 2, Data: data},
		{Version: 5, Run: 362000, Lumi: 5, Event: 3, Data: fed(t, 10, 0)},
	}
	b, err := cms.AppendFRDFile(nil, hdr, evs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rob(t testing.TB, src uint32, ck atlas.ChecksumType) atlas.ROB {
	rod := atlas.ROD{Version: atlas.RODVersion, SourceID: src, Run: 431000, L1ID: 5, Data: []uint32{1, 2, 3}}
	return atlas.ROB{Version: atlas.VersionV40, SourceID: src, Status: []uint32{0}, ChecksumType: ck, Payload: rod.AppendWords(nil)}
}

func atlasFile(t testing.TB, o atlas.ByteOrder) []byte {
	var b []byte
	for i := range 2 {
		e := atlas.FullEvent{Version: atlas.VersionV40, ChecksumType: atlas.ChecksumAdler32, BCTimeSeconds: 1700000000 + uint32(i),
			GlobalID: uint32(10 + i), RunNumber: 431000, ROBs: []atlas.ROB{rob(t, 0x110000, atlas.ChecksumCRC16CCITT), rob(t, 0x420000, atlas.ChecksumNone)}}
		var err error
		if b, err = atlas.AppendFullEvent(b, &e, o); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func robFile(t testing.TB) []byte {
	r := rob(t, 0x7c0001, atlas.ChecksumAdler32)
	b, _ := atlas.AppendROB(nil, &r, binary.LittleEndian)
	return b
}

// thirdParty reads a sample copied in by the LHCb and VDIF helpers.
func thirdParty(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", rel))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("sample %s not in testdata/third_party (copied there by the LHCb/VDIF work)", rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func head(b []byte) []byte { return b[:min(len(b), HeadBytes)] }

func TestDetect(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want Format
	}{
		{"fragments", fragments(t), NativeFragment},
		{"mfp", mfps(t), NativeMFP},
		{"frd with file header", frdFile(t, &cms.FRDFileHeader{Version: 1}), CMSFRD},
		{"frd without file header", frdFile(t, nil), CMSFRD},
		{"frd event longer than head", func() []byte {
			b, _ := cms.AppendFRD(nil, &cms.FRDEvent{Version: 3, Data: fed(t, 1, HeadBytes/8)})
			return b
		}(), CMSFRD},
		{"eformat little-endian", atlasFile(t, binary.LittleEndian), ATLASFullEvent},
		{"eformat byte-swapped", atlasFile(t, binary.BigEndian), ATLASFullEvent},
		{"eformat ROBs", robFile(t), ATLASROB},
		{"zeros", make([]byte, 4096), Unknown},
		{"text", []byte("RAW_ is not enough, and this is just a line of text\n"), Unknown},
		{"empty", nil, Unknown},
		{"frd-like version word, no FED", append([]byte{3, 0, 0, 0}, make([]byte, 60)...), Unknown},
	}
	for _, c := range cases {
		if got := Detect(head(c.b)); got != c.want {
			t.Errorf("%s: Detect = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDetectThirdParty(t *testing.T) {
	for rel, want := range map[string]Format{
		"lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf": LHCbMDF,
		"lhcb/upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep":     LHCbMEP,
		"baseband/sample.vdif":     VDIF,
		"baseband/sample_mwa.vdif": VDIF,
		"baseband/sample.m5b":      Mark5B,
	} {
		t.Run(rel, func(t *testing.T) {
			if got := Detect(head(thirdParty(t, rel))); got != want {
				t.Fatalf("Detect = %q, want %q", got, want)
			}
		})
	}
}

func inspect(t *testing.T, b []byte, n int) *Report {
	t.Helper()
	rep, err := Inspect(bytes.NewReader(b), n)
	if err != nil {
		t.Fatal(err)
	}
	// Every report renders as text and as JSON.
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "format:") || !strings.Contains(text.String(), string(rep.Format)) {
		t.Fatalf("text report lacks the format:\n%s", text.String())
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.Format != rep.Format || back.Events != rep.Events {
		t.Fatalf("JSON round trip: %v", err)
	}
	return rep
}

func TestInspectNative(t *testing.T) {
	rep := inspect(t, fragments(t), 2)
	if rep.Records != 3 || rep.Events != 2 || !slices.Equal(rep.Sources, []uint32{3, 7}) ||
		rep.Checksums.Valid != 2 || rep.Checksums.Bad != 1 || len(rep.Detail) != 2 || rep.RecordBytes.Max != 39 {
		t.Fatalf("fragments: %+v", rep)
	}
	if d := rep.Detail[1]; d.Offset != 39 || d.EventID != 100 || !slices.Equal(d.Sources, []uint32{3}) {
		t.Fatalf("detail %+v", d)
	}
	rep = inspect(t, mfps(t), 10)
	if rep.Records != 2 || rep.Events != 2 || rep.NumSources != 2 || rep.Checksums.Valid != 3 || rep.Checksums.Bad != 1 {
		t.Fatalf("mfp: %+v", rep)
	}
	if !strings.Contains(rep.Detail[1].Note, "flags truncated") || rep.Detail[1].ChecksumOK {
		t.Fatalf("mfp detail %+v", rep.Detail[1])
	}
}

func TestInspectFRD(t *testing.T) {
	b := frdFile(t, &cms.FRDFileHeader{Version: 2, Run: 362000})
	// Corrupt FED 700 of the second event: its FED CRC-16 and the event's
	// crc32c both fail.
	second := 32 + 24 + 24 + 32
	b[second+24+24+10] ^= 0xFF
	rep := inspect(t, b, 5)
	c := rep.CMS
	if rep.Format != CMSFRD || rep.Events != 3 || c.FEDs != 5 || c.FEDCRCBad != 1 || rep.Checksums.Bad != 2 || rep.Checksums.Valid != 6 {
		t.Fatalf("report %+v, cms %+v", rep, c)
	}
	if !slices.Equal(rep.Sources, []uint32{10, 700}) || c.FileHeader == nil || c.FileHeader.EventCount != 3 || c.Versions[6] != 2 || c.Versions[5] != 1 ||
		!slices.Equal(c.Lumis, []uint32{4, 5}) || c.EventRange != [2]uint64{1, 3} {
		t.Fatalf("cms %+v", c)
	}
	d := rep.Detail[1]
	if d.Offset != int64(second) || d.ChecksumOK || !slices.Equal(d.Sources, []uint32{10, 700}) || !strings.Contains(d.Note, "bad CRC-16 in FEDs [700]") {
		t.Fatalf("detail %+v", d)
	}
}

func TestInspectATLAS(t *testing.T) {
	for _, o := range []atlas.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		rep := inspect(t, atlasFile(t, o), 1)
		a := rep.ATLAS
		if rep.Events != 2 || a.ROBs != 4 || !slices.Equal(rep.Sources, []uint32{0x110000, 0x420000}) ||
			rep.Checksums.Valid != 4 || rep.Checksums.Absent != 2 || a.GlobalIDRange != [2]uint32{10, 11} || len(rep.Detail) != 1 {
			t.Fatalf("%v: report %+v, atlas %+v", o, rep, a)
		}
		if want := orderName(o); a.ByteOrder != want {
			t.Fatalf("byte order %q, want %q", a.ByteOrder, want)
		}
		if !rep.Start.Equal(time.Unix(1700000000, 0)) || rep.End.Sub(*rep.Start) != time.Second {
			t.Fatalf("time range %v .. %v", rep.Start, rep.End)
		}
	}
	rep := inspect(t, robFile(t), 1)
	if rep.Format != ATLASROB || rep.Events != 1 || rep.Checksums.Valid != 1 || rep.Detail[0].Run != 431000 {
		t.Fatalf("ROB stream %+v", rep)
	}
}

func TestInspectThirdParty(t *testing.T) {
	mdf := inspect(t, thirdParty(t, "lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"), 3)
	if mdf.Format != LHCbMDF || mdf.Events != 10 || mdf.Checksums.Valid != 10 || mdf.LHCb == nil || len(mdf.LHCb.Detail) != 3 {
		t.Fatalf("MDF %+v", mdf)
	}
	v := inspect(t, thirdParty(t, "baseband/sample.vdif"), 2)
	if v.Format != VDIF || v.Events != 16 || v.NumSources != 8 || v.Start == nil || v.RecordBytes.Median != 5032 {
		t.Fatalf("VDIF %+v", v)
	}
	m := inspect(t, thirdParty(t, "baseband/sample.m5b"), 2)
	if m.Format != Mark5B || m.Events != 4 || m.Checksums.Valid != 4 {
		t.Fatalf("Mark 5B %+v", m)
	}
}

// TestInspectErrors: a damaged file yields the report so far and a
// *schemas.DecodeError naming the offset.
func TestInspectErrors(t *testing.T) {
	frag := fragments(t)
	frd := frdFile(t, nil)
	ev := atlasFile(t, binary.BigEndian)
	evLen := len(ev) / 2
	badROB := append([]byte(nil), ev...)
	binary.BigEndian.PutUint32(badROB[evLen+4*20+4:], 0xFFFF) // second event (20 header words), first ROB's size
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
		records  int
	}{
		{"fragment cut in its payload", frag[:39+35], schemas.ErrTruncated, 39, 1},
		{"fragment cut in its header", frag[:39+10], schemas.ErrTruncated, 39, 1},
		{"FRD event cut", frd[:len(frd)-3], schemas.ErrTruncated, int64(len(frd) - 40), 2}, // the last event is 40 bytes
		{"FRD bad FED marker", func() []byte {
			b := frdFile(t, &cms.FRDFileHeader{Version: 1})
			b[24+24+7] = 0 // first FED header of the first event
			return b
		}(), schemas.ErrBadMagic, 24 + 24 + 7, 0},
		{"eformat event cut", ev[:len(ev)-4], schemas.ErrTruncated, int64(evLen), 1},
		{"eformat size word too small", func() []byte {
			b := append([]byte(nil), ev...)
			binary.BigEndian.PutUint32(b[evLen+4:], 1)
			return b
		}(), schemas.ErrSizeOverflow, int64(evLen + 4), 1},
		{"eformat ROB past its event", badROB, schemas.ErrSizeOverflow, int64(evLen + 4*20 + 4), 1},
		{"FRD file header of another version", []byte("RAW_0009 and more bytes follow here"), schemas.ErrBadVersion, 4, 0},
		{"unknown", []byte("hello, world"), schemas.ErrBadMagic, 0, 0},
		{"empty", nil, schemas.ErrTruncated, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Inspect(bytes.NewReader(c.b), 0)
			var de *schemas.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, c.sentinel) || de.Offset != c.off {
				t.Fatalf("error %v, want %v at offset %d", err, c.sentinel, c.off)
			}
			if c.records > 0 && (rep == nil || rep.Records != c.records) {
				t.Fatalf("report before the error: %+v, want %d records", rep, c.records)
			}
		})
	}
}

func FuzzInspect(f *testing.F) {
	f.Add(fragments(f))
	f.Add(mfps(f))
	f.Add(frdFile(f, &cms.FRDFileHeader{Version: 2}))
	f.Add(frdFile(f, nil))
	f.Add(atlasFile(f, binary.BigEndian))
	f.Add(robFile(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Inspect(bytes.NewReader(b), 2)
		var de *schemas.DecodeError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("error %v (%T) is not a *schemas.DecodeError", err, err)
		}
		if rep != nil {
			if err := rep.WriteText(&bytes.Buffer{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
