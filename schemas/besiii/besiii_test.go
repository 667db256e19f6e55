package besiii

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The real file's layout (testdata/third_party/besiii/README.md): 23 words
// of start records, 10 separators and events, a 10-word FILE_END.
const (
	headBytes = 4 * 23
	endBytes  = 4 * fileEndWords
)

func sample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", "besiii", "test_raw_data.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 118568 {
		t.Fatalf("sample: %d bytes", len(b))
	}
	return b
}

func inspect(t testing.TB, b []byte) (*format.Report, error) {
	t.Helper()
	s, head, err := format.NewStream(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if m := Format.Detect(head); m != format.Certain {
		t.Fatalf("detect: %v", m)
	}
	return Format.Inspect(s, 3)
}

// TestRealFile: the real BESIII file reads as its provenance says: 10
// events of run 91668, 80 sub-detector, 260 ROS and 420 ROB fragments, the
// start and end records decoded.
func TestRealFile(t *testing.T) {
	rep, err := inspect(t, sample(t))
	if err != nil {
		t.Fatal(err)
	}
	b := rep.Section.(*Report)
	if rep.Events != 10 || rep.Records != 10 || b.SubDetectors != 80 || b.ROS != 260 || b.ROBs != 420 || b.StatusSet != 0 {
		t.Fatalf("report %+v section %+v", rep, b)
	}
	if !slices.Equal(b.Runs, []uint32{91668}) || b.GlobalIDRange != [2]uint32{0x30c65, 0x30c72} || b.BlockRange != [2]uint32{0x30c68, 0x30c71} {
		t.Fatalf("runs %v ids %x blocks %x", b.Runs, b.GlobalIDRange, b.BlockRange)
	}
	h := b.File
	if h == nil || h.Run != 91668 || h.AppName != "SFO-1" || h.UserTag != "All" || h.FileNumber != 2 || dateTime(h.Date, h.Time) != "2026-04-08 12:03:40" {
		t.Fatalf("head %+v", h)
	}
	if e := b.End; e == nil || e.EventsInFile != 10 || e.EventsInRun != 10 {
		t.Fatalf("end %+v", e)
	}
	if rep.Bytes != int64(len(sample(t))-headBytes-endBytes) || rep.Checksums.Absent != 10 || rep.NumSources == 0 {
		t.Fatalf("bytes %d checksums %+v sources %d", rep.Bytes, rep.Checksums, rep.NumSources)
	}
	if rep.Detail == nil || len(rep.Detail.Rows.([]summary.Record)) != 3 {
		t.Fatalf("detail %+v", rep.Detail)
	}
	// eformat v3.0 has no checksums: each event says so, not "ok".
	var cells [][]any
	rep.Detail.Table(func(c ...any) { cells = append(cells, c) })
	for i, r := range rep.Detail.Rows.([]summary.Record) {
		if !r.ChecksumAbsent || len(cells) != 4 || cells[0][6] != "checksum" || cells[i+1][6] != "no checksum" {
			t.Fatalf("detail row %d %+v, table %v", i, r, cells)
		}
	}
}

// TestEventsReencode: every real event decodes and encodes back to its
// bytes.
func TestEventsReencode(t *testing.T) {
	n := 0
	err := each(bytes.NewReader(sample(t)), func(e *Fragment, _ *Head, _ uint32, off int64) error {
		orig := sample(t)[off : off+4*int64(e.Words())]
		if got := AppendFragment(nil, e); !bytes.Equal(got, orig) {
			t.Fatalf("event at %d re-encodes differently", off)
		}
		n++
		return nil
	})
	if err != nil || n != 10 {
		t.Fatalf("%d events: %v", n, err)
	}
}

// split splits the real file into native fragments on the wire, with
// its source groups.
func split(t testing.TB, b []byte) ([]schemas.SourceGroup, [][]byte) {
	t.Helper()
	s := Format.(format.Splitter)
	groups, err := s.Sources(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var wire [][]byte
	err = s.Split(bytes.NewReader(b), groups, func(p format.Piece) error {
		if p.Run != 91668 {
			t.Fatalf("piece of run %d", p.Run)
		}
		for i := range p.Fragments {
			wire = append(wire, schemas.AppendFragment(nil, &p.Fragments[i], false))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return groups, wire
}

// TestRoundTripBuilder: real file -> Split -> native fragments -> the real
// builder -> Joiner: each event's separator and event byte for byte; the
// exporter's file is the original but for FILE_END's time word (the
// export takes FILE_START's).
func TestRoundTripBuilder(t *testing.T) {
	b := sample(t)
	groups, wire := split(t, b)
	if len(wire) != 420+10 {
		t.Fatalf("%d fragments", len(wire))
	}
	out := map[uint64][]byte{}
	var exported bytes.Buffer
	fw, err := Format.(format.Exporter).NewWriter(&exported, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []uint64
	led := buildtest.RunBatches(t, builder.Config{Groups: groups, BatchEvents: 16}, buildtest.Fragments(t, wire), func(eb *schemas.EventBatch) {
		for i := range eb.Len() {
			if eb.Status(i) != 0 {
				t.Errorf("event %d built with status %b", eb.EventID(i), eb.Status(i))
			}
			j, err := Joiner{}.Join(nil, eb, i)
			if err != nil {
				t.Error(err)
			}
			out[eb.EventID(i)] = j
			order = append(order, eb.EventID(i))
		}
		if err := fw.Write(eb.Rec); err != nil {
			t.Error(err)
		}
	})
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if !led.Balanced() || led.EventsComplete != 10 {
		t.Fatalf("ledger %+v", led)
	}
	// The events in file order: the order they were built in.
	var joined []byte
	err = each(bytes.NewReader(b), func(e *Fragment, _ *Head, _ uint32, _ int64) error {
		joined = append(joined, out[uint64(e.GlobalID())]...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(joined, b[headBytes:len(b)-endBytes]) {
		t.Fatalf("joined events (%d bytes) differ from the file's (%d)", len(joined), len(b)-headBytes-endBytes)
	}
	want := slices.Clone(b)
	binary.LittleEndian.PutUint32(want[len(want)-endBytes+12:], binary.LittleEndian.Uint32(b[20:])) // FILE_START's time
	var inOrder []byte
	for _, id := range order {
		inOrder = append(inOrder, out[id]...)
	}
	if !bytes.Equal(inOrder, joined) {
		t.Fatal("events built out of file order")
	}
	if !bytes.Equal(exported.Bytes(), want) {
		t.Fatalf("exported file (%d bytes) differs from the original (%d) beyond FILE_END's time", exported.Len(), len(want))
	}
	// The export reads back as the same file.
	rep, err := inspect(t, exported.Bytes())
	if err != nil || rep.Events != 10 {
		t.Fatalf("export inspected: %d events: %v", rep.Events, err)
	}
}

// TestJoinForeign: events without the header fragment (not split from
// BESIII data) are refused as another format's, naming the event.
func TestJoinForeign(t *testing.T) {
	b := sample(t)
	groups, wire := split(t, b)
	var noHeader [][]byte
	for _, w := range wire {
		f, _, err := schemas.DecodeFragment(w)
		if err != nil {
			t.Fatal(err)
		}
		if f.SourceID != HeaderSource {
			noHeader = append(noHeader, w)
		}
	}
	var got error
	buildtest.Run(t, builder.Config{Groups: groups, BatchEvents: 16}, buildtest.Fragments(t, noHeader), func(eb *schemas.EventBatch, i int) {
		if _, err := (Joiner{}).Join(nil, eb, i); got == nil {
			got = err
		}
	})
	if !errors.Is(got, format.ErrForeignEvents) {
		t.Fatalf("join without header fragment: %v", got)
	}
}

// TestErrors: each corruption of the real file is reported with its
// sentinel at the byte where it is.
func TestErrors(t *testing.T) {
	b := sample(t)
	const sep = headBytes // the first data separator
	const ev = sep + 16   // the first event
	put := func(off int, v uint32) []byte {
		c := slices.Clone(b)
		binary.LittleEndian.PutUint32(c[off:], v)
		return c
	}
	cases := []struct {
		name     string
		in       []byte
		sentinel error
		off      int64
	}{
		{"separator marker", put(sep, 0x1234cccd), schemas.ErrBadMagic, sep},
		{"separator block size", put(sep+12, 0x2878), schemas.ErrInconsistent, sep + 12},
		{"event version", put(ev+12, 0x04000000), schemas.ErrBadVersion, ev + 12},
		{"sub-detector marker", put(ev+4*18, MarkerROS), schemas.ErrBadMagic, ev + 4*18},
		{"header size", put(ev+8, 19), schemas.ErrInconsistent, ev + 8},
		{"ROD trailer", put(0x1f0, 2), schemas.ErrInconsistent, 0x1f0},
		{"truncated", b[:sep+100], schemas.ErrTruncated, sep + 16},
		{"file end count", put(len(b)-endBytes+16, 9), schemas.ErrInconsistent, int64(len(b) - endBytes + 16)},
	}
	for _, c := range cases {
		_, err := inspect(t, c.in)
		decodetest.Want(t, err, c.sentinel, c.off)
		if c.name == "file end count" {
			continue
		}
		err = Format.(format.Splitter).Split(bytes.NewReader(c.in), nil, func(format.Piece) error { return nil })
		if !errors.Is(err, c.sentinel) {
			t.Fatalf("%s: split: %v", c.name, err)
		}
	}
	swapped := put(sep, swap(MarkerSeparator))
	if _, err := inspect(t, b[:headBytes]); err != nil {
		t.Fatalf("start records alone: %v", err)
	}
	_, err := Format.Inspect(mustStream(t, swapped), 0)
	decodetest.Want(t, err, schemas.ErrUnsupported, sep)
}

func mustStream(t testing.TB, b []byte) *format.Stream {
	s, _, err := format.NewStream(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
