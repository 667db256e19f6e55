package farmbench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/agent"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/tcp"
	"github.com/sluice-daq/sluice/schemas"
)

// token is the bench farms' shared secret (their peers are all local).
const token = "farmbench"

// UnitConfig is one bench process: an RU reading out one source, or the
// BU (with the EM).
type UnitConfig struct {
	BU      bool
	Node    string
	Farm    string
	Etcd    string
	Run     uint32
	Listen  string // host:port of the peer transport (port 0: any)
	Source  uint32 // RU: its one source
	Size    int    // RU: fragment bytes (at least 8: the readout time)
	Window  int    // RU: fragments unreleased at most
	Credits int    // BU: slots (events in flight)
	// BU: Warmup after the first build, then Measure.
	Warmup, Measure time.Duration
	Log             *slog.Logger
}

// UnitResult is what the BU measured, printed as one JSON line.
type UnitResult struct {
	Events     uint64        `json:"events"`
	Seconds    float64       `json:"seconds"`
	Incomplete uint64        `json:"incomplete"`
	P50        time.Duration `json:"latency_p50_ns"`
	P99        time.Duration `json:"latency_p99_ns"`
}

// RunUnit runs one bench process until ctx ends (an RU) or its
// measurement is done (the BU, which then writes its UnitResult to out).
func RunUnit(ctx context.Context, c UnitConfig, out io.Writer) error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	ctl, err := control.Dial(ctx, control.Config{Endpoints: []string{c.Etcd}, Farm: c.Farm})
	if err != nil {
		return err
	}
	defer ctl.Close()
	rc, _, err := ctl.RunConfig(ctx, c.Run)
	if err != nil {
		return err
	}
	tr, err := tcp.New(peer.Config{Node: c.Node, Farm: c.Farm, Token: token, Listen: c.Listen, PoolBytes: 64 << 20, MaxData: 1 << 20})
	if err != nil {
		return err
	}
	defer tr.Close()
	cfg := agent.Config{Node: c.Node, Run: rc, Control: ctl, Transport: tr, LeaseTTL: 2 * time.Second,
		Wait: 5 * time.Second, Tick: time.Millisecond, Linger: 100 * time.Microsecond, Log: c.Log}
	if cfg.Log != nil {
		cfg.Log = cfg.Log.With("node", c.Node)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.BU {
		m := &meter{warmup: c.Warmup, measure: c.Measure, done: make(chan struct{})}
		cfg.Roles, cfg.Pipeline, cfg.Slots = farm.RoleBU|farm.RoleEM, m, c.Credits
		a, err := agent.New(cfg)
		if err != nil {
			return err
		}
		m.agent, m.ctx = a, ctx
		errc := make(chan error, 1)
		go func() { errc <- a.Run(ctx) }()
		select {
		case err := <-errc:
			return fmt.Errorf("farmbench: BU ended before its measurement: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
		}
		cancel()
		<-errc
		return json.NewEncoder(out).Encode(m.result())
	}
	if c.Size < 8 {
		return fmt.Errorf("farmbench: fragment size %d: want at least 8 bytes", c.Size)
	}
	cfg.Roles, cfg.Sources, cfg.TriggerSource = farm.RoleRU, []uint32{c.Source}, 0
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	err = readout(ctx, a, c)
	cancel()
	if e := <-errc; e != nil && ctx.Err() == nil {
		return e
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// readout hands the RU one fragment per event id, 0, 1, 2…, each stamped
// with its readout time, keeping at most c.Window unreleased.
func readout(ctx context.Context, a *agent.Agent, c UnitConfig) error {
	free := make(chan struct{}, c.Window)
	for i := 0; i < c.Window; i++ {
		free <- struct{}{}
	}
	payload := make([]byte, c.Size)
	for id := uint64(0); ; id++ {
		select {
		case <-ctx.Done():
			return nil
		case <-free:
		}
		binary.LittleEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		b := schemas.AppendMFP(nil, c.Source, id, 0, 0, [][]byte{payload}, nil)
		p, _, err := schemas.DecodeMFP(b)
		if err != nil {
			return err
		}
		if err := a.AddPacket(ctx, p, func() { free <- struct{}{} }); err != nil {
			return err
		}
	}
}

// meter is the BU's pipeline: it counts events and their latency in the
// window, releases at once and decides each assignment.
type meter struct {
	agent           *agent.Agent
	ctx             context.Context
	warmup, measure time.Duration

	mu         sync.Mutex
	first      time.Time // first build
	from, to   time.Time // the window
	events     uint64
	incomplete uint64
	lat        []time.Duration
	done       chan struct{}
	closed     bool
}

func (m *meter) Build(a farm.Assign, packets []schemas.MFP, missing []uint32, release func()) {
	now := time.Now()
	var born int64 = -1
	for _, p := range packets {
		p.Fragments(func(_ int, _ uint64, _ uint32, pl []byte) bool {
			if len(pl) >= 8 {
				if t := int64(binary.LittleEndian.Uint64(pl)); born < 0 || t < born {
					born = t
				}
			}
			return true
		})
	}
	release()
	events := uint32(a.Unit.Len())
	id := a.ID
	go m.agent.Outcome(m.ctx, id, farm.OutcomeDecided, events)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.IsZero() {
		m.first = now
		m.from = now.Add(m.warmup)
		m.to = m.from.Add(m.measure)
		// The window ends on time even if no event comes then (a push
		// stalled on a lost burst's tail).
		time.AfterFunc(m.to.Sub(now), m.finish)
	}
	if now.Before(m.from) || !now.Before(m.to) || m.closed {
		return
	}
	m.events += uint64(events)
	if len(missing) > 0 {
		m.incomplete += uint64(events)
	}
	if born >= 0 {
		m.lat = append(m.lat, now.Sub(time.Unix(0, born)))
	}
}

func (m *meter) finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.done)
	}
}

func (m *meter) result() UnitResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := UnitResult{Events: m.events, Seconds: m.measure.Seconds(), Incomplete: m.incomplete}
	if n := len(m.lat); n > 0 {
		slices.Sort(m.lat)
		r.P50, r.P99 = m.lat[n/2], m.lat[min(n-1, n*99/100)]
	}
	return r
}
