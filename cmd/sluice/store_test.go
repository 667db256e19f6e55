package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// storeRow is one event of a test store: its id, run and the payload of
// each source of the group, in the group's (ascending) order.
type storeRow struct {
	run      uint32
	id       uint64
	payloads [][]byte
}

// writeStore creates a store in dir with one source group and puts rows in
// stream with the given decision.
func writeStore(t *testing.T, dir string, group schemas.SourceGroup, stream storage.Stream, rows []storeRow, d schemas.Decision) {
	t.Helper()
	schema, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{group})
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	meta := make([]schemas.Verdict, len(rows))
	for k, r := range rows {
		rb.Field(0).(*array.Uint64Builder).Append(r.id)
		rb.Field(1).(*array.Uint32Builder).Append(r.run)
		rb.Field(2).(*array.Uint64Builder).Append(1_700_000_000_000_000_000 + r.id)
		rb.Field(3).(*array.Uint32Builder).Append(0)
		rb.Field(4).(*array.Uint32Builder).Append(uint32(len(r.payloads)))
		rb.Field(5).(*array.ListBuilder).Append(true)
		rb.Field(6).(*array.ListBuilder).Append(true)
		sizes := rb.Field(8).(*array.ListBuilder)
		sizes.Append(true)
		var all []byte
		for _, p := range r.payloads {
			all = append(all, p...)
			sizes.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
		}
		rb.Field(7).(*array.BinaryBuilder).Append(all)
		meta[k] = schemas.Verdict{Decision: d, Lines: 3, Stage: "hlt1", Reason: schemas.Reason{Text: "backlog"}}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.Open(smallStore(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(stream, eb, meta, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLineNames(map[string][]string{"hlt1": {"big", "scifi_busy"}}); err != nil {
		t.Fatal(err)
	}
}

// smallStore keeps test stores light: small memtable and value-log
// files (badger maps them at twice their size).
func smallStore(dir string) storage.Options {
	return storage.Options{Dir: dir, MinFreeBytes: 1, MemTableSize: 1 << 20, ValueLogFileSize: 1 << 20}
}

func smallRows(run uint32, first, n int) []storeRow {
	var out []storeRow
	for i := first; i < first+n; i++ {
		out = append(out, storeRow{run: run, id: uint64(i), payloads: [][]byte{bytes.Repeat([]byte{byte(i)}, 100+i), {byte(i)}}})
	}
	return out
}

func TestStoreStatAndLs(t *testing.T) {
	dir := t.TempDir()
	g := schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}
	writeStore(t, dir, g, storage.Deferred, append(smallRows(3, 0, 5), smallRows(4, 10, 3)...), schemas.DecisionDefer)
	out, err := run(t, "store", "stat", "--path", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"det[4-5]", "deferred", "3-4", "3/0 2023-11-14T22:13:20Z", "4/12 "} {
		if !strings.Contains(out, want) {
			t.Errorf("stat output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "store", "stat", "--path", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Streams []struct {
			Stream string
			Events int
			Runs   []uint32
		}
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("stat --json: %v\n%s", err, out)
	}
	// Keys are lower snake case, as everywhere else (not Go's "Accepted").
	if !strings.Contains(out, `"ledger": {
    "accepted": 0,
    "rejected": 0,
    "kept": 0
  }`) || strings.Contains(out, `"Accepted"`) {
		t.Fatalf("stat --json ledger keys:\n%s", out)
	}
	if len(js.Streams) != 2 || js.Streams[1].Stream != "deferred" || js.Streams[1].Events != 8 || len(js.Streams[1].Runs) != 2 {
		t.Fatalf("stat --json streams %+v", js.Streams)
	}
	out, err = run(t, "store", "ls", "--path", dir, "--stream", "deferred", "--runs", "3", "--events", "2-9", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "3  ") || !strings.Contains(lines[1], " 2 ") || !strings.Contains(lines[2], " 3 ") ||
		!strings.Contains(lines[1], "defer") || !strings.Contains(lines[1], "backlog") || !strings.Contains(lines[1], " ok ") ||
		!strings.Contains(lines[1], " big,scifi_busy  hlt1 ") {
		t.Fatalf("ls output (lines named as the stage declared them):\n%s", out)
	}
	// The default stream is accepted, as for export; here it is empty, and ls says so.
	if out, _ := run(t, "store", "ls", "--path", dir); len(strings.Split(strings.TrimSpace(out), "\n")) != 2 || !strings.Contains(out, "no events in the accepted stream") {
		t.Fatalf("ls of the empty accepted stream:\n%s", out)
	}
	if _, err := run(t, "store", "ls", "--path", dir, "--stream", "bogus"); err == nil || !strings.Contains(err.Error(), "--stream") {
		t.Fatalf("ls --stream bogus: %v", err)
	}
	if _, err := run(t, "store", "stat", "--path", filepath.Join(dir, "nope")); err == nil {
		t.Fatal("stat of a missing directory succeeded")
	}
	// A directory that is no store is called so, for every subcommand.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sub := range [][]string{{"stat"}, {"ls"}, {"export", "--format", "arrow", "--out", filepath.Join(t.TempDir(), "x.arrow")}} {
		_, err := run(t, append(append([]string{"store"}, sub...), "--path", other)...)
		if err == nil || !strings.Contains(err.Error(), "not a sluice store") || strings.Contains(err.Error(), "manifest found") {
			t.Errorf("store %s of a directory without a store: %v", sub[0], err)
		}
	}
}

func TestStoreExportArrowParquet(t *testing.T) {
	dir := t.TempDir()
	g := schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}
	writeStore(t, dir, g, storage.Accepted, smallRows(1, 0, 7), schemas.DecisionAccept)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	check := func(tbl arrow.Table) {
		t.Helper()
		if tbl.NumRows() != 4 {
			t.Fatalf("%d rows, want 4 (--events 2-5)", tbl.NumRows())
		}
		idx := tbl.Schema().FieldIndices("payload_det")
		if len(idx) != 1 || tbl.Schema().Field(idx[0]).Type.ID() != arrow.LARGE_BINARY {
			t.Fatalf("schema %s", tbl.Schema())
		}
		ids := tbl.Column(0).Data().Chunk(0).(*array.Uint64)
		pay := tbl.Column(idx[0]).Data().Chunk(0).(*array.LargeBinary)
		for i := 0; i < ids.Len(); i++ {
			id := ids.Value(i)
			want := append(bytes.Repeat([]byte{byte(id)}, 100+int(id)), byte(id))
			if id != uint64(2+i) || !bytes.Equal(pay.Value(i), want) {
				t.Fatalf("row %d: event %d, payload of %d bytes", i, id, len(pay.Value(i)))
			}
		}
		dec := tbl.Column(tbl.Schema().FieldIndices(schemas.ColDecision)[0]).Data().Chunk(0).(*array.Uint8)
		if dec.Value(0) != uint8(schemas.DecisionAccept) {
			t.Fatalf("decision column %v", dec)
		}
	}

	arrowOut := filepath.Join(t.TempDir(), "x.arrow")
	out, err := run(t, "store", "export", "--path", dir, "--format", "arrow", "--events", "2-5", "--out", arrowOut)
	if err != nil || !strings.Contains(out, "exported 4 accepted events") {
		t.Fatalf("export arrow: %v %s", err, out)
	}
	f, err := os.Open(arrowOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	tbl := array.NewTableFromRecords(r.Schema(), recs)
	check(tbl)
	tbl.Release()
	r.Close()

	pqOut := filepath.Join(t.TempDir(), "x.parquet")
	if _, err := run(t, "store", "export", "--path", dir, "--format", "parquet", "--events", "2-5", "--out", pqOut); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(pqOut)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	ptbl, err := pqarrow.ReadTable(context.Background(), pf, nil, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	check(ptbl)
	ptbl.Release()

	if _, err := run(t, "store", "export", "--path", dir, "--format", "csv", "--out", pqOut); err == nil {
		t.Fatal("export --format csv accepted")
	}
}

// TestStoreRecover copies a store while its writer holds it open (the
// image a crash leaves): stat refuses it and says --recover, and with
// --recover it finds the events.
func TestStoreRecover(t *testing.T) {
	dir := t.TempDir()
	g := schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}
	writeStore(t, dir, g, storage.Deferred, smallRows(3, 0, 5), schemas.DecisionDefer)
	s, err := storage.Open(smallStore(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A second batch, acknowledged (fsynced) but never closed.
	crashed := t.TempDir()
	putOpen(t, s, g, smallRows(3, 5, 4))
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = run(t, "store", "stat", "--path", crashed)
	if !errors.Is(err, storage.ErrNeedsRecovery) || !strings.Contains(err.Error(), "--recover") {
		t.Fatalf("stat of a crashed store: %v, want ErrNeedsRecovery naming --recover", err)
	}
	out, err := run(t, "store", "stat", "--path", crashed, "--recover", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"events": 9`) {
		t.Fatalf("stat --recover: want 9 deferred events:\n%s", out)
	}
}

// putOpen writes rows to the deferred stream of an open store.
func putOpen(t *testing.T, s *storage.Store, g schemas.SourceGroup, rows []storeRow) {
	t.Helper()
	tmp := t.TempDir()
	writeStore(t, tmp, g, storage.Deferred, rows, schemas.DecisionDefer)
	src, err := storage.Open(storage.Options{Dir: tmp, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, err := src.NewCursor(storage.Deferred, storage.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if _, err := s.Put(storage.Deferred, b.Events, b.Verdicts, nil); err != nil {
		t.Fatal(err)
	}
}

// The output file's name and --format must agree, and an export never
// replaces a file unless asked: once `--out x.parquet` without --format
// wrote Arrow IPC into it, and a second export overwrote the first silently.
func TestStoreExportFileNameAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	g := schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}
	writeStore(t, dir, g, storage.Accepted, smallRows(1, 0, 3), schemas.DecisionAccept)
	outDir := t.TempDir()

	pq := filepath.Join(outDir, "x.parquet")
	out, err := run(t, "store", "export", "--path", dir, "--out", pq)
	if err != nil || !strings.Contains(out, "(parquet)") {
		t.Fatalf("export to x.parquet without --format: %v %s", err, out)
	}
	if b, _ := os.ReadFile(pq); !bytes.HasPrefix(b, []byte("PAR1")) {
		t.Fatalf("x.parquet starts with %q, want the Parquet magic", b[:min(len(b), 6)])
	}

	mdf := filepath.Join(outDir, "y.mdf")
	if _, err := run(t, "store", "export", "--path", dir, "--format", "arrow", "--out", mdf); err == nil || !strings.Contains(err.Error(), "names the mdf format but --format is arrow") {
		t.Fatalf("--format arrow --out y.mdf: %v, want a refusal naming both", err)
	}
	if _, err := os.Stat(mdf); err == nil {
		t.Fatal("a refused export left y.mdf behind")
	}

	if _, err := run(t, "store", "export", "--path", dir, "--out", pq); err == nil || !strings.Contains(err.Error(), "exists; give --force") {
		t.Fatalf("second export to x.parquet: %v, want a refusal", err)
	}
	if _, err := run(t, "store", "export", "--path", dir, "--out", pq, "--force"); err != nil {
		t.Fatalf("second export with --force: %v", err)
	}
}

// TestStoreWhy: `store why` prints one event's provenance, as text and as
// JSON, and refuses an event the store does not hold.
func TestStoreWhy(t *testing.T) {
	dir := t.TempDir()
	g := schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}
	writeStore(t, dir, g, storage.Deferred, smallRows(1, 0, 4), schemas.DecisionDefer)
	out, err := run(t, "store", "why", "--path", dir, "1", "3")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run 1 event 3: deferred stream", "sources: 2 of 2 contributed; missing -; corrupt -", "verdict: defer by hlt1, lines big,scifi_busy, reason backlog", "pass 0 (online)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("store why: no %q in\n%s", want, out)
		}
	}
	out, err = run(t, "store", "why", "--path", dir, "1", "3", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var w storage.Why
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.EventID != 3 || w.Stream != "deferred" || len(w.Passes) != 1 || w.Passes[0].Steps[0].Reason != "backlog" {
		t.Fatalf("store why --json: %v %+v\n%s", err, w, out)
	}
	if _, err := run(t, "store", "why", "--path", dir, "1", "99"); !errors.Is(err, storage.ErrNoEvent) {
		t.Fatalf("store why of an event not stored: %v", err)
	}
}
