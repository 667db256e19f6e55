package benchratio

import (
	"testing"
	"time"
)

// TestCompareRatio checks the ratio on work of known relative cost: a
// subject that sleeps twice as long as its baseline must report about 0.5.
func TestCompareRatio(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		Compare(b,
			func(n int) { time.Sleep(time.Duration(n) * 2 * time.Millisecond) },
			func(n int) { time.Sleep(time.Duration(n) * time.Millisecond) })
	})
	r := res.Extra["ratio"]
	if r < 0.35 || r > 0.65 {
		t.Fatalf("ratio = %.3f, want about 0.5 (subject twice as slow as baseline)", r)
	}
	if res.Extra["baseline_ns/op"] < float64(time.Millisecond) {
		t.Fatalf("baseline_ns/op = %.0f, want >= 1e6", res.Extra["baseline_ns/op"])
	}
}
