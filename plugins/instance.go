package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-plugin"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/wire"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// minRegion is the smallest shared-memory region made for an instance;
// regions grow (a new, larger file) when a batch does not fit.
const minRegion = 1 << 20

// How a batch reached the plugin (label transport of
// sluice_trigger_transport_batches_total).
const (
	transportLayout = "layout" // built in the arena: buffer places only, no copy
	transportRegion = "region" // copied once into the instance's region
	transportInline = "inline" // copied into the gRPC request
)

// instanceConfig says how to start one plugin process.
type instanceConfig struct {
	path         string
	stage        string
	log          *slog.Logger
	inline       bool
	startTimeout time.Duration
	mem          memory.Allocator
	arena        *Arena
}

// CallsInFlight is how many Decide calls a stage with an arena has
// outstanding on one plugin process that speaks the pipelined protocol
// (handshake version 2, as every plugin built with the SDK does; 1 for
// version 1, or without an arena): one being decided and
// one waiting in the plugin, so that the plugin starts the next batch as
// soon as it answers one instead of after a round trip to the host
// (`sluice bench`: batches waited 2-5 ms in the queue for the one instance,
// with the plugin idle between calls).
const CallsInFlight = 2

// instance is one running plugin process. Up to depth goroutines use it at
// once (depth calls in flight); mu orders the placing of their batches.
type instance struct {
	cfg    *instanceConfig
	client *plugin.Client
	rpc    pluginpb.TriggerClient
	pid    int
	desc   sdk.Description
	proto  int        // the handshake version negotiated: wire.ProtocolVersion or wire.ProtocolPipelined
	depth  int        // Decide calls it takes at once: CallsInFlight, or 1 (wire.ProtocolVersion, or no arena)
	output []*lineLog // what the plugin writes to os.Stdout and os.Stderr once serving

	// mu guards what follows; a batch placed in the region or inline keeps
	// it until its answer, since the next batch would overwrite the buffer.
	mu          sync.Mutex
	region      *wire.Region  // nil until the first shared-memory batch
	inbuf       []byte        // reused buffer for inline batches
	seq         uint64        // the last batch's BatchSeq: 1, 2, 3, … without gaps
	schema      *arrow.Schema // the last schema sent by layout, and its IPC bytes
	schemaBytes []byte
}

// startInstance starts the plugin binary, checks the handshake and asks for
// its description. Errors name the binary.
func startInstance(ctx context.Context, cfg *instanceConfig) (*instance, error) {
	cmd := exec.Command(cfg.path)
	dieWithHost(cmd)
	hl, quiet := hclogFor(cfg.log, cfg.stage, filepath.Base(cfg.path))
	plog := cfg.log.With("stage", cfg.stage, "plugin", filepath.Base(cfg.path))
	output := []*lineLog{{log: plog, msg: msgStdout}, {log: plog, msg: msgStderr}}
	var run *stdoutRunner
	set := plugin.PluginSet{wire.PluginName: &wire.GRPCPlugin{}}
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: set, wire.ProtocolPipelined: set},
		RunnerFunc:       runnerFunc(cmd, &lineLog{log: plog, msg: msgStdout}, &run),
		SyncStdout:       output[0],
		SyncStderr:       output[1],
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  wire.DialOptions(),
		Logger:           hl,
		StartTimeout:     cfg.startTimeout,
	})
	fail := func(what string, err error) (*instance, error) {
		// A process that failed its start-up gets no graceful exit: it is
		// killed at once, and go-plugin's Kill then only reaps it and its
		// goroutines. Its "failed to exit gracefully" warning would blame
		// the process for an exit nobody asked of it, so it is dropped.
		quiet.Store(true)
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		c.Kill()
		return nil, fmt.Errorf("trigger plugin %s: %s: %w", cfg.path, what, err)
	}
	proto, err := c.Client()
	if err != nil {
		if run != nil {
			if head, cut, bad := run.stdout.first(); bad {
				return fail("handshake", errStdoutBeforeServe(head, cut))
			}
		}
		if strings.Contains(strings.ToLower(err.Error()), "incompatible api version") {
			return fail(fmt.Sprintf("speaks another trigger protocol version than this host (%d or %d)", wire.ProtocolVersion, wire.ProtocolPipelined), err)
		}
		return fail(fmt.Sprintf("not a sluice trigger plugin (go-plugin handshake failed; protocol version %d)", wire.ProtocolVersion), err)
	}
	raw, err := proto.Dispense(wire.PluginName)
	if err != nil {
		return fail("does not serve the trigger service", err)
	}
	in := &instance{cfg: cfg, client: c, rpc: raw.(pluginpb.TriggerClient), pid: cmd.Process.Pid, output: output,
		proto: c.NegotiatedVersion(), depth: 1}
	if in.proto == wire.ProtocolPipelined && cfg.arena != nil && !cfg.inline {
		// Batches in the arena travel as the places of their own buffers;
		// one copied into the region (or inline) holds the instance's one
		// buffer until answered, so without an arena a second call would
		// only wait behind the first, uncounted in the stage's backlog.
		in.depth = CallsInFlight
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	d, err := in.rpc.Describe(dctx, &pluginpb.DescribeRequest{})
	if err != nil {
		return fail("describe", err)
	}
	in.desc = sdk.Description{Name: d.GetName(), Version: d.GetVersion(), Lines: d.GetLines(), Columns: d.GetColumns()}
	if len(in.desc.Lines) > schemas.MaxLines {
		return fail("describe", fmt.Errorf("%d trigger lines, at most %d", len(in.desc.Lines), schemas.MaxLines))
	}
	return in, nil
}

