package config

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/sluice-daq/sluice/builder"
)

// TestPerSourceState: what a builder of n sources keeps per source from
// its start (its tables by source, the parsed source lists), with ids in
// the dense index and beyond it, is at most half the nodeBytesPerSource
// the validation bounds charge: the other half is the garbage collector's
// room over the live heap and the node's own sets.
func TestPerSourceState(t *testing.T) {
	const n = 1 << 16
	for _, first := range []uint64{0, 1 << 24} {
		t.Run(fmt.Sprintf("from=%d", first), func(t *testing.T) {
			c, err := Parse([]byte(fmt.Sprintf("inputs: [{uri: \"tcp://127.0.0.1:0\"}]\nsources: [{name: a, sources: \"%d-%d\"}]\nbuilder: {max_open_events: 1, max_suspect_events: 1}\n", first, first+n-1)))
			if err != nil {
				t.Fatal(err)
			}
			heap := func() uint64 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			before := heap()
			groups, err := c.Groups()
			if err != nil {
				t.Fatal(err)
			}
			bc := c.Builder.Config
			bc.Groups, bc.LateWindow = groups, 1
			b, err := builder.New(bc)
			if err != nil {
				t.Fatal(err)
			}
			per := (heap() - before) / n
			_ = b.Close(context.Background())
			t.Logf("%d bytes a source", per)
			if per > nodeBytesPerSource/2 {
				t.Fatalf("the builder and the source lists keep %d bytes a source, more than half of nodeBytesPerSource (%d)", per, nodeBytesPerSource)
			}
		})
	}
}
