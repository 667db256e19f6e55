package main

import (
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/farm/farmbench"
)

// TestMeasuredCrossover checks the crossover line says why there is none
// when a larger size below the queue has pull slower than push, though a
// smaller one has pull far ahead (a 32 KiB queue once read "measured none"
// beside a 16 KiB row at pull/push 3.15).
func TestMeasuredCrossover(t *testing.T) {
	pt := func(proto string, size int, evs float64) farmbench.Point {
		return farmbench.Point{Protocol: proto, Size: size, Queue: 32 << 10, EventsPerSec: evs}
	}
	r := &farmbench.Result{
		Points: []farmbench.Point{
			pt("push", 8<<10, 1000), pt("pull", 8<<10, 1000),
			pt("push", 16<<10, 100), pt("pull", 16<<10, 315),
			pt("push", 24<<10, 200), pt("pull", 24<<10, 180),
			pt("push", 32<<10, 10), pt("pull", 32<<10, 5), // fragment >= queue: not counted
		},
		Measured: map[int]int{32 << 10: 0, 64 << 10: 16 << 10},
	}
	got := measuredCrossover(r, 32<<10)
	for _, want := range []string{"none: pull/push 0.90 at 24 KiB", "pull/push 3.15 at the smaller 16 KiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("crossover of the 32 KiB queue %q lacks %q", got, want)
		}
	}
	if got := measuredCrossover(r, 64<<10); !strings.HasPrefix(got, "16 KiB (pull ≥ 1.1× push") {
		t.Errorf("crossover of the 64 KiB queue %q", got)
	}
	if got := measuredCrossover(r, 1<<10); got != "none: no fragment size below the queue limit was run" {
		t.Errorf("crossover of a queue with no points %q", got)
	}
}
