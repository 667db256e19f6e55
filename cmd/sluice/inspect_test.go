package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/storage"
)

// writeFile writes b to a file in a fresh temporary directory.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// squeeze collapses runs of spaces and tabs, so that tests do not depend on
// the column widths of the text report.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
}

// sampleFRD is an FRD file (header v2) of two events with FEDs 10 and 700.
func sampleFRD(t *testing.T) []byte {
	var data []byte
	for _, id := range []uint16{10, 700} {
		var err error
		if data, err = cms.AppendFED(data, &cms.FED{SourceID: id, LV1ID: 1, Payload: make([]byte, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := cms.AppendFRDFile(nil, &cms.FRDFileHeader{Version: 2, Run: 362000}, []cms.FRDEvent{
		{Version: 6, Run: 362000, Lumi: 1, Event: 41, Data: data},
		{Version: 4, Run: 362000, Lumi: 1, Event: 1 << 33, Data: data},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleEformat is one byte-swapped (big-endian) full event with two ROBs.
func sampleEformat(t *testing.T) []byte {
	var robs []atlas.ROB
	for _, src := range []uint32{0x110000, 0x420007} {
		rod := atlas.ROD{Version: atlas.RODVersion, SourceID: src, Run: 431000, Data: []uint32{1, 2}}
		robs = append(robs, atlas.ROB{Version: atlas.VersionV40, SourceID: src, ChecksumType: atlas.ChecksumCRC16CCITT, Payload: rod.AppendWords(nil)})
	}
	b, err := atlas.AppendFullEvent(nil, &atlas.FullEvent{Version: atlas.VersionV40, GlobalID: 77, RunNumber: 431000,
		BCTimeSeconds: 1700000000, ChecksumType: atlas.ChecksumAdler32, ROBs: robs}, binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleNative is three native fragments of two events from two sources.
func sampleNative() []byte {
	var b []byte
	for i, src := range []uint32{1, 2, 1} {
		b = schemas.AppendFragment(b, &schemas.Fragment{SourceID: src, EventID: uint64(5 + i/2), Payload: []byte("data")}, true)
	}
	return b
}

func TestInspectFormats(t *testing.T) {
	cases := []struct {
		name, file string
		b          []byte
		want       []string // lines the summary must hold
	}{
		{"cms", "a.dat", sampleFRD(t), []string{"format: cms-frd", "events: 2", "sources: 2: 10,700",
			"checksums: 6 valid, 0 bad", "RAW_0002: 2 events, run 362000", "event numbers: 41 .. 8589934592"}},
		{"atlas", "b.dat", sampleEformat(t), []string{"format: atlas-full-event", "byte order: big-endian", "sources: 2: 0x110000,0x420007",
			"checksums: 3 valid, 0 bad", "time range: 2023-11-14T22:13:20Z"}},
		{"native", "c.dat", sampleNative(), []string{"format: sluice-fragment", "events: 2", "checksums: 3 valid, 0 bad"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, "inspect", writeFile(t, c.file, c.b), "--events", "2")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(squeeze(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(squeeze(out), "\n# kind offset record bytes ") {
				t.Errorf("no per-record detail with --events 2:\n%s", out)
			}
		})
	}
}

func TestInspectThirdPartySamples(t *testing.T) {
	for rel, want := range map[string]string{
		"lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf": "\n0 0 349460 349412 6001 ",
		"lhcb/upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep":     "bytes: 1978316 in 1 record\n",
		"baseband/sample.vdif":            "time range: 2014-06-16T05:56:07Z",
		"baseband/sample_mwa.vdif":        "frames/s per thread: unknown (≥ 10 frames/s from 10 frames in 1 s); time range from frame numbers not shown",
		"baseband/sample_mwa.vdif#signal": "signal: 2 channels × 8-bit complex samples, 128 samples per frame\nsample rate: unknown (the frame rate is a lower bound)\nVDIF version: 0, reference epoch 31 (2015-07-01)\n",
		"baseband/sample.m5b":             "checksums: 4 valid, 0 bad",
		"besiii/test_raw_data.raw":        "fragments: 80 sub-detector, 260 ROS, 420 ROB (0 with status bits set)\nruns: 91668\n",
	} {
		t.Run(rel, func(t *testing.T) {
			p := filepath.Join("..", "..", "testdata", "third_party", strings.Split(rel, "#")[0])
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				t.Skipf("sample %s not in testdata/third_party (copied there by the LHCb/VDIF work)", rel)
			}
			out, err := run(t, "inspect", p, "--events", "1")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(squeeze(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}

func TestInspectJSON(t *testing.T) {
	p := writeFile(t, "frd", sampleFRD(t))
	out, err := run(t, "inspect", p, "--json", "--events", "1")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		File    string   `json:"file"`
		Format  string   `json:"format"`
		Events  int      `json:"events"`
		Sources []uint32 `json:"sources"`
		Detail  struct {
			Of   string `json:"of"`
			Rows []struct {
				Kind    string `json:"kind"`
				EventID uint64 `json:"event_id"`
				Bytes   int    `json:"record_bytes"`
			} `json:"rows"`
		} `json:"detail"`
		CMS struct {
			FEDs int `json:"feds"`
		} `json:"cms"`
		Error any `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if got.File != p || got.Format != "cms-frd" || got.Events != 2 || len(got.Sources) != 2 || got.Detail.Of != "events" || len(got.Detail.Rows) != 1 ||
		got.Detail.Rows[0].Kind != "event" || got.Detail.Rows[0].EventID != 41 || got.Detail.Rows[0].Bytes != 24+64 || got.CMS.FEDs != 4 || got.Error != nil {
		t.Fatalf("JSON report %+v", got)
	}
}

// TestInspectTruncated: a cut file is summarised up to the damage and the
// command fails naming the offset and what was expected.
func TestInspectTruncated(t *testing.T) {
	b := sampleFRD(t)
	second := 32 + 24 + 64 // file header, first event (v6 header, 2 FEDs of 32 bytes)
	p := writeFile(t, "cut.frd", b[:len(b)-5])
	out, err := run(t, "inspect", p)
	var de *schemas.DecodeError
	if !errors.As(err, &de) || !errors.Is(err, schemas.ErrTruncated) || de.Offset != int64(second) {
		t.Fatalf("error %v, want truncated at offset %d", err, second)
	}
	if !strings.Contains(err.Error(), "byte offset 120") || !strings.Contains(err.Error(), "needs 96 bytes") {
		t.Fatalf("error %q does not say where and what was expected", err)
	}
	if !strings.Contains(squeeze(out), "events: 1") {
		t.Fatalf("no summary of the event before the damage:\n%s", out)
	}
	out, err = run(t, "inspect", p, "--json")
	var got struct {
		Events int `json:"events"`
		Error  struct {
			Offset int64  `json:"offset"`
			Kind   string `json:"kind"`
		} `json:"error"`
	}
	if err == nil || json.Unmarshal([]byte(out), &got) != nil || got.Events != 1 || got.Error.Offset != int64(second) || got.Error.Kind != "truncated" {
		t.Fatalf("--json on a cut file: %v\n%s", err, out)
	}
	// An unknown format fails at offset 0.
	_, err = run(t, "inspect", writeFile(t, "x", []byte("just some text that is no data format")))
	if !errors.As(err, &de) || !errors.Is(err, schemas.ErrBadMagic) || de.Offset != 0 {
		t.Fatalf("unknown format: %v", err)
	}
}

// TestInspectMFP: the rows of a file of multi-fragment packets are
// packets, each with its source, first event id and packing factor.
func TestInspectMFP(t *testing.T) {
	b := schemas.AppendMFP(nil, 3, 900, 0, 0, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, nil)
	b = schemas.AppendMFP(b, 4, 903, 0, 0, [][]byte{[]byte("d"), []byte("e")}, nil)
	out, err := run(t, "inspect", writeFile(t, "p.mfp", b), "--events", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := squeeze(out)
	for _, w := range []string{"format: sluice-mfp", "in 2 records", "events: 5", "# kind offset record bytes source (first) event id n CRC-32C note",
		"0 packet 0 ", " 3 900 3 ok event ids 900..902", "1 packet ", " 4 903 2 ok event ids 903..904"} {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(s, "event id 0") {
		t.Errorf("a row claims event id 0:\n%s", out)
	}
}

// TestInspectStoreExports: the Arrow IPC and Parquet files `sluice store
// export` writes are recognised and summarised as event tables.
func TestInspectStoreExports(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}, storage.Accepted, smallRows(1, 0, 7), schemas.DecisionAccept)
	for _, c := range []struct{ format, unit string }{{"arrow", "record batch"}, {"parquet", "row group"}} {
		t.Run(c.format, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "events."+c.format)
			if out, err := run(t, "store", "export", "--path", dir, "--format", c.format, "--out", p); err != nil {
				t.Fatalf("export: %v\n%s", err, out)
			}
			out, err := run(t, "inspect", p, "--events", "2")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			s := squeeze(out)
			// Events 0..6 of run 1; event i carries 100+i bytes from
			// source 4 and 1 from source 5.
			for _, w := range []string{"events: 7", "sources: 2: 4-5", "rows: 7", "event table: yes, mode event", "source group det: 2 sources: 4-5",
				"runs: 1", "event ids: 0 .. 6", "payload bytes per event: min 101, median 104, max 107", "decisions: accept: 7",
				"\n1 1 1 2023-11-14T22:13:20.000000001Z 2 102 - - - accept"} {
				if !strings.Contains(s, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(s, " in 1 "+c.unit+"\n") && !strings.Contains(s, c.unit+"s\n") {
				t.Errorf("output does not count %ss:\n%s", c.unit, out)
			}
			out, err = run(t, "inspect", p, "--json")
			var got struct {
				Format string `json:"format"`
				Events int    `json:"events"`
				Table  struct {
					Rows   int   `json:"rows"`
					Groups []any `json:"source_groups"`
				} `json:"table"`
			}
			if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Events != 7 || got.Table.Rows != 7 || len(got.Table.Groups) != 1 {
				t.Fatalf("--json: %v\n%s", err, out)
			}
		})
	}
}

// TestInspectBadChecksumFails: an MDF file with one corrupt record is
// summarised (9 valid, 1 bad) and inspect exits non-zero, naming the count;
// --allow-bad accepts it.
func TestInspectBadChecksumFails(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", "lhcb", "MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"))
	if err != nil {
		t.Fatal(err)
	}
	b[1000] ^= 0xff // inside the first record's banks
	p := writeFile(t, "bad.mdf", b)
	out, err := run(t, "inspect", p)
	if err == nil || !strings.Contains(err.Error(), "1 of 10 ") || !strings.Contains(err.Error(), "--allow-bad") {
		t.Fatalf("inspect of a file with a bad record: %v\n%s", err, out)
	}
	if !strings.Contains(squeeze(out), "checksums: 9 valid, 1 bad") {
		t.Fatalf("no report before the failure:\n%s", out)
	}
	if out, err := run(t, "inspect", p, "--allow-bad"); err != nil {
		t.Fatalf("--allow-bad: %v\n%s", err, out)
	}
	if _, err := run(t, "inspect", p, "--json"); err == nil {
		t.Fatal("--json of a file with a bad record exits 0")
	}
}
