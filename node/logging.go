package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/sluice-daq/sluice/node/config"
)

// NewLogger builds the node's logger from the log configuration: text when
// format is "text", or "auto" and w is a terminal; JSON otherwise. Records
// pass through a RateLimitHandler so that one misbehaving source cannot
// flood the log.
func NewLogger(w io.Writer, c config.Log) (*slog.Logger, *RateLimitHandler) {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config; "info" on anything else
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if c.Format == "text" || (c.Format == "auto" && isTerminal(w)) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	rl := NewRateLimitHandler(h, c.RateLimit, c.RateInterval)
	return slog.New(rl), rl
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// keyAttrs are the attributes that, with the level and message, identify
// "the same record again": a repeated error from one source is limited
// without hiding the same error from another source.
var keyAttrs = map[string]bool{"source": true, "input": true, "stage": true, "plugin": true, "reason": true}

// RateLimitHandler passes at most Limit records per key per Interval to the
// next handler and counts the rest. The record that reaches the limit
// carries the attribute rate_limit saying so; the first record of a key
// let through after some were suppressed carries suppressed=K. A key is
// the level, the message and the values of the attributes source, input,
// stage, plugin and reason. Limit 0 disables limiting.
type RateLimitHandler struct {
	next  slog.Handler
	st    *limitState
	bound string // key part from attributes bound with WithAttrs
}

type limitState struct {
	limit      int
	interval   time.Duration
	now        func() time.Time
	mu         sync.Mutex
	windows    map[string]*window
	suppressed atomic.Uint64
}

type window struct {
	start   time.Time
	passed  int
	dropped int
}

// maxKeys bounds the key table; beyond it, windows older than the interval
// are swept so a stream of distinct keys cannot grow memory without bound.
const maxKeys = 4096

// NewRateLimitHandler wraps next.
func NewRateLimitHandler(next slog.Handler, limit int, interval time.Duration) *RateLimitHandler {
	return &RateLimitHandler{next: next, st: &limitState{
		limit: limit, interval: interval, now: time.Now, windows: map[string]*window{},
	}}
}

// Suppressed is the number of records dropped so far.
func (h *RateLimitHandler) Suppressed() uint64 { return h.st.suppressed.Load() }

// Enabled reports whether the next handler takes records of this level.
func (h *RateLimitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle lets the record through unless its key is over its limit.
func (h *RateLimitHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.st.limit <= 0 {
		return h.next.Handle(ctx, r)
	}
	var key strings.Builder
	key.WriteString(r.Level.String())
	key.WriteByte('|')
	key.WriteString(r.Message)
	key.WriteString(h.bound)
	r.Attrs(func(a slog.Attr) bool {
		if keyAttrs[a.Key] {
			fmt.Fprintf(&key, "|%s=%s", a.Key, a.Value)
		}
		return true
	})
	st := h.st
	now := st.now()
	st.mu.Lock()
	w := st.windows[key.String()]
	carried := 0
	if w == nil || now.Sub(w.start) >= st.interval {
		if w != nil {
			carried = w.dropped
		}
		if w == nil && len(st.windows) >= maxKeys {
			st.sweep(now)
		}
		w = &window{start: now}
		st.windows[key.String()] = w
	}
	if w.passed >= st.limit {
		w.dropped++
		st.mu.Unlock()
		st.suppressed.Add(1)
		return nil
	}
	w.passed++
	last := w.passed == st.limit
	st.mu.Unlock()
	if carried > 0 || last {
		r = r.Clone()
	}
	if carried > 0 {
		r.AddAttrs(slog.Int("suppressed", carried))
	}
	if last {
		// Said on the record itself: a reader of the log otherwise
		// takes the last one shown for the last one there was.
		r.AddAttrs(slog.String("rate_limit", fmt.Sprintf("%d like this per %v: more are not logged until %v after the first (the next one says how many were not; /status log_records_suppressed counts all records held back)",
			st.limit, st.interval, st.interval)))
	}
	return h.next.Handle(ctx, r)
}

// sweep drops expired windows; called with mu held.
func (st *limitState) sweep(now time.Time) {
	for k, w := range st.windows {
		if now.Sub(w.start) >= st.interval {
			delete(st.windows, k)
		}
	}
}

// WithAttrs keeps key attributes bound to the logger as part of the key.
func (h *RateLimitHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	bound := h.bound
	for _, a := range attrs {
		if keyAttrs[a.Key] {
			bound += fmt.Sprintf("|%s=%s", a.Key, a.Value)
		}
	}
	return &RateLimitHandler{next: h.next.WithAttrs(attrs), st: h.st, bound: bound}
}

// WithGroup passes the group to the next handler.
func (h *RateLimitHandler) WithGroup(name string) slog.Handler {
	return &RateLimitHandler{next: h.next.WithGroup(name), st: h.st, bound: h.bound}
}
