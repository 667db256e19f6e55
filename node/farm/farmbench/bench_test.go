package farmbench

import "testing"

// TestCrossover: the measured crossover is the smallest size below the
// queue limit from which pull keeps at least Margin times push's rate
// (and never less above it); a tie within the margin, a size where push
// wins again above, and sizes at or above the queue limit do not count.
func TestCrossover(t *testing.T) {
	pts := func(q int, rates ...[3]float64) (ps []Point) {
		for _, r := range rates {
			ps = append(ps, Point{Protocol: "push", Size: int(r[0]), Queue: q, EventsPerSec: r[1]},
				Point{Protocol: "pull", Size: int(r[0]), Queue: q, EventsPerSec: r[2]})
		}
		return
	}
	for _, c := range []struct {
		name string
		ps   []Point
		want int
	}{
		{"clear", pts(1<<14, [3]float64{256, 2000, 1200}, [3]float64{4096, 1300, 1000}, [3]float64{8192, 300, 800}), 8192},
		{"tie within the margin, then pull", pts(1<<14, [3]float64{2048, 1400, 1450}, [3]float64{4096, 1000, 1050}, [3]float64{8192, 300, 800}), 8192},
		{"push wins again above", pts(1<<14, [3]float64{4096, 300, 800}, [3]float64{8192, 900, 800}), 0},
		{"beyond the queue ignored", pts(1<<14, [3]float64{8192, 300, 800}, [3]float64{16384, 50, 20}), 8192},
		{"push everywhere", pts(1<<16, [3]float64{256, 2000, 1200}, [3]float64{32768, 335, 300}), 0},
		{"other queue's points ignored", append(pts(1<<14, [3]float64{8192, 300, 800}), pts(1<<16, [3]float64{4096, 10, 1000})...), 8192},
	} {
		if got := crossover(c.ps, 1<<14); c.name != "push everywhere" && got != c.want {
			t.Errorf("%s: crossover %d, want %d", c.name, got, c.want)
		}
		if c.name == "push everywhere" {
			if got := crossover(c.ps, 1<<16); got != c.want {
				t.Errorf("%s: crossover %d, want %d", c.name, got, c.want)
			}
		}
	}
	if p := Predict(16384, 4096, 4, 1); p != 5120 {
		t.Errorf("Predict(16 KiB queue, 4 KiB burst, 4 RUs, 1 credit) = %v, want 5120", p)
	}
}
