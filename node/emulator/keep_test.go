package emulator

import (
	"testing"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

// TestFileSourceKeep: a readout unit's share of a file's sources keeps
// only their packets, the file's event ids and span, and the ODIN patches
// of the packets kept (so loop passes still renumber ODIN).
func TestFileSourceKeep(t *testing.T) {
	f, _, err := loadFile(sampleMDF, 10, 2, "file://x", transport.PayloadMFP)
	if err != nil {
		t.Fatal(err)
	}
	span, all := f.span, f.nsrc
	odin := uint32(lhcb.BankTypeODIN) << 16
	keep := []uint32{odin, lhcb.HeaderSource}
	if err := f.keep(keep); err != nil {
		t.Fatal(err)
	}
	if f.nsrc != 2 || f.span != span || all <= 2 {
		t.Fatalf("kept %d sources of %d, span %d (was %d)", f.nsrc, all, f.span, span)
	}
	for i, p := range f.packets {
		if p.source != odin && p.source != lhcb.HeaderSource {
			t.Fatalf("packet %d of source %#x kept", i, p.source)
		}
		if _, ok := f.odin[i]; ok != (p.source == odin) {
			t.Fatalf("packet %d (source %#x): ODIN patches %v", i, p.source, f.odin[i])
		}
	}
	if err := f.keep([]uint32{7}); err == nil {
		t.Fatal("keeping no source of the file: no error")
	}
}
