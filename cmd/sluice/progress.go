package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sluice-daq/sluice/node"
)

// runProgress is `sluice run`'s live progress on a terminal: one line,
// redrawn each second, with the event rate, the throughput, the fraction
// of incomplete events, the deferred backlog and the store's headroom
// (progressbar's spinner, as `sluice replay` uses its bar). Log records
// written through it first clear the line, so they are not mixed with it;
// the next update draws it again under them.
type runProgress struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar
	drawn bool // the progress line is on the screen
}

// newRunProgress returns the progress for w, or nil when w is not a
// terminal (then logs are written as they are, and nothing else).
func newRunProgress(w io.Writer) *runProgress {
	if !isTerminalWriter(w) {
		return nil
	}
	p := &runProgress{w: w}
	p.bar = progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(barWriter{p}), progressbar.OptionSpinnerType(14),
		progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription("run: starting"),
		// No spinner goroutine of the library's own: it reads the bar's
		// state without its lock (a data race) and outlives the bar. The
		// line is redrawn at each update instead.
		progressbar.OptionSetSpinnerChangeInterval(0))
	return p
}

// barWriter is where the bar draws: the terminal, under p.mu.
type barWriter struct{ p *runProgress }

func (b barWriter) Write(s []byte) (int, error) {
	b.p.mu.Lock()
	defer b.p.mu.Unlock()
	b.p.drawn = true
	return b.p.w.Write(s)
}

// Write writes a log record, clearing the progress line first.
func (p *runProgress) Write(s []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		if _, err := io.WriteString(p.w, "\r\x1b[K"); err != nil {
			return 0, err
		}
		p.drawn = false
	}
	return p.w.Write(s)
}

// watch updates the line from status every second until stop closes.
func (p *runProgress) watch(status func() node.Status, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			_ = p.bar.Finish()
			return
		case <-t.C:
			s := status()
			p.bar.Describe(progressText(s))
		}
	}
}

// progressText is the progress line's text for one status.
func progressText(s node.Status) string {
	l := s.Ledger
	incomplete := 0.0
	if l.EventsBuilt > 0 {
		incomplete = 100 * float64(l.EventsIncomplete) / float64(l.EventsBuilt)
	}
	return fmt.Sprintf("run %d %s: %d events, %.0f events/s, %.3f GB/s, incomplete %.1f%%, deferred backlog %d, store headroom %.1f GiB",
		s.Run, s.State, l.EventsBuilt, s.Rates.EventsPerSecond, s.Rates.BytesPerSecond/1e9, incomplete,
		s.Store.DeferredBacklog, float64(s.Store.HeadroomBytes)/(1<<30))
}
