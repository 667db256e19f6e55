package e2e

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/gzfile"
	"github.com/sluice-daq/sluice/internal/samples"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/besiii"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
)

// fileEvents splits the file at path as the emulator does (the registry's
// format, its own sources) and returns its source groups as a node
// configuration's sources section, its fragments by event id and its
// event ids in file order.
func fileEvents(t *testing.T, path string) (string, map[uint64][]uint32, []uint64) {
	t.Helper()
	data, err := gzfile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := formats.Detect(data[:min(len(data), format.HeadBytes)]).(format.Splitter)
	if !ok {
		t.Fatalf("%s: no splitting format", path)
	}
	groups, err := sp.Sources(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&yaml, "  - {name: %s, sources: %q}\n", g.Name, schemas.FormatSourceList(g.Sources))
	}
	srcs := map[uint64][]uint32{}
	var ids []uint64
	err = sp.Split(bytes.NewReader(data), groups, func(p format.Piece) error {
		for _, f := range p.Fragments {
			if _, seen := srcs[f.EventID]; !seen {
				ids = append(ids, f.EventID)
			}
			srcs[f.EventID] = append(srcs[f.EventID], f.SourceID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return yaml.String(), srcs, ids
}

// storedEvents are the (event id, fragments) of `sluice store ls` of the
// deferred stream, in stored order.
func storedEvents(t *testing.T, store, run string) ([]uint64, []int) {
	t.Helper()
	out := runOK(t, "store", "ls", "--path", store, "--stream", "deferred", "--runs", run)
	var ids []uint64
	var frags []int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != run {
			continue // the header line
		}
		id, err1 := strconv.ParseUint(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil {
			t.Fatalf("store ls line %q", line)
		}
		ids, frags = append(ids, id), append(frags, n)
	}
	return ids, frags
}

// eformatSample writes 6 little-endian ATLAS full events of the given
// version (atlas.VersionV40 or VersionV50) with the package's writer:
// three ROBs each of three sub-detectors, every checksum type, payloads of
// varying length; v5.0 global ids over 32 bits.
func eformatSample(t *testing.T, version uint32) []byte {
	t.Helper()
	var b []byte
	for ev := range uint32(6) {
		e := atlas.FullEvent{
			Version: version, SourceID: 0x7c0000, Status: []uint32{0}, ChecksumType: atlas.ChecksumType(ev % 3),
			BCTimeSeconds: 1700000000 + ev, BCTimeNanoseconds: 25 * ev, GlobalID: 5000 + uint64(ev), RunType: 1, RunNumber: 431000,
			LumiBlock: 77, L1ID: 0x01000000 + ev, BCID: 100 + ev, L1TriggerType: 0x81,
			L1Info: []uint32{ev, 2}, L2Info: []uint32{}, EFInfo: []uint32{9}, StreamTags: []uint32{0x73747265},
		}
		if version == atlas.VersionV50 {
			e.GlobalID += 1 << 32
		}
		for i, src := range []uint32{0x110000, 0x420001, 0x7c0002} {
			data := make([]uint32, int(ev)+i)
			for k := range data {
				data[k] = 0xC0DE0000 | ev<<8 | uint32(k)
			}
			rod := atlas.ROD{Version: atlas.RODVersion, SourceID: src, Run: 431000, L1ID: e.L1ID, BCID: e.BCID,
				L1TriggerType: 0x81, Status: []uint32{0}, Data: data, StatusAfterData: i == 1}
			e.ROBs = append(e.ROBs, atlas.ROB{Version: version, SourceID: src, Status: []uint32{0},
				ChecksumType: atlas.ChecksumType((int(ev) + i) % 3), Payload: rod.AppendWords(nil)})
		}
		var err error
		if b, err = atlas.AppendFullEvent(b, &e, binary.LittleEndian); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// frdFromFEROL writes the FED fragments of a real FEROL capture as FRD
// events, as `sluice store export --format frd` writes the events built
// from it (version 6, the run given, one FED per event; TestFEROLReadout
// checks that export).
func frdFromFEROL(t *testing.T, capture string, run uint32) []byte {
	t.Helper()
	fr := cms.NewFEROLReader(bytes.NewReader(samples.Read(t, capture)))
	var b []byte
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return b
		}
		if err != nil {
			t.Fatal(err)
		}
		if b, err = cms.AppendFRD(b, &cms.FRDEvent{Version: cms.BareFRDVersion, Run: run, Event: uint64(f.Event), Data: f.Data}); err != nil {
			t.Fatal(err)
		}
	}
}

// besiiiInStoreOrder is the BESIII raw file b as the export writes the
// events stored from it: its file start records, its events (each data
// separator and full event) in ascending global id, the store's order (the
// real sample has them out of order: 199786 after 199788), and its
// FILE_END record with FILE_START's time.
func besiiiInStoreOrder(t *testing.T, b []byte) []byte {
	t.Helper()
	le := binary.LittleEndian
	off := 0
	for off+8 <= len(b) && !(le.Uint32(b[off:]) == 0x1234cccc && le.Uint32(b[off+4:]) == 4) {
		off += 4
	}
	out := slices.Clone(b[:off])
	type record struct {
		id uint32
		b  []byte
	}
	var recs []record
	for off+16 <= len(b) && le.Uint32(b[off:]) == 0x1234cccc {
		end := off + 16 + int(le.Uint32(b[off+12:]))
		e, _, err := besiii.DecodeEvent(b[off+16 : end])
		if err != nil {
			t.Fatalf("event at byte %d: %v", off, err)
		}
		recs = append(recs, record{e.GlobalID(), b[off:end]})
		off = end
	}
	slices.SortStableFunc(recs, func(x, y record) int { return cmp.Compare(x.id, y.id) })
	for _, r := range recs {
		out = append(out, r.b...)
	}
	end := slices.Clone(b[off:])
	if len(end) != 40 || le.Uint32(end) != 0x1234dddd {
		t.Fatalf("%d bytes after the events, want FILE_END", len(end))
	}
	le.PutUint32(end[12:], le.Uint32(b[20:]))
	return append(out, end...)
}

// TestEmulatorReplaysFormats: the emulator replays the formats sluice
// splits but had no replay of their own, from real files, into a real
// node, both as `sluice readout --from FILE` over TCP and as an embedded
// emulator (emulator.from) over shared memory: the 10 real BESIII events
// (eformat v3.0 in BESIII file records), ATLAS eformat v4.0 and v5.0 full
// events written by sluice's writer (no real file is public), and FRD
// events of a real CMS FEROL capture. The node builds every event of the
// file, complete, with the file's event ids and each event's sources;
// exported from the store in the file's format, the events give back the
// file byte for byte (BESIII: its events in ascending global id, the
// store's order, and FILE_END with FILE_START's time, see
// besiiiInStoreOrder).
func TestEmulatorReplaysFormats(t *testing.T) {
	dir := t.TempDir()
	v4, v5 := filepath.Join(dir, "v4.data"), filepath.Join(dir, "v5.data")
	frd := filepath.Join(dir, "run55.frd")
	for p, b := range map[string][]byte{v4: eformatSample(t, atlas.VersionV40), v5: eformatSample(t, atlas.VersionV50),
		frd: frdFromFEROL(t, "cms/mol_run55.dat.gz", 55)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	besiii := filepath.Join("testdata", "third_party", "besiii", "test_raw_data.raw")
	for i, c := range []struct {
		name, file, export string
		embedded           bool
		events             int
	}{
		{"besiii-readout", besiii, "besiii", false, 10},
		{"besiii-embedded", besiii, "besiii", true, 10},
		{"eformat-v4-readout", v4, "eformat", false, 6},
		{"eformat-v5-embedded", v5, "eformat", true, 6},
		{"frd-readout", frd, "frd", false, 300},
		{"frd-embedded", frd, "frd", true, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			abs := c.file
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(repo, abs)
			}
			sources, frags, ids := fileEvents(t, abs)
			if len(ids) != c.events {
				t.Fatalf("%d events in %s, want %d", len(ids), c.file, c.events)
			}
			input := "  - {uri: \"tcp://127.0.0.1:0\", expect_streams: 1}\n"
			if c.embedded {
				input = fmt.Sprintf("  - uri: shm://%s\n    emulator: {from: %q, rate: 2000, ring_size: 4MiB}\n", shmName(t), abs)
			}
			store := filepath.Join(t.TempDir(), "store")
			cfg := writeConfig(t, "inputs:\n{{IN}}sources:\n{{SRC}}builder: {timeout: 10s}\nstore: {path: {{STORE}}, min_free_bytes: 256MiB}\nhttp: {address: \"127.0.0.1:0\"}\nlog: {format: json}\n",
				map[string]string{"IN": input, "SRC": sources, "STORE": store})
			run := strconv.Itoa(201 + i)
			summary := filepath.Join(t.TempDir(), "run.json")
			node := start(t, "run", "--config", cfg, "--run", run, "--summary-json", summary)
			if !c.embedded {
				ro := start(t, "readout", "--from", c.file, "--to", "tcp://"+node.listenAddr(t), "--connections", "1", "--rate", "2000")
				if code := ro.wait(t, time.Minute); code != 0 {
					t.Fatalf("sluice readout: exit %d\n%s\n%s", code, ro.stdout.String(), ro.log())
				}
			}
			if code := node.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice run: exit %d\n%s", code, node.log())
			}
			nfrags := 0
			for _, s := range frags {
				nfrags += len(s)
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt != uint64(c.events) || l.EventsIncomplete != 0 || l.EventsStored != uint64(c.events) || l.FragmentsReceived != uint64(nfrags) {
				t.Fatalf("ledger %+v, want %d events of %d fragments, complete", l, c.events, nfrags)
			}
			got, n := storedEvents(t, store, run)
			for k, id := range got {
				if n[k] != len(frags[id]) {
					t.Fatalf("event %d stored with %d fragments, the file has %d", id, n[k], len(frags[id]))
				}
			}
			slices.Sort(got)
			want := slices.Clone(ids)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("stored event ids %v, want the file's %v", got, want)
			}

			out := filepath.Join(t.TempDir(), "out")
			runOK(t, "store", "export", "--path", store, "--stream", "deferred", "--runs", run, "--format", c.export, "--out", out)
			exported, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			orig, err := gzfile.ReadFile(abs)
			if err != nil {
				t.Fatal(err)
			}
			if c.export == "besiii" {
				orig = besiiiInStoreOrder(t, orig)
			}
			if !bytes.Equal(exported, orig) {
				at := 0
				for at < min(len(exported), len(orig)) && exported[at] == orig[at] {
					at++
				}
				t.Fatalf("--format %s export: %d bytes differ from the %d of %s from byte %d on", c.export, len(exported), len(orig), c.file, at)
			}
		})
	}
}
