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

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
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
			GlobalID: uint64(10 + i), RunNumber: 431000, ROBs: []atlas.ROB{rob(t, 0x110000, atlas.ChecksumCRC16CCITT), rob(t, 0x420000, atlas.ChecksumNone)}}
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

func head(b []byte) []byte { return b[:min(len(b), format.HeadBytes)] }

// detect is the name of the format the registry finds for b, "" for none.
func detect(b []byte) string {
	if f := formats.Detect(head(b)); f != nil {
		return f.Name()
	}
	return ""
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"fragments", fragments(t), "sluice-fragment"},
		{"mfp", mfps(t), "sluice-mfp"},
		{"frd with file header", frdFile(t, &cms.FRDFileHeader{Version: 1}), "cms-frd"},
		{"frd without file header", frdFile(t, nil), "cms-frd"},
		{"frd event longer than head", func() []byte {
			b, _ := cms.AppendFRD(nil, &cms.FRDEvent{Version: 3, Data: fed(t, 1, format.HeadBytes/8)})
			return b
		}(), "cms-frd"},
		{"eformat little-endian", atlasFile(t, binary.LittleEndian), "atlas-full-event"},
		{"eformat byte-swapped", atlasFile(t, binary.BigEndian), "atlas-full-event"},
		{"eformat ROBs", robFile(t), "atlas-rob"},
		{"zeros", make([]byte, 4096), ""},
		{"text", []byte("RAW_ is not enough, and this is just a line of text\n"), ""},
		{"empty", nil, ""},
		{"frd-like version word, no FED", append([]byte{3, 0, 0, 0}, make([]byte, 60)...), ""},
	}
	for _, c := range cases {
		if got := detect(c.b); got != c.want {
			t.Errorf("%s: Detect = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDetectThirdParty(t *testing.T) {
	for rel, want := range map[string]string{
		"lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf": "lhcb-mdf",
		"lhcb/upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep":     "lhcb-mep",
		"baseband/sample.vdif":     "vdif",
		"baseband/sample_mwa.vdif": "vdif",
		"baseband/sample.m5b":      "mark5b",
	} {
		t.Run(rel, func(t *testing.T) {
			if got := detect(thirdParty(t, rel)); got != want {
				t.Fatalf("Detect = %q, want %q", got, want)
			}
		})
	}
}

func inspect(t *testing.T, b []byte, n int) *format.Report {
	t.Helper()
	rep, err := Inspect(bytes.NewReader(b), n)
	if err != nil {
		t.Fatal(err)
	}
	// Every report renders as text and as JSON.
	text := writeText(t, rep)
	if !strings.Contains(text, "format:") || !strings.Contains(text, rep.Format) {
		t.Fatalf("text report lacks the format:\n%s", text)
	}
	if m := jsonOf(t, rep); m["format"] != rep.Format || m["events"] != float64(rep.Events) {
		t.Fatalf("JSON report %v", m)
	}
	return rep
}

// rows returns the report's detail rows as JSON objects.
func rows(t *testing.T, rep *format.Report) []map[string]any {
	t.Helper()
	_, rs := detailRows(t, jsonOf(t, rep))
	return rs
}

// sources reads a JSON list of source ids.
func sources(v any) []uint32 {
	var out []uint32
	for _, x := range v.([]any) {
		out = append(out, uint32(x.(float64)))
	}
	return out
}

func TestInspectNative(t *testing.T) {
	rep := inspect(t, fragments(t), 2)
	rs := rows(t, rep)
	if rep.Format != "sluice-fragment" || rep.Records != 3 || rep.Events != 2 || !slices.Equal(rep.Sources, []uint32{3, 7}) ||
		rep.Checksums.Valid != 2 || rep.Checksums.Bad != 1 || rep.Detail.Of != "fragments" || len(rs) != 2 || rep.RecordBytes.Max != 39 {
		t.Fatalf("fragments: %+v", rep)
	}
	if d := rs[1]; d["kind"] != "fragment" || d["offset"] != 39.0 || d["record_bytes"] != 39.0 || d["event_id"] != 100.0 || d["n"] != 1.0 || !slices.Equal(sources(d["sources"]), []uint32{3}) {
		t.Fatalf("detail %+v", d)
	}
	rep = inspect(t, mfps(t), 10)
	if rep.Format != "sluice-mfp" || rep.Records != 2 || rep.Events != 2 || rep.NumSources != 2 || rep.Checksums.Valid != 3 || rep.Checksums.Bad != 1 {
		t.Fatalf("mfp: %+v", rep)
	}
	// Rows are packets: each names its source, first event id and
	// packing factor.
	rs = rows(t, rep)
	if rep.Detail.Of != "packets" || len(rs) != 2 {
		t.Fatalf("mfp detail %+v", rep.Detail)
	}
	for i, d := range rs {
		if d["kind"] != "packet" || d["event_id"] != 500.0 || d["n"] != 2.0 || !slices.Equal(sources(d["sources"]), []uint32{uint32(i + 1)}) || !strings.Contains(d["note"].(string), "event ids 500..501") {
			t.Fatalf("packet %d: %+v", i, d)
		}
	}
	if d := rs[1]; !strings.Contains(d["note"].(string), "flags truncated") || !strings.Contains(d["note"].(string), "1 fragment with a bad CRC-32C") || d["checksum_ok"] != false {
		t.Fatalf("mfp detail %+v", d)
	}
	text := squeeze(writeText(t, rep))
	for _, want := range []string{"# kind offset record bytes source (first) event id n CRC-32C note",
		"0 packet 0 ", " 1 500 2 ok event ids 500..501", "1 packet ", " 2 500 2 BAD event ids 500..501, flags truncated"} {
		if !strings.Contains(text, want) {
			t.Errorf("MFP text lacks %q:\n%s", want, text)
		}
	}
	// A mixed stream names both kinds.
	rep = inspect(t, append(fragments(t)[:39], mfps(t)...), 5)
	if rs := rows(t, rep); rep.Detail.Of != "fragments and packets" || rs[0]["kind"] != "fragment" || rs[1]["kind"] != "packet" {
		t.Fatalf("mixed detail %+v", rep.Detail)
	}
}

func TestInspectFRD(t *testing.T) {
	b := frdFile(t, &cms.FRDFileHeader{Version: 2, Run: 362000})
	// Corrupt FED 700 of the second event: its FED CRC-16 and the event's
	// crc32c both fail.
	second := 32 + 24 + 24 + 32
	b[second+24+24+10] ^= 0xFF
	rep := inspect(t, b, 5)
	c, ok := rep.Section.(*cms.Report)
	if !ok || rep.Format != "cms-frd" || rep.Events != 3 || c.FEDs != 5 || c.FEDCRCBad != 1 || rep.Checksums.Bad != 2 || rep.Checksums.Valid != 6 {
		t.Fatalf("report %+v, cms %+v", rep, c)
	}
	if !slices.Equal(rep.Sources, []uint32{10, 700}) || c.FileHeader == nil || c.FileHeader.EventCount != 3 || c.Versions[6] != 2 || c.Versions[5] != 1 ||
		!slices.Equal(c.Lumis, []uint32{4, 5}) || c.EventRange != [2]uint64{1, 3} {
		t.Fatalf("cms %+v", c)
	}
	d := rows(t, rep)[1]
	if rep.Detail.Of != "events" || d["kind"] != "event" || d["offset"] != float64(second) || d["checksum_ok"] != false || !slices.Equal(sources(d["sources"]), []uint32{10, 700}) || !strings.Contains(d["note"].(string), "bad CRC-16 in FEDs [700]") {
		t.Fatalf("detail %+v", d)
	}
	if h := jsonOf(t, rep)["cms"].(map[string]any)["file_header"].(map[string]any); h["version"] != 2.0 || h["event_count"] != 3.0 || h["run"] != 362000.0 {
		t.Fatalf("JSON file header %v", h)
	}
}

func TestInspectATLAS(t *testing.T) {
	for _, o := range []atlas.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		rep := inspect(t, atlasFile(t, o), 1)
		a, ok := rep.Section.(*atlas.Report)
		rs := rows(t, rep)
		if !ok || rep.Events != 2 || a.ROBs != 4 || !slices.Equal(rep.Sources, []uint32{0x110000, 0x420000}) ||
			rep.Checksums.Valid != 4 || rep.Checksums.Absent != 2 || a.GlobalIDRange != [2]uint64{10, 11} || rep.Detail.Of != "events" || len(rs) != 1 || !strings.HasSuffix(rs[0]["note"].(string), ", 2 ROBs") {
			t.Fatalf("%v: report %+v, atlas %+v", o, rep, a)
		}
		want := "little-endian"
		if o == binary.ByteOrder(binary.BigEndian) {
			want = "big-endian"
		}
		if a.ByteOrder != want {
			t.Fatalf("byte order %q, want %q", a.ByteOrder, want)
		}
		if !rep.Start.Equal(time.Unix(1700000000, 0)) || rep.End.Sub(*rep.Start) != time.Second {
			t.Fatalf("time range %v .. %v", rep.Start, rep.End)
		}
		if text := squeeze(writeText(t, rep)); !strings.Contains(text, "sources: 2: 0x110000,0x420000") || !strings.Contains(text, "global ids: 10 .. 11") {
			t.Fatalf("text:\n%s", text)
		}
	}
	rep := inspect(t, robFile(t), 1)
	if rep.Format != "atlas-rob" || rep.Events != 1 || rep.Checksums.Valid != 1 || rep.Detail.Of != "ROB fragments" || rows(t, rep)[0]["run"] != 431000.0 {
		t.Fatalf("ROB stream %+v", rep)
	}
	if text := writeText(t, rep); strings.Contains(text, "global ids") {
		t.Fatalf("a ROB stream has no global ids:\n%s", text)
	}
}

// writeText renders rep as text.
func writeText(t *testing.T, rep *format.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// squeeze collapses runs of spaces and tabs, so that tests do not depend on
// the column widths of the text report.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
	}
	return strings.Join(lines, "\n")
}