// configure passes the parameters, then reads the description again: a
// plugin may name the source groups it reads from its parameters (l0calo's
// ecal_group), and the host must send those.
func (in *instance) configure(ctx context.Context, params map[string]string) error {
	if _, err := in.rpc.Configure(ctx, &pluginpb.ConfigureRequest{Params: params}); err != nil {
		return fmt.Errorf("trigger plugin %s: configure: %w", in.cfg.path, err)
	}
	d, err := in.rpc.Describe(ctx, &pluginpb.DescribeRequest{})
	if err != nil {
		return fmt.Errorf("trigger plugin %s: describe after configure: %w", in.cfg.path, err)
	}
	if d.GetName() != in.desc.Name || !slices.Equal(d.GetLines(), in.desc.Lines) {
		return fmt.Errorf("trigger plugin %s: configure changed its name or lines (%s %v, was %s %v); only the source groups it reads may depend on parameters",
			in.cfg.path, d.GetName(), d.GetLines(), in.desc.Name, in.desc.Lines)
	}
	in.desc.Columns = d.GetColumns()
	return nil
}

// decide sends rec (only the columns the plugin asked for), or l's batch
// when l is not nil, and returns the plugin's verdict on each of its n
// rows and how the batch travelled (transportLayout, transportRegion or
// transportInline). With a lease the batch is read only while placing it;
// errReleased when its owner released it before. Safe for in.depth
// goroutines at once.
func (in *instance) decide(ctx context.Context, n int, rec arrow.RecordBatch, l *lease) ([]schemas.Verdict, string, error) {
	in.mu.Lock()
	req, sentBy, err := in.request(rec, l)
	if err != nil || sentBy == transportLayout {
		// A layout names the batch's own buffers in the arena: the next
		// batch may be placed while this one is decided.
		in.mu.Unlock()
	} else {
		defer in.mu.Unlock()
	}
	if err != nil {
		return nil, "", err
	}
	resp, err := in.rpc.Decide(ctx, req)
	if err != nil {
		return nil, "", err
	}
	res, err := decodeResults(resp, n, in.desc.Name)
	return res, sentBy, err
}

// request places the batch for the plugin: rec, or l's batch while l
// holds it. The caller holds in.mu. A batch that could not be placed takes
// no BatchSeq, so the plugin never waits for one that was not sent.
func (in *instance) request(rec arrow.RecordBatch, l *lease) (*pluginpb.DecideRequest, string, error) {
	if l != nil {
		var ok bool
		if rec, ok = l.acquire(); !ok {
			return nil, "", errReleased
		}
		defer l.placed()
	}
	if len(in.desc.Columns) > 0 {
		rec = project(rec, in.desc.Columns)
		defer rec.Release()
	}
	req := &pluginpb.DecideRequest{}
	sentBy, err := in.place(rec, req)
	if err != nil {
		return nil, "", err
	}
	in.seq++
	req.BatchSeq = in.seq
	return req, sentBy, nil
}

