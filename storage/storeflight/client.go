package storeflight

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/storage"
)

// Endpoint is what an EndpointFile says.
type Endpoint struct {
	URI       string // grpc://HOST:PORT or grpc+tls://HOST:PORT
	TokenFile string // "": no token
	TLSCert   string // the certificate to trust ("": the system's roots)
}

// ReadEndpoint reads dir's EndpointFile. Errors: ErrNoEndpoint when there
// is none, or a file that does not parse.
func ReadEndpoint(dir string) (Endpoint, error) {
	f, err := os.Open(filepath.Join(dir, EndpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return Endpoint{}, fmt.Errorf("%w in %s", ErrNoEndpoint, dir)
	}
	if err != nil {
		return Endpoint{}, err
	}
	defer f.Close()
	var e Endpoint
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch k, v, _ := strings.Cut(line, " "); {
		case n == 1:
			e.URI = line
		case k == "token_file":
			e.TokenFile = v
		case k == "tls_cert":
			e.TLSCert = v
		}
	}
	if !strings.HasPrefix(e.URI, "grpc://") && !strings.HasPrefix(e.URI, "grpc+tls://") {
		return Endpoint{}, fmt.Errorf("%s: line 1 %q: want grpc://HOST:PORT or grpc+tls://HOST:PORT", f.Name(), e.URI)
	}
	return e, sc.Err()
}

// Client reads a store through its node's Flight endpoint. One per
// goroutine at a time.
type Client struct {
	c     flight.Client
	ep    Endpoint
	token string
	ctx   context.Context
}

// Dial connects to e (lazily: the first call reports an unreachable node).
func Dial(ctx context.Context, e Endpoint) (*Client, error) {
	addr, tlsOn := strings.CutPrefix(e.URI, "grpc+tls://")
	if !tlsOn {
		addr = strings.TrimPrefix(e.URI, "grpc://")
	}
	creds := insecure.NewCredentials()
	if tlsOn {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if e.TLSCert != "" {
			pem, err := os.ReadFile(e.TLSCert)
			if err != nil {
				return nil, fmt.Errorf("flight: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("flight: %s holds no PEM certificate", e.TLSCert)
			}
			cfg.RootCAs = pool
		}
		creds = credentials.NewTLS(cfg)
	}
	cl := &Client{ep: e, ctx: ctx}
	if e.TokenFile != "" {
		tok, err := readToken(e.TokenFile)
		if err != nil {
			return nil, err
		}
		cl.token = tok
	}
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvBytes)))
	if err != nil {
		return nil, fmt.Errorf("flight: %s: %w", e.URI, err)
	}
	cl.c = c
	return cl, nil
}

// maxRecvBytes bounds one message the client takes: a record batch of the
// store's events (256 LHCb events of the demo are ~42 MB; gRPC's default
// of 4 MiB refused them, so exporting a running node's store failed).
var maxRecvBytes = 1 << 30

// URI is the endpoint's.
func (c *Client) URI() string { return c.ep.URI }

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

func (c *Client) call() context.Context {
	if c.token == "" {
		return c.ctx
	}
	return metadata.AppendToOutgoingContext(c.ctx, "authorization", "Bearer "+c.token)
}

// Stats is the store's (the node's storage.Store.Stats).
func (c *Client) Stats() (storage.Stats, error) {
	var st storage.Stats
	r, err := c.c.DoAction(c.call(), &flight.Action{Type: ActionStat})
	if err != nil {
		return st, fmt.Errorf("flight %s: stat: %w", c.ep.URI, err)
	}
	res, err := r.Recv()
	if err != nil {
		return st, fmt.Errorf("flight %s: stat: %w", c.ep.URI, err)
	}
	if err := json.Unmarshal(res.GetBody(), &st); err != nil {
		return st, fmt.Errorf("flight %s: stat: %w", c.ep.URI, err)
	}
	return st, nil
}

