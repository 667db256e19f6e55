package farmbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
)

// Config is one bench: every fragment size at every queue limit, both
// protocols.
type Config struct {
	Exe     string        // the sluice binary (its farm etcd and farm bench-unit commands)
	RUs     int           // default 4
	Sizes   []int         // fragment bytes; default 256 B … 64 KiB (12 and 24 KiB too, near the default queues' crossovers)
	Queues  []int         // the link's queue limits, bytes; default 32 KiB and 64 KiB
	Rate    string        // the link's rate (tc syntax); default 500mbit
	Burst   int           // tbf bucket bytes; default 4096
	Credits int           // events in flight per BU (push credits, pull outstanding assignments); default 1
	Window  int           // fragments an RU keeps unreleased at most; default 2·Credits+1
	Warmup  time.Duration // default 500ms
	Measure time.Duration // default 2s
	Tag     string        // names the namespace and links; default from the pid
	Log     io.Writer     // progress lines (nil: none)
}

// DefaultConfig is the bench's defaults (Exe, Tag and Log unset).
func DefaultConfig() Config {
	var c Config
	c.defaults()
	c.Tag, c.Log = "", nil
	return c
}

func (c *Config) defaults() {
	if c.RUs == 0 {
		c.RUs = 4
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{256, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 12 << 10, 16 << 10, 24 << 10, 32 << 10, 64 << 10}
	}
	if len(c.Queues) == 0 {
		c.Queues = []int{32 << 10, 64 << 10}
	}
	if c.Rate == "" {
		c.Rate = "500mbit"
	}
	if c.Burst == 0 {
		c.Burst = 4096
	}
	if c.Credits == 0 {
		c.Credits = 1
	}
	if c.Window == 0 {
		c.Window = 2*c.Credits + 1
	}
	if c.Warmup == 0 {
		c.Warmup = 500 * time.Millisecond
	}
	if c.Measure == 0 {
		c.Measure = 2 * time.Second
	}
	if c.Tag == "" {
		c.Tag = strconv.Itoa(os.Getpid() % 100000)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Point is one measurement.
type Point struct {
	Protocol     string        `json:"protocol"`
	Size         int           `json:"fragment_bytes"`
	Queue        int           `json:"queue_bytes"`
	EventsPerSec float64       `json:"events_per_second"`
	P50          time.Duration `json:"latency_p50_ns"`
	P99          time.Duration `json:"latency_p99_ns"`
	Incomplete   uint64        `json:"incomplete"`
	Drops        uint64        `json:"queue_drops"`
}

// Result is a bench's points and, per queue limit, the predicted and the
// measured crossover (the smallest size from which pull builds more
// events per second than push at every larger size; 0: none measured).
type Result struct {
	Config    Config          `json:"-"`
	Points    []Point         `json:"points"`
	Predicted map[int]float64 `json:"predicted_crossover_bytes"`
	Measured  map[int]int     `json:"measured_crossover_bytes"`
}

// Predict is the fragment size above which push's burst overflows the
// queue (see the package doc).
func Predict(queue, burst, rus, credits int) float64 {
	return float64(queue+burst) / float64(rus*credits)
}

// Bench sets up the link and etcd, measures every point and removes what
// it set up.
func Bench(ctx context.Context, c Config) (*Result, error) {
	c.defaults()
	link, err := NewLink(c.Tag, c.Rate, c.Burst)
	if err != nil {
		return nil, err
	}
	defer link.Close()
	dir, err := os.MkdirTemp("", "sluice-farmbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	etcd, endpoint, err := startEtcd(ctx, c.Exe, dir, link.HostAddr)
	if err != nil {
		return nil, err
	}
	defer stop(etcd)
	res := &Result{Config: c, Predicted: map[int]float64{}, Measured: map[int]int{}}
	for _, q := range c.Queues {
		if err := link.SetQueue(q); err != nil {
			return nil, err
		}
		res.Predicted[q] = Predict(q, c.Burst, c.RUs, c.Credits)
		for _, size := range c.Sizes {
			for _, proto := range []string{"push", "pull"} {
				p, err := point(ctx, c, link, endpoint, proto, size, q)
				if err != nil {
					return nil, fmt.Errorf("farmbench: %s, %d-byte fragments, %d-byte queue: %w", proto, size, q, err)
				}
				fmt.Fprintf(c.Log, "%s %6d B fragments, %6d B queue: %8.0f events/s, latency p50 %v p99 %v, %d drops\n",
					proto, size, q, p.EventsPerSec, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.Drops)
				res.Points = append(res.Points, p)
			}
		}
		res.Measured[q] = crossover(res.Points, q)
	}
	return res, nil
}

// Margin is how much more events per second pull must build than push for
// a size to count as pull's (the figures' noise on two shared cores is a
// few per cent).
const Margin = 1.1

// crossover is the measured crossover of queue q: the smallest fragment
// size from which pull builds at least Margin times push's events per
// second and no fewer than push at any larger size, over the sizes below
// the queue limit (a fragment that does not fit the queue is dropped in
// part under either protocol: outside the model). 0: none.
func crossover(ps []Point, q int) int {
	rate := map[[2]int]float64{}
	var sizes []int
	for _, p := range ps {
		if p.Queue != q || p.Size >= q {
			continue
		}
		k := 0
		if p.Protocol == "pull" {
			k = 1
		} else {
			sizes = append(sizes, p.Size)
		}
		rate[[2]int{p.Size, k}] = p.EventsPerSec
	}
	slices.Sort(sizes)
	cross := 0
	for i := len(sizes) - 1; i >= 0; i-- {
		push, pull := rate[[2]int{sizes[i], 0}], rate[[2]int{sizes[i], 1}]
		if pull < push {
			break
		}
		if pull >= Margin*push {
			cross = sizes[i]
		}
	}
	return cross
}

// startEtcd runs sluice farm etcd on the host side's address and returns
// its client endpoint.
func startEtcd(ctx context.Context, exe, dir, addr string) (*exec.Cmd, string, error) {
	cmd := exec.CommandContext(ctx, exe, "farm", "etcd", "--data-dir", dir+"/etcd",
		"--listen", "http://"+addr+":0", "--peer", "http://127.0.0.1:0", "--tick-ms", "20", "--election-ms", "200")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "etcd: serving "); ok {
				line <- s
			}
		}
		close(line)
	}()
	select {
	case s, ok := <-line:
		if !ok {
			stop(cmd)
			return nil, "", errors.New("farmbench: sluice farm etcd ended before serving")
		}
		return cmd, s, nil
	case <-time.After(20 * time.Second):
		stop(cmd)
		return nil, "", errors.New("farmbench: sluice farm etcd did not serve within 20s")
	}
}