// jsonOf renders rep as JSON and decodes it into a generic map.
func jsonOf(t *testing.T, rep *format.Report) map[string]any {
	t.Helper()
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// detailRows returns .detail.of and .detail.rows of a JSON report: the
// same path for every format.
func detailRows(t *testing.T, m map[string]any) (string, []map[string]any) {
	t.Helper()
	d, ok := m["detail"].(map[string]any)
	if !ok {
		t.Fatalf("no detail object in %v", m)
	}
	var rows []map[string]any
	for _, r := range d["rows"].([]any) {
		rows = append(rows, r.(map[string]any))
	}
	return d["of"].(string), rows
}

func TestInspectThirdParty(t *testing.T) {
	t.Run("mdf", func(t *testing.T) {
		rep := inspect(t, thirdParty(t, "lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"), 3)
		if rep.Format != "lhcb-mdf" || rep.Events != 10 || rep.Checksums.Valid != 10 || rep.Section == nil || rep.Detail == nil || len(rows(t, rep)) != 3 {
			t.Fatalf("MDF %+v", rep)
		}
		// The record is 349460 bytes: a 48-byte header and 349412 of banks.
		text := squeeze(writeText(t, rep))
		for _, want := range []string{"bytes: 2010708 in 10 records",
			"sources: 1238 readout sources (bank type, source id); 590 distinct source ids",
			"# offset record bytes bank bytes event number run orbit bunch banks ODIN",
			"\n0 0 349460 349412 6001 6718861 ", "\n1 349460 118096 118048 6002 "} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "source ids: 590 distinct") {
			t.Errorf("unexplained source counts:\n%s", text)
		}
		m := jsonOf(t, rep)
		of, rows := detailRows(t, m)
		if of != "events" || len(rows) != 3 || rows[0]["record_bytes"] != 349460.0 || rows[0]["bank_bytes"] != 349412.0 || rows[1]["offset"] != 349460.0 {
			t.Fatalf("JSON detail %s %v", of, rows)
		}
		if l := m["lhcb"].(map[string]any); l["readout_sources"] != 1238.0 || l["distinct_source_ids"] != 590.0 || l["detail"] != nil {
			t.Fatalf("JSON lhcb section %v", l)
		}
	})
	t.Run("mep", func(t *testing.T) {
		rep := inspect(t, thirdParty(t, "lhcb/upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep"), 3)
		text := squeeze(writeText(t, rep))
		// One MEP record at offset 0 holds the ten events: each row names
		// the record and the event's place in it.
		for _, want := range []string{"bytes: 1978316 in 1 record\n",
			"# MEP offset MEP bytes event in MEP bank bytes (rebuilt) event number",
			"\n0 0 1978316 0 349572 6001 ", "\n1 0 1978316 1 118556 6002 ", "\n2 0 1978316 2 "} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		_, rows := detailRows(t, jsonOf(t, rep))
		for i, r := range rows {
			if r["index_in_record"] != float64(i) || r["offset"] != 0.0 || r["record_bytes"] != 1978316.0 {
				t.Fatalf("JSON row %d: %v", i, r)
			}
		}
	})
	t.Run("vdif", func(t *testing.T) {
		rep := inspect(t, thirdParty(t, "baseband/sample.vdif"), 2)
		// 16 frames: 8 threads × 2 (second, frame) events, as the
		// node builds them.
		if rep.Format != "vdif" || rep.Events != 2 || rep.Records != 16 || rep.NumSources != 8 || rep.Start == nil || rep.RecordBytes.Median != 5032 {
			t.Fatalf("VDIF %+v", rep)
		}
		text := squeeze(writeText(t, rep))
		for _, want := range []string{"bytes: 80512 in 16 frames", "time range: 2014-06-16T05:56:07Z .. 2014-06-16T05:56:07.000625Z",
			"frames/s per thread: 1600 (from the sample rate in the headers)",
			"events: 2 ((second, frame) events across 8 threads; 16 frames)",
			"signal: 1 channel × 2-bit real samples, 20000 samples per frame", "sample rate: 32 MS/s per channel",
			"VDIF version: 1, reference epoch 28 (2014-01-01)",
			"# offset frame bytes thread station epoch second frame time flags", "\n1 5032 5032 3 65532 14363767 0 2014-06-16T05:56:07Z"} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		m := jsonOf(t, rep)
		of, rows := detailRows(t, m)
		if bb := m["baseband"].(map[string]any); of != "frames" || len(rows) != 2 || rows[1]["frame_bytes"] != 5032.0 || bb["time_range_exact"] != true || bb["frame_rate_source"] != "header" ||
			bb["events"] != 2.0 || bb["frames"] != 16.0 || m["events"] != 2.0 {
			t.Fatalf("JSON %v", m)
		}
		if s, _ := m["baseband"].(map[string]any)["signal"].(map[string]any); s["channels"] != 1.0 || s["bits_per_sample"] != 2.0 || s["complex"] != false ||
			s["samples_per_frame"] != 20000.0 || s["sample_rate_hz"] != 32e6 || s["vdif_version"] != 1.0 || s["ref_epoch"] != 28.0 || s["ref_epoch_start"] != "2014-01-01" {
			t.Fatalf("JSON %v", m)
		}
	})
	t.Run("mwa", func(t *testing.T) {
		// Ten frames of one second, frame numbers 0..9, EDV 0: the frame
		// rate is only known to be at least 10/s, so no times are given.
		rep := inspect(t, thirdParty(t, "baseband/sample_mwa.vdif"), 2)
		if rep.Start != nil || rep.End != nil {
			t.Fatalf("time range %v .. %v from a lower-bound rate", rep.Start, rep.End)
		}
		text := squeeze(writeText(t, rep))
		want := "frames/s per thread: unknown (≥ 10 frames/s from 10 frames in 1 s); time range from frame numbers not shown"
		if !strings.Contains(text, want) || strings.Contains(text, "time range:") || strings.Contains(text, "lower-bound") ||
			!strings.Contains(text, "\n1 544 544 0 mw 8196585 1 -") {
			t.Fatalf("text should say %q, give no time range and no frame times:\n%s", want, text)
		}
		m := jsonOf(t, rep)
		bb := m["baseband"].(map[string]any)
		if bb["frame_rate_source"] != "lower-bound" || bb["time_range_exact"] != false || bb["seconds_spanned"] != 1.0 || m["start"] != nil || bb["start"] != nil {
			t.Fatalf("JSON %v", m)
		}
	})
	t.Run("mark5b", func(t *testing.T) {
		rep := inspect(t, thirdParty(t, "baseband/sample.m5b"), 2)
		if rep.Format != "mark5b" || rep.Events != 4 || rep.Checksums.Valid != 4 {
			t.Fatalf("Mark 5B %+v", rep)
		}
		text := squeeze(writeText(t, rep))
		for _, want := range []string{"bytes: 40064 in 4 frames", "# offset frame bytes second of day frame time code user flags",
			"\n1 10016 10016 19801 1 821/19801.0001 0xbead"} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		m := jsonOf(t, rep)
		of, rows := detailRows(t, m)
		if _, ok := m["vdif"]; ok || m["baseband"].(map[string]any)["format"] != "mark5b" || of != "frames" || len(rows) != 2 {
			t.Fatalf("JSON %v", m)
		}
	})
}