// place writes rec's IPC stream into the instance's shared-memory region
// (made or grown as needed) or, for inline instances, into a reused buffer
// carried in the request, or names its buffers in the arena; it returns
// which of the three it did.
func (in *instance) place(rec arrow.RecordBatch, req *pluginpb.DecideRequest) (string, error) {
	if in.cfg.arena != nil && !in.cfg.inline {
		if in.schema == nil || !in.schema.Equal(rec.Schema()) {
			b, err := wire.SchemaBytes(rec.Schema())
			if err != nil {
				return "", err
			}
			in.schema, in.schemaBytes = rec.Schema(), b
		}
		// A batch built in the arena travels as the places of its buffers.
		if l, ok := in.cfg.arena.Layout(rec, in.schemaBytes); ok {
			req.Batch = &pluginpb.DecideRequest_Layout{Layout: l}
			return transportLayout, nil
		}
	}
	if in.cfg.inline {
		return transportInline, in.placeInline(rec, req)
	}
	need := wire.StreamSize(rec)
	for {
		if in.region == nil || len(in.region.Data) < need {
			if err := in.growRegion(need); err != nil {
				// No shared memory to be had (e.g. /dev/shm full): the batch
				// still goes, inside the request.
				in.cfg.log.Warn("no shared-memory region for a batch; sending it in the request", "stage", in.cfg.stage, "plugin_path", in.cfg.path, "bytes", need, "error", err)
				return transportInline, in.placeInline(rec, req)
			}
		}
		n, err := wire.EncodeBatch(in.region.Data, rec, in.cfg.mem)
		if errors.Is(err, wire.ErrNoRoom) {
			need = 2 * len(in.region.Data)
			continue
		}
		if err != nil {
			return "", err
		}
		req.Batch = &pluginpb.DecideRequest_Shared{Shared: &pluginpb.SharedBatch{
			Region: in.region.Path, RegionSize: uint64(len(in.region.Data)), Offset: 0, Length: uint64(n),
		}}
		return transportRegion, nil
	}
}

// placeInline writes rec's IPC stream into a reused buffer carried in the
// request.
func (in *instance) placeInline(rec arrow.RecordBatch, req *pluginpb.DecideRequest) error {
	if need := wire.StreamSize(rec); len(in.inbuf) < need {
		in.inbuf = make([]byte, need)
	}
	n, err := wire.EncodeBatch(in.inbuf, rec, in.cfg.mem)
	if err != nil {
		return err
	}
	req.Batch = &pluginpb.DecideRequest_Inline{Inline: in.inbuf[:n]}
	return nil
}

func (in *instance) growRegion(need int) error {
	size := minRegion
	if in.region != nil {
		size = 2 * len(in.region.Data)
		in.region.Close()
		in.region = nil
	}
	for size < need {
		size *= 2
	}
	r, err := wire.CreateRegion(wire.RegionDir(), size)
	if err != nil {
		return err
	}
	in.region = r
	return nil
}

// exited reports whether the plugin process has ended.
func (in *instance) exited() bool { return in.client.Exited() }

// kill ends the process at once (SIGKILL), for hung or broken instances.
func (in *instance) kill() {
	syscall.Kill(in.pid, syscall.SIGKILL)
	in.close()
}

// close asks the plugin to exit (killing it after go-plugin's grace period)
// and removes the instance's region (once a call placing a batch there has
// ended: the process is gone, so it ends at once).
func (in *instance) close() {
	in.client.Kill()
	for _, o := range in.output {
		o.flush()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.region != nil {
		in.region.Close()
		in.region = nil
	}
}

// project returns rec restricted to the metadata columns and the payload and
// size columns of the named source groups (no data copied). The caller
// releases the result.
func project(rec arrow.RecordBatch, groups []string) arrow.RecordBatch {
	s := rec.Schema()
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range s.Fields() {
		g, isPayload := strings.CutPrefix(f.Name, schemas.PayloadPrefix)
		if !isPayload {
			g, isPayload = strings.CutPrefix(f.Name, schemas.SizesPrefix)
		}
		keep := !isPayload
		for _, want := range groups {
			keep = keep || g == want
		}
		if keep {
			fields = append(fields, f)
			cols = append(cols, rec.Column(i))
		}
	}
	md := s.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// decodeResults turns a plugin's answer for a batch of n events back into
// verdicts, checking that it has one verdict and one lines mask per event.
// Each is the plugin's own decision (ReasonPlugin, by plugin), with its
// annotation as the reason's text.
func decodeResults(resp *pluginpb.DecideResponse, n int, plugin string) ([]schemas.Verdict, error) {
	if len(resp.GetVerdicts()) != n || len(resp.GetLines()) != n {
		return nil, fmt.Errorf("plugin answered %d verdicts and %d line masks for %d events", len(resp.GetVerdicts()), len(resp.GetLines()), n)
	}
	dst := make([]schemas.Verdict, n)
	for i, v := range resp.GetVerdicts() {
		d := schemas.Decision(v)
		if d < schemas.DecisionAccept || d > schemas.DecisionDefer {
			return nil, fmt.Errorf("plugin answered verdict %d for row %d", v, i)
		}
		dst[i] = schemas.Verdict{Decision: d, Lines: resp.GetLines()[i], Reason: schemas.Reason{Kind: schemas.ReasonPlugin, Plugin: plugin}}
	}
	for _, a := range resp.GetAnnotations() {
		if int(a.GetRow()) >= n {
			return nil, fmt.Errorf("plugin annotated row %d of a batch of %d events", a.GetRow(), n)
		}
		dst[a.GetRow()].Reason.Text = a.GetText()
	}
	return dst, nil
}