// stop ends a child: SIGTERM, then SIGKILL after 3 s.
func stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// point measures one protocol at one fragment size and queue limit: a
// farm of its own in etcd, the BU in the namespace, the RUs on the host.
func point(ctx context.Context, c Config, link *Link, endpoint, proto string, size, queue int) (Point, error) {
	farmID := fmt.Sprintf("fb-%s-%d-%d", proto, size, queue)
	rc := farm.RunConfig{Schema: farm.RunConfigSchema, Run: 1, Protocol: proto, Unit: "events", AssignmentSize: 1,
		Release: "received", ReleaseGroup: 1, Sources: []farm.SourceGroup{{Name: "all", Sources: fmt.Sprintf("0-%d", c.RUs-1)}}}
	if proto == "pull" {
		rc.MaxOutstanding, rc.MaxRequests = c.Credits, 1
	}
	ctl, err := control.Dial(ctx, control.Config{Endpoints: []string{endpoint}, Farm: farmID})
	if err != nil {
		return Point{}, err
	}
	_, err = ctl.PutRunConfig(ctx, rc)
	ctl.Close()
	if err != nil {
		return Point{}, err
	}
	drops0, err := link.Drops()
	if err != nil {
		return Point{}, err
	}
	common := []string{"farm", "bench-unit", "--farm", farmID, "--etcd", endpoint, "--run", "1"}
	var rus []*exec.Cmd
	defer func() {
		for _, r := range rus {
			stop(r)
		}
	}()
	for i := 0; i < c.RUs; i++ {
		args := append(append([]string(nil), common...), "--node", fmt.Sprintf("ru%d", i), "--source", strconv.Itoa(i),
			"--listen", link.HostAddr+":0", "--size", strconv.Itoa(size), "--window", strconv.Itoa(c.Window))
		r := exec.CommandContext(ctx, c.Exe, args...)
		r.Stderr = os.Stderr
		if err := r.Start(); err != nil {
			return Point{}, err
		}
		rus = append(rus, r)
	}
	args := append(append([]string(nil), common...), "--bu", "--node", "bu", "--listen", link.NSAddr+":0",
		"--credits", strconv.Itoa(c.Credits), "--warmup", c.Warmup.String(), "--measure", c.Measure.String())
	bu := link.Command(c.Exe, args...)
	bu.Stderr = os.Stderr
	var out strings.Builder
	bu.Stdout = &out
	if err := bu.Start(); err != nil {
		return Point{}, err
	}
	done := make(chan error, 1)
	go func() { done <- bu.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return Point{}, fmt.Errorf("the BU: %w", err)
		}
	case <-time.After(30*time.Second + c.Warmup + c.Measure):
		_ = bu.Process.Kill()
		<-done
		return Point{}, errors.New("the BU built nothing within 30s")
	}
	var r UnitResult
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		return Point{}, fmt.Errorf("the BU's result %q: %w", out.String(), err)
	}
	drops1, err := link.Drops()
	if err != nil {
		return Point{}, err
	}
	return Point{Protocol: proto, Size: size, Queue: queue, EventsPerSec: float64(r.Events) / r.Seconds,
		P50: r.P50, P99: r.P99, Incomplete: r.Incomplete, Drops: drops1 - drops0}, nil
}
