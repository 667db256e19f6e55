package besiii

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// bareStream is the real sample's ten eformat v3.0 events back to back,
// without the BESIII file records and data separators around them.
func bareStream(t testing.TB) []byte {
	t.Helper()
	b := sample(t)
	var out []byte
	err := each(bytes.NewReader(b), func(e *Fragment, _ *Head, _ uint32, off int64) error {
		out = append(out, b[off:off+4*int64(e.Words())]...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A bare stream of eformat v3.0 events is found from its first bytes
// (not atlas: that reads 4.0), inspected as such, split, built by the real
// builder and joined back byte for byte; the export writes no file
// records around it.
func TestBareStream(t *testing.T) {
	b := bareStream(t)
	// Certain here, and listed before atlas in schemas/formats.
	if got := Format.Detect(b[:min(len(b), format.HeadBytes)]); got != format.Certain {
		t.Fatalf("Detect = %v, want Certain", got)
	}
	rep, err := inspect(t, b)
	if err != nil {
		t.Fatal(err)
	}
	sec := rep.Section.(*Report)
	if rep.Events != 10 || sec.Bare != 10 || sec.File != nil || sec.End != nil || rep.Bytes != int64(len(b)) || sec.ROBs != 420 {
		t.Fatalf("report: %d events, %d bare, %d bytes (stream %d), %d ROBs, file %v, end %v", rep.Events, sec.Bare, rep.Bytes, len(b), sec.ROBs, sec.File, sec.End)
	}
	groups, wire := split(t, b)
	var joined, exported bytes.Buffer
	fw, err := Format.(format.Exporter).NewWriter(&exported, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	led := buildtest.RunBatches(t, builder.Config{Groups: groups, BatchEvents: 16}, buildtest.Fragments(t, wire), func(eb *schemas.EventBatch) {
		for i := range eb.Len() {
			j, err := Joiner{}.Join(nil, eb, i)
			if err != nil {
				t.Error(err)
			}
			joined.Write(j)
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
	if !bytes.Equal(joined.Bytes(), b) || !bytes.Equal(exported.Bytes(), b) {
		t.Fatalf("joined %d and exported %d bytes differ from the bare stream's %d", joined.Len(), exported.Len(), len(b))
	}
}

// A truncated bare event is an error with its offset, not a panic.
func TestBareStreamTruncated(t *testing.T) {
	b := bareStream(t)
	if _, err := inspect(t, b[:len(b)-3]); err == nil {
		t.Fatal("a truncated bare stream inspected without error")
	}
}
