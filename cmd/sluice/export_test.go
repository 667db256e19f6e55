package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/internal/samples"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/storage"
)

// events maps event id -> source -> payload: the fragments of a stream.
type events map[uint64]map[uint32][]byte

func (e events) add(f *schemas.Fragment) {
	if e[f.EventID] == nil {
		e[f.EventID] = map[uint32][]byte{}
	}
	e[f.EventID][f.SourceID] = append([]byte{}, f.Payload...)
}

// diff reports the first difference between e and o, or "".
func (e events) diff(o events) string {
	if len(e) != len(o) {
		return fmt.Sprintf("%d events, want %d", len(o), len(e))
	}
	for id, srcs := range e {
		got := o[id]
		if len(got) != len(srcs) {
			return fmt.Sprintf("event %d: %d fragments, want %d", id, len(got), len(srcs))
		}
		for src, p := range srcs {
			if q, ok := got[src]; !ok || !bytes.Equal(p, q) {
				return fmt.Sprintf("event %d source %#x: %d bytes back, %d sent (or missing: %v)", id, src, len(q), len(p), !ok)
			}
		}
	}
	return ""
}

// split splits stream with sp and returns its fragments by event, and
// all of them in stream order with payloads of their own.
func split(t *testing.T, sp format.Splitter, stream []byte, groups []schemas.SourceGroup) (events, []schemas.Fragment) {
	t.Helper()
	out := events{}
	var all []schemas.Fragment
	err := sp.Split(bytes.NewReader(stream), groups, func(p format.Piece) error {
		for i := range p.Fragments {
			f := p.Fragments[i]
			out.add(&f)
			f.Payload = append([]byte{}, f.Payload...) // the builder holds it
			all = append(all, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, all
}

// exportSamples are the streams each export format is round-tripped
// with: the real samples where the repository has them, else streams
// written with the format package's own encoder. Tables are
// round-tripped with the MDF sample's events.
func exportSamples(t *testing.T) map[string][]byte {
	sample := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mdf := sample("lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	return map[string][]byte{
		"mdf": mdf, "arrow": mdf, "parquet": mdf,
		"vdif":    sample("baseband/sample.vdif"),
		"frd":     frdStream(t),
		"eformat": eformatStream(t),
		"ferol":   samples.Read(t, "cms/mol_run55.dat.gz"),
		"besiii":  sample("besiii/test_raw_data.raw"),
	}
}

// frdStream is six FRD events of versions 3 to 6 (v3/v4 with padding, one
// v6 with generated data), five FEDs each, one FED with a bad CRC-16.
func frdStream(t *testing.T) []byte {
	var out []byte
	for k := range 6 {
		var data []byte
		for j, id := range []uint16{700, 3, 1023, 10, 55} {
			payload := make([]byte, 8*(1+(j+k)%4))
			for i := range payload {
				payload[i] = byte(int(id) + i + k)
			}
			var err error
			if data, err = cms.AppendFED(data, &cms.FED{SourceID: id, LV1ID: uint32(k), BXID: uint16(100 + k), Payload: payload}); err != nil {
				t.Fatal(err)
			}
			if k == 2 && j == 1 {
				data[len(data)-8+3] ^= 0x40 // FED 3's stored CRC-16: the FED is flagged, its bytes kept
			}
		}
		e := cms.FRDEvent{Version: []uint16{3, 4, 5, 6, 6, 6}[k], Run: 362000, Lumi: uint32(1 + k/3), Event: uint64(5000 + k), Data: data}
		if e.Version <= 4 {
			e.Padding = 8
		}
		if k == 5 {
			e.Flags = cms.FRDFlagGenData
		}
		var err error
		if out, err = cms.AppendFRD(out, &e); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// eformatStream is four little-endian eformat full events of three ROBs
// (two sub-detectors), with Adler-32, CRC-16 and no checksums.
func eformatStream(t *testing.T) []byte {
	var out []byte
	for k := range 4 {
		var robs []atlas.ROB
		for j, src := range []uint32{0x110001, 0x110000, 0x420007} {
			rod := atlas.ROD{Version: atlas.RODVersion, SourceID: src, Run: 431000, L1ID: uint32(k), Data: []uint32{uint32(j), uint32(k), src}}
			robs = append(robs, atlas.ROB{Version: atlas.VersionV40, SourceID: src, Status: []uint32{0},
				ChecksumType: []atlas.ChecksumType{atlas.ChecksumAdler32, atlas.ChecksumCRC16CCITT, atlas.ChecksumNone}[j], Payload: rod.AppendWords(nil)})
		}
		e := atlas.FullEvent{Version: atlas.VersionV40, SourceID: 0x7c0000, ChecksumType: atlas.ChecksumAdler32, BCTimeSeconds: 1700000000 + uint32(k),
			GlobalID: uint64(90 + k), RunNumber: 431000, LumiBlock: 7, L1ID: uint32(k), StreamTags: []uint32{1, 2}, ROBs: robs}
		var err error
		if out, err = atlas.AppendFullEvent(out, &e, binary.LittleEndian); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStoreExportRoundTrip exports, in every format the registry offers,
// events split from a stream, built by the builder and stored, and reads
// the file back with the format's own reader: every fragment comes back
// byte for byte. Formats that restore their records (MDF, FRD, eformat)
// give back the original stream itself.
func TestStoreExportRoundTrip(t *testing.T) {
	samples := exportSamples(t)
	for _, e := range formats.Exporters() {
		name := e.ExportName()
		t.Run(name, func(t *testing.T) {
			stream, ok := samples[name]
			if !ok {
				t.Fatalf("no sample stream for export format %q: add one to exportSamples", name)
			}
			f := formats.Detect(stream[:min(len(stream), format.HeadBytes)])
			sp, ok := f.(format.Splitter)
			if !ok {
				t.Fatalf("sample detected as %v, which does not split", f)
			}
			groups, err := sp.Sources(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			want, frags := split(t, sp, stream, groups)
			dir := t.TempDir()
			storeBuilt(t, dir, groups, frags)

			out := filepath.Join(t.TempDir(), "export."+name)
			if _, err := run(t, "store", "export", "--path", dir, "--format", name, "--out", out); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var back events
			if j, joins := f.(format.Joiner); joins && j.ExportName() == name {
				// Joined back into the sample's own format: read it with
				// the format's splitter.
				// Not byte for byte: VDIF (frames of a thread interleave
				// differently) and BESIII (the store gives events in event
				// id order, the file has them in data block order; the
				// FILE_END record is written anew). Both are checked byte
				// for byte in their packages.
				if back, _ = split(t, sp, got, groups); name != "vdif" && name != "besiii" && !bytes.Equal(got, stream) {
					t.Errorf("the %s export (%d bytes) differs from the stream split (%d bytes)", name, len(got), len(stream))
				}
			} else {
				back = readTable(t, name, got)
			}
			if d := want.diff(back); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// storeBuilt builds frags (builder, groups) and puts every built event in
// the accepted stream of a new store in dir.
func storeBuilt(t *testing.T, dir string, groups []schemas.SourceGroup, frags []schemas.Fragment) {
	t.Helper()
	s, err := storage.Open(smallStore(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feed := func(ctx context.Context, b *builder.Builder) {
		for _, f := range frags {
			if err := b.AddFragment(ctx, f, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	stored := 0
	l := buildtest.RunBatches(t, builder.Config{Groups: groups, Run: 1, BatchEvents: 4}, feed, func(eb *schemas.EventBatch) {
		v := make([]schemas.Verdict, eb.Len())
		for i := range v {
			v[i] = schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1, Stage: "hlt1"}
		}
		if _, err := s.Put(storage.Accepted, eb, v, nil); err != nil {
			t.Error(err)
		}
		stored += eb.Len()
	})
	if !l.Balanced() || l.Discards() != 0 || stored == 0 || uint64(stored) != l.EventsBuilt {
		t.Fatalf("built %d events, stored %d; ledger %+v", l.EventsBuilt, stored, l)
	}
}

// readTable reads an Arrow IPC or Parquet export with arrow-go's readers
// and returns its events' fragments: every source of every row, a source
// that sent an empty fragment with an empty payload, as the split gave
// it.
func readTable(t *testing.T, name string, b []byte) events {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var recs []arrow.RecordBatch
	switch name {
	case "arrow":
		r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
	case "parquet":
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fr.Schema() // the stored Arrow schema, its metadata included
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Release()
		tr := array.NewTableReader(tbl, 1000)
		defer tr.Release()
		for tr.Next() {
			// The table's batches lack the schema's metadata (the event
			// schema version); the stored schema has it.
			recs = append(recs, array.NewRecordBatch(s, tr.RecordBatch().Columns(), tr.RecordBatch().NumRows()))
		}
	default:
		t.Fatalf("no table reader for %q", name)
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	out := events{}
	for _, rec := range recs {
		eb, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range eb.Len() {
			eb.EachFragment(i, func(src uint32, p []byte) bool {
				out.add(&schemas.Fragment{SourceID: src, EventID: eb.EventID(i), Payload: p})
				return true
			})
		}
	}
	return out
}

// TestStoreExportForeign: exporting events in a format they were not
// read from says so, naming the format, the run and the event, instead of
// a joiner's decode error.
func TestStoreExportForeign(t *testing.T) {
	mdf := exportSamples(t)["mdf"]
	sp := formats.Detect(mdf[:format.HeadBytes]).(format.Splitter)
	groups, err := sp.Sources(bytes.NewReader(mdf))
	if err != nil {
		t.Fatal(err)
	}
	_, frags := split(t, sp, mdf, groups)
	dir := t.TempDir()
	storeBuilt(t, dir, groups, frags)
	for _, c := range []struct{ export, name string }{
		{"eformat", "atlas-full-event"}, {"frd", "cms-frd"}, {"ferol", "cms-ferol"}, {"vdif", "vdif"}, {"besiii", "besiii-raw"},
	} {
		out := filepath.Join(t.TempDir(), "x."+c.export)
		_, err := run(t, "store", "export", "--path", dir, "--format", c.export, "--out", out)
		want := "these events are not " + c.name + " events: run 1 event "
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "export them in the format they were read from") {
			t.Errorf("--format %s of LHCb events: %v, want %q", c.export, err, want)
		}
	}
	// And LHCb's joiner on BESIII events.
	bes := exportSamples(t)["besiii"]
	sp = formats.Detect(bes[:format.HeadBytes]).(format.Splitter)
	if groups, err = sp.Sources(bytes.NewReader(bes)); err != nil {
		t.Fatal(err)
	}
	_, frags = split(t, sp, bes, groups)
	dir = t.TempDir()
	storeBuilt(t, dir, groups, frags)
	_, err = run(t, "store", "export", "--path", dir, "--format", "mdf", "--out", filepath.Join(t.TempDir(), "x.mdf"))
	if err == nil || !strings.Contains(err.Error(), "these events are not lhcb-mdf events: run 1 event 199781 has no fragment of source") {
		t.Errorf("--format mdf of BESIII events: %v", err)
	}
}

// TestStoreExportMEPHeaders: events built from MEP input (whose wrapper's
// MDF header has run 0 and trigger mask 0) are exported as MDF records
// whose headers carry each event's run, orbit and bunch from its ODIN bank
// and a trigger mask of its stored verdict (lhcb.TriggerMaskOf: the fired
// lines, then the decision).
func TestStoreExportMEPHeaders(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", "lhcb", "upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep"))
	if err != nil {
		t.Fatal(err)
	}
	sp := formats.Detect(b[:format.HeadBytes]).(format.Splitter)
	groups, err := sp.Sources(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, frags := split(t, sp, b, groups)
	dir := t.TempDir()
	storeBuilt(t, dir, groups, frags) // accepted, lines 1
	out := filepath.Join(t.TempDir(), "x.mdf")
	if _, err := run(t, "store", "export", "--path", dir, "--format", "mdf", "--out", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rd := lhcb.NewReader(bytes.NewReader(got))
	n := 0
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		banks, err := lhcb.AppendBanks(nil, rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		var odin *lhcb.ODIN
		for _, bk := range banks {
			if bk.Type == lhcb.BankTypeODIN {
				o, err := lhcb.DecodeODIN(bk.Version, bk.Data)
				if err != nil {
					t.Fatal(err)
				}
				odin = &o
			}
		}
		h := rec.Header
		if odin == nil || odin.Run == 0 || h.Run != odin.Run || h.Orbit != odin.Orbit || h.Bunch != uint32(odin.BunchID) {
			t.Fatalf("record %d: header run %d orbit %d bunch %d, ODIN %+v", n, h.Run, h.Orbit, h.Bunch, odin)
		}
		want := lhcb.TriggerMaskOf(schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1})
		if h.TriggerMask != want || want != [4]uint32{1, 0, 1, 0} {
			t.Fatalf("record %d: trigger mask %x, want %x", n, h.TriggerMask, want)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("%d records exported, want the MEP's 10 events", n)
	}
}