// TestDetailJSONPath: every format's rows are at .detail.rows, and no
// report keeps rows anywhere else.
func TestDetailJSONPath(t *testing.T) {
	for name, b := range map[string][]byte{"fragments": fragments(t), "mfp": mfps(t), "frd": frdFile(t, nil), "atlas": atlasFile(t, binary.LittleEndian)} {
		m := jsonOf(t, inspect(t, b, 1))
		if _, rows := detailRows(t, m); len(rows) != 1 || rows[0]["record_bytes"] == nil {
			t.Errorf("%s: rows %v", name, rows)
		}
		if _, ok := m["event_detail"]; ok {
			t.Errorf("%s: old event_detail key", name)
		}
	}
	if m := jsonOf(t, inspect(t, fragments(t), 0)); m["detail"] != nil {
		t.Errorf("detail without --events: %v", m["detail"])
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
	mem := memory.NewGoAllocator()
	s, recs := eventTable(f, mem, true)
	f.Add(arrowFile(f, mem, s, recs))
	f.Add(parquetFile(f, mem, s, recs))
	release(recs)
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Inspect(bytes.NewReader(b), 2)
		var de *schemas.DecodeError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("error %v (%T) is not a *schemas.DecodeError", err, err)
		}
		if rep != nil {
			if err := WriteText(&bytes.Buffer{}, rep); err != nil {
				t.Fatal(err)
			}
		}
		if err := WriteJSON(&bytes.Buffer{}, "fuzz", rep, err); err != nil {
			t.Fatal(err)
		}
	})
}

// TestInspectGzip: a gzip-compressed capture (the real CMS FEROL stream)
// is inspected as the stream inside it; a broken gzip stream says so.
func TestInspectGzip(t *testing.T) {
	b := thirdParty(t, "cms/mol_run55.dat.gz")
	rep, err := Inspect(bytes.NewReader(b), 0)
	if err != nil || rep.Format != "cms-ferol" || rep.Records != 300 || rep.Bytes != 369600 || rep.Checksums.Valid != 300 {
		t.Fatalf("%+v: %v", rep, err)
	}
	_, err = Inspect(bytes.NewReader(b[:len(b)/2]), 0)
	if err == nil {
		t.Fatal("half a gzip stream inspected without error")
	}
}
