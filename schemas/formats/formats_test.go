package formats

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-daq/sluice/schemas/format"
)

// TestRegistry: every format has a name and a sign, lookups find them, and
// no format takes a run of zeros or short random heads for its own with
// certainty (detection must not panic on them either).
func TestRegistry(t *testing.T) {
	// No count of formats here: a new format is its package and one line
	// in the registry, nothing else to edit.
	all := All()
	if len(all) == 0 {
		t.Fatal("no formats registered")
	}
	for _, f := range all {
		if f.Name() == "" || f.Sign() == "" {
			t.Errorf("%T: name %q, sign %q", f, f.Name(), f.Sign())
		}
		if Lookup(f.Name()) != f {
			t.Errorf("Lookup(%q) is not the registered format", f.Name())
		}
	}
	if f := Detect(make([]byte, format.HeadBytes)); f != nil {
		t.Errorf("zeros detected as %s", f.Name())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 64 {
		head := make([]byte, n)
		for i := range head {
			head[i] = byte(r.Uint32())
		}
		for _, f := range all {
			f.Detect(head)
		}
	}
}
