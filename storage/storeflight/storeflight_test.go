package storeflight

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/schemas/formats"
	"github.com/sluice-daq/sluice/storage"
)

// openGolden copies the repository's fixed 30-event store (testdata/golden/store:
// LHCb events of the demo chain, accepted and deferred) and opens it
// read-write, as a running node holds its store.
func openGolden(t *testing.T) *storage.Store {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "golden", "store")
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := storage.Open(storage.Options{Dir: dir, MinFreeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func serve(t *testing.T, s *storage.Store, cfg Config) *Server {
	t.Helper()
	srv, err := Serve(s, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dialDir(t *testing.T, dir string) *Client {
	t.Helper()
	ep, err := ReadEndpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServeStore: while the store is open read-write (a running node), a
// client found through the store directory's endpoint file gets the same
// statistics, the same event list and byte-identical exports (every
// exporter that takes these LHCb events) as the store itself gives, for
// both streams and a selection with a limit; an independent arrow-go
// Flight client lists the streams with their event counts and reads them
// as record batches equal to the store's own export batches. Closing the
// server removes the endpoint file.
func TestServeStore(t *testing.T) {
	s := openGolden(t)
	srv := serve(t, s, DefaultConfig())
	c := dialDir(t, s.Dir())
	if c.URI() != srv.URI() {
		t.Fatalf("endpoint file names %s, server is %s", c.URI(), srv.URI())
	}

	want, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got.FreeBytes == 0 {
		t.Fatal("stats through Flight: no free bytes")
	}
	got.FreeBytes, want.FreeBytes = 0, 0 // the file system's, changing as other tests write
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stats through Flight\n%+v\nwant\n%+v", got.Streams, want.Streams)
	}
	if err := s.SetLineNames(map[string][]string{"hlt1": {"big", "small"}}); err != nil {
		t.Fatal(err)
	}
	wantNames, _ := s.LineNames()
	gotNames, err := c.LineNames()
	if err != nil || !reflect.DeepEqual(gotNames, wantNames) || len(gotNames["hlt1"]) != 2 {
		t.Fatalf("line names through Flight %v (%v), want %v", gotNames, err, wantNames)
	}
	events := map[storage.Stream]uint64{}
	for _, ss := range want.Streams {
		events[ss.Stream] = ss.Events
	}
	if events[storage.Accepted] == 0 || events[storage.Deferred] == 0 {
		t.Fatalf("the golden store should have both streams: %+v", want.Streams)
	}

	sel := storage.Selection{MinEvent: 3}
	for _, stream := range []storage.Stream{storage.Accepted, storage.Deferred} {
		var local, remote []storage.EventInfo
		if err := s.List(stream, storage.Selection{}, 1000, func(e storage.EventInfo) bool { local = append(local, e); return true }); err != nil {
			t.Fatal(err)
		}
		if err := c.List(stream, storage.Selection{}, 1000, func(e storage.EventInfo) bool { remote = append(remote, e); return true }); err != nil {
			t.Fatal(err)
		}
		if len(local) == 0 || !reflect.DeepEqual(local, remote) {
			t.Fatalf("%s: ls through Flight %d events, want %d equal", stream, len(remote), len(local))
		}
		n := 0
		for _, e := range formats.Exporters() {
			for _, o := range []storage.ExportOptions{{}, {Selection: sel, Limit: 2}} {
				var lb, rb bytes.Buffer
				ln, lerr := s.Export(stream, e, &lb, o)
				rn, rerr := storage.WriteExport(e, &rb, nil, func(start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error) {
					return c.ExportBatches(stream, o, start, each)
				})
				if lerr != nil {
					if rerr == nil {
						t.Errorf("%s %s: local export fails (%v), through Flight not", stream, e.ExportName(), lerr)
					}
					continue // a format these events were not split from
				}
				same := bytes.Equal(lb.Bytes(), rb.Bytes())
				if e.ExportName() == "parquet" && !same {
					// Arrow IPC leaves out validity bitmaps without nulls,
					// and the Parquet writer encodes such columns a few
					// bytes differently: the same table, not the same bytes.
					same = parquetEqual(t, lb.Bytes(), rb.Bytes())
				}
				if rerr != nil || rn != ln || !same {
					t.Errorf("%s %s %+v: through Flight %d events, %d bytes, err %v; want %d events, %d bytes, equal",
						stream, e.ExportName(), o, rn, rb.Len(), rerr, ln, lb.Len())
				}
				if o.Limit == 2 && ln != 2 {
					t.Errorf("%s %s: limit 2 exported %d", stream, e.ExportName(), ln)
				}
				n++
			}
		}
		if n < 4 {
			t.Fatalf("%s: only %d exports compared", stream, n)
		}
	}

	// An independent client: arrow-go's own Flight client, no storeflight code.
	addr := srv.URI()[len("grpc://"):]
	fc, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	ctx := context.Background()
	lf, err := fc.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for {
		info, err := lf.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		stream, err := storage.ParseStream(info.GetFlightDescriptor().GetPath()[0])
		if err != nil {
			t.Fatal(err)
		}
		if uint64(info.GetTotalRecords()) != events[stream] {
			t.Errorf("%s: FlightInfo says %d records, the store %d", stream, info.GetTotalRecords(), events[stream])
		}
		g, err := fc.DoGet(ctx, info.GetEndpoint()[0].GetTicket())
		if err != nil {
			t.Fatal(err)
		}
		r, err := flight.NewRecordReader(g)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.RecordBatch
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		r.Release()
		var local []arrow.RecordBatch
		if _, err := s.ExportBatches(stream, storage.ExportOptions{Mem: memory.DefaultAllocator}, func(*arrow.Schema) error { return nil },
			func(rec arrow.RecordBatch) error { rec.Retain(); local = append(local, rec); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(local) {
			t.Fatalf("%s: %d record batches through Flight, %d from the store", stream, len(recs), len(local))
		}
		rows := int64(0)
		for i := range recs {
			if !array.RecordEqual(recs[i], local[i]) {
				t.Errorf("%s: batch %d differs", stream, i)
			}
			rows += recs[i].NumRows()
			recs[i].Release()
			local[i].Release()
		}
		if uint64(rows) != events[stream] {
			t.Errorf("%s: %d rows through Flight, want %d", stream, rows, events[stream])
		}
		seen++
	}
	if seen != 2 {
		t.Fatalf("ListFlights listed %d streams, want 2", seen)
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEndpoint(s.Dir()); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("after Close: endpoint file still read: %v", err)
	}
}

// TestToken: with a token, calls without it (or with another) are refused
// as Unauthenticated and counted; the endpoint file names the token file
// and a client through it gets through.
func TestToken(t *testing.T) {
	s := openGolden(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, s, Config{Listen: "127.0.0.1:0", TokenFile: tok})
	for _, e := range []Endpoint{{URI: srv.URI()}, {URI: srv.URI(), TokenFile: writeFile(t, "wrong")}} {
		c, err := Dial(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Stats()
		c.Close()
		if status.Code(errors.Unwrap(err)) != codes.Unauthenticated && status.Code(err) != codes.Unauthenticated {
			if st, ok := status.FromError(errors.Unwrap(err)); !ok || st.Code() != codes.Unauthenticated {
				t.Fatalf("stat with token file %q: %v, want Unauthenticated", e.TokenFile, err)
			}
		}
	}
	if srv.Refused() != 2 {
		t.Fatalf("refused %d calls, want 2", srv.Refused())
	}
	c := dialDir(t, s.Dir())
	if _, err := c.Stats(); err != nil {
		t.Fatalf("with the token: %v", err)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTLS: an endpoint with TLS and a token; the endpoint file names the
// certificate to trust, and a client through it reads the store; a
// plain-text client does not get through.
func TestTLS(t *testing.T) {
	s := openGolden(t)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyf := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	srv := serve(t, s, Config{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: keyf, TokenFile: writeFile(t, "tok")})
	c := dialDir(t, s.Dir())
	if c.URI() != srv.URI() || c.URI()[:11] != "grpc+tls://" {
		t.Fatalf("endpoint %s", c.URI())
	}
	st, err := c.Stats()
	if err != nil || len(st.Streams) == 0 {
		t.Fatalf("stat over TLS: %+v, %v", st, err)
	}
	plain, err := Dial(context.Background(), Endpoint{URI: "grpc://" + srv.URI()[len("grpc+tls://"):]})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Stats(); err == nil {
		t.Fatal("a plain-text client read a TLS endpoint")
	}
}

// TestConfig: off disables; a non-loopback address needs TLS and a token.
func TestConfig(t *testing.T) {
	for _, c := range []struct {
		cfg      Config
		problems int
	}{
		{DefaultConfig(), 0},
		{Config{Listen: "off"}, 0},
		{Config{Listen: ""}, 0},
		{Config{Listen: "localhost:9000"}, 0},
		{Config{Listen: "nowhere"}, 1},
		{Config{Listen: "0.0.0.0:9000"}, 1},
		{Config{Listen: "0.0.0.0:9000", TLSCert: "c", TLSKey: "k"}, 1},
		{Config{Listen: "0.0.0.0:9000", TLSCert: "c", TLSKey: "k", TokenFile: "t"}, 0},
		{Config{Listen: "127.0.0.1:0", TLSCert: "c"}, 1},
		{Config{Listen: "127.0.0.1:0", CloseGrace: -time.Second}, 1},
	} {
		if ps := c.cfg.Validate(); len(ps) != c.problems {
			t.Errorf("%+v: %d problems (%s), want %d", c.cfg, len(ps), ps.String(), c.problems)
		}
	}
	if !DefaultConfig().Enabled() || (Config{Listen: "off"}).Enabled() {
		t.Error("Enabled")
	}
}

// TestBadQuery: tickets that are not a version-1 query of a known stream
// are refused as invalid arguments, with the reason.
func TestBadQuery(t *testing.T) {
	for _, b := range []string{"", "{", `{"version":2,"stream":"accepted"}`, `{"version":1,"stream":"nope"}`, `{"version":1,"stream":"accepted","limit":-1}`} {
		if _, _, _, err := ParseQuery([]byte(b)); !errors.Is(err, ErrBadQuery) {
			t.Errorf("%q: %v, want ErrBadQuery", b, err)
		}
	}
	s := openGolden(t)
	srv := serve(t, s, DefaultConfig())
	fc, err := flight.NewClientWithMiddleware(srv.URI()[len("grpc://"):], nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	g, err := fc.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(`{"version":1,"stream":"nope"}`)})
	if err == nil {
		_, err = g.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad ticket: %v, want InvalidArgument", err)
	}
}

// parquetEqual reads two Parquet files back as Arrow tables and compares
// them (schema, metadata and every value).
func parquetEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	read := func(buf []byte) arrow.Table {
		r, err := file.NewParquetReader(bytes.NewReader(buf))
		if err != nil {
			t.Fatal(err)
		}
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	ta, tb := read(a), read(b)
	defer ta.Release()
	defer tb.Release()
	return ta.NumRows() > 0 && array.TableEqual(ta, tb)
}

// TestCloseCutsHeldStream: a client that opened a DoGet and stopped
// reading keeps its stream (and the server's handler) open; Close waits
// CloseGrace for it, then cuts it (counted in Cut), and returns: the
// node's end is bounded. The client then sees its stream fail.
func TestCloseCutsHeldStream(t *testing.T) {
	s := openGolden(t)
	srv, err := Serve(s, Config{Listen: "127.0.0.1:0", CloseGrace: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fixed 64 KiB flow-control windows (no BDP growth): the server
	// blocks once that much of the ~1 MB export is unread.
	fc, err := flight.NewClientWithMiddleware(srv.URI()[len("grpc://"):], nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	g, err := fc.DoGet(context.Background(), &flight.Ticket{Ticket: QueryOf(storage.Accepted, storage.Selection{}, 0).Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recv(); err != nil { // the schema: the handler runs
		t.Fatal(err)
	}
	// The export is one ~840 kB message: the handler hands it to gRPC
	// and returns, and the bytes wait for the client to read them.
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return within a minute while a client held a DoGet open")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Close returned after %v, before the 200ms grace", d)
	}
	if srv.Cut() != 1 {
		t.Errorf("Cut %d, want the one client holding its DoGet", srv.Cut())
	}
	if srv.calls.Load() != 0 {
		t.Errorf("%d calls still running after Close", srv.calls.Load())
	}
	for {
		if _, err := g.Recv(); err != nil {
			if err == io.EOF {
				t.Fatal("the cut stream ended as if whole")
			}
			break
		}
	}
}

// TestCloseGraceful: a client that ended its calls is that ends within the grace period is
// not cut.
func TestCloseGraceful(t *testing.T) {
	s := openGolden(t)
	srv, err := Serve(s, Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := dialDir(t, s.Dir())
	if _, err := c.Stats(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil || srv.Cut() != 0 {
		t.Fatalf("close: %v, %d calls cut, want none", err, srv.Cut())
	}
}

// TestClientMessageLimit: the client takes record batches larger than
// gRPC's 4 MiB default (a batch of the demo's events is ~42 MB: exporting
// a running node's store failed with ResourceExhausted). Shown by
// bounding the client below one batch of the golden store: the refusal
// proves the bound is the client's own, then the default reads it.
func TestClientMessageLimit(t *testing.T) {
	s := openGolden(t)
	serve(t, s, DefaultConfig())
	export := func() error {
		c := dialDir(t, s.Dir())
		_, err := c.ExportBatches(storage.Accepted, storage.ExportOptions{}, func(*arrow.Schema) error { return nil },
			func(arrow.RecordBatch) error { return nil })
		return err
	}
	old := maxRecvBytes
	maxRecvBytes = 64 << 10
	err := export()
	maxRecvBytes = old
	if status.Code(errors.Unwrap(err)) != codes.ResourceExhausted && status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 64 KiB bound: %v, want ResourceExhausted", err)
	}
	if maxRecvBytes < 256<<20 {
		t.Fatalf("the client takes messages of %d bytes at most: less than a batch of large events", maxRecvBytes)
	}
	if err := export(); err != nil {
		t.Fatal(err)
	}
}
