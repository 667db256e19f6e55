package builder

import (
	"math/rand"
	"slices"
	"testing"
)

// selectKth must agree with sorting, on random, repeated, sorted and
// adversarial (huge outlier) inputs.
func TestSelectKth(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for i := range 20000 {
		n := 1 + rng.Intn(60)
		xs := make([]uint64, n)
		for j := range xs {
			switch i % 4 {
			case 0:
				xs[j] = rng.Uint64()
			case 1:
				xs[j] = uint64(rng.Intn(4))
			case 2:
				xs[j] = uint64(j)
			default:
				xs[j] = 500 + uint64(rng.Intn(10))
				if rng.Intn(10) == 0 {
					xs[j] = rng.Uint64()
				}
			}
		}
		k := rng.Intn(n)
		want := slices.Clone(xs)
		slices.Sort(want)
		if got := selectKth(slices.Clone(xs), k); got != want[k] {
			t.Fatalf("selectKth(%v, %d) = %d, want %d", xs, k, got, want[k])
		}
	}
}
