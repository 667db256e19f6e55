package builder

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// TestCopyHelpersTakeParts: a helper takes parts of an offered job on its
// own while the offering goroutine is busy with one, and the job ends only
// once every part is copied. Part 0 is held until another part is copied:
// whoever holds it, the other one must be a helper.
func TestCopyHelpersTakeParts(t *testing.T) {
	h := startCopyHelpers(1)
	defer h.close()
	const parts = 8
	var copied [parts]atomic.Bool
	var others atomic.Int32
	other := make(chan struct{})
	j := newCopyJob(parts, func(k int) {
		if k == 0 {
			select {
			case <-other:
			case <-time.After(30 * time.Second):
				t.Error("part 0 held for 30 s: no helper took a part")
			}
		} else if others.Add(1) == 1 {
			close(other)
		}
		copied[k].Store(true)
	})
	h.offer(j)
	if !j.work() {
		<-j.done
	}
	h.withdraw(j)
	for k := range copied {
		if !copied[k].Load() {
			t.Errorf("part %d not copied when the job ended", k)
		}
	}
}

// TestCopyHelpersStop: a builder's helpers end when it is closed.
func TestCopyHelpersStop(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	before := runtime.NumGoroutine()
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1}}}, Timeout: time.Hour, BatchLatency: time.Hour, BatchEvents: 4}, true)
	h.close()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before New", n, before)
	}
}
