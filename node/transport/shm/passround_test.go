package shm

import "testing"

// PassComesRound is the condition WritePlaced starts a new lap on.
func TestPassComesRound(t *testing.T) {
	const lap = 1 << 20
	for _, c := range []struct {
		pass uint64
		want bool
	}{{0, false}, {lap / 2, false}, {lap - lap/16 - 64, false}, {lap - lap/16, true}, {lap - 64, true}, {lap, true}, {lap + 64, false}} {
		if got := PassComesRound(c.pass, lap); got != c.want {
			t.Errorf("PassComesRound(%d, %d) = %v, want %v", c.pass, lap, got, c.want)
		}
	}
}