// LineNames is the store's recorded trigger line names by stage (as
// storage.Store.LineNames).
func (c *Client) LineNames() (map[string][]string, error) {
	var names map[string][]string
	r, err := c.c.DoAction(c.call(), &flight.Action{Type: ActionLines})
	if err != nil {
		return nil, fmt.Errorf("flight %s: lines: %w", c.ep.URI, err)
	}
	res, err := r.Recv()
	if err != nil {
		return nil, fmt.Errorf("flight %s: lines: %w", c.ep.URI, err)
	}
	if err := json.Unmarshal(res.GetBody(), &names); err != nil {
		return nil, fmt.Errorf("flight %s: lines: %w", c.ep.URI, err)
	}
	if names == nil {
		names = map[string][]string{}
	}
	return names, nil
}

// Why is one event's provenance (as storage.Store.Why); an event the
// store does not hold is an error wrapping storage.ErrNoEvent.
func (c *Client) Why(run uint32, id uint64) (storage.Why, error) {
	var w storage.Why
	body, _ := json.Marshal(WhyQuery{Version: Version, Run: run, Event: id})
	r, err := c.c.DoAction(c.call(), &flight.Action{Type: ActionWhy, Body: body})
	if err == nil {
		var res *flight.Result
		if res, err = r.Recv(); err == nil {
			err = json.Unmarshal(res.GetBody(), &w)
		}
	}
	if status.Code(err) == codes.NotFound {
		return w, fmt.Errorf("flight %s: why: %w: %s", c.ep.URI, storage.ErrNoEvent, status.Convert(err).Message())
	}
	if err != nil {
		return w, fmt.Errorf("flight %s: why: %w", c.ep.URI, err)
	}
	return w, nil
}

// List calls fn with the selected events of stream in key order, at most
// limit (1..MaxList), until fn returns false (as storage.Store.List).
func (c *Client) List(stream storage.Stream, sel storage.Selection, limit int, fn func(storage.EventInfo) bool) error {
	if limit <= 0 || limit > MaxList {
		limit = MaxList
	}
	ctx, cancel := context.WithCancel(c.call())
	defer cancel()
	r, err := c.c.DoAction(ctx, &flight.Action{Type: ActionList, Body: QueryOf(stream, sel, limit).Encode()})
	if err != nil {
		return fmt.Errorf("flight %s: ls: %w", c.ep.URI, err)
	}
	for {
		res, err := r.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("flight %s: ls: %w", c.ep.URI, err)
		}
		var e storage.EventInfo
		if err := json.Unmarshal(res.GetBody(), &e); err != nil {
			return fmt.Errorf("flight %s: ls: %w", c.ep.URI, err)
		}
		if !fn(e) {
			return nil
		}
	}
}

// ExportBatches is storage.Store.ExportBatches through the endpoint: start
// gets the export schema, each every record batch (released when it
// returns). The events are counted as they come.
func (c *Client) ExportBatches(stream storage.Stream, opts storage.ExportOptions, start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error) {
	ctx, cancel := context.WithCancel(c.call())
	defer cancel()
	s, err := c.c.DoGet(ctx, &flight.Ticket{Ticket: QueryOf(stream, opts.Selection, opts.Limit).Encode()})
	if err != nil {
		return 0, fmt.Errorf("flight %s: get: %w", c.ep.URI, err)
	}
	mem := opts.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	r, err := flight.NewRecordReader(s, ipc.WithAllocator(mem))
	if err != nil {
		return 0, fmt.Errorf("flight %s: get: %w", c.ep.URI, err)
	}
	defer r.Release()
	if err := start(r.Schema()); err != nil {
		return 0, err
	}
	n := 0
	for r.Next() {
		rec := r.RecordBatch()
		if err := each(rec); err != nil {
			return n, err
		}
		n += int(rec.NumRows())
	}
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("flight %s: get: %w", c.ep.URI, err)
	}
	return n, nil
}
