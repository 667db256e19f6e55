package tcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

// TestPreambleTimeout: with max_connections 2 and a preamble_timeout of
// 300 ms, two connections that send nothing and one that sends 3 bytes
// of a preamble are closed by the input, each counted under
// Stats.Closed["preamble_timeout"] and logged naming its remote address
// and the deadline; one that connects and closes at once is counted under
// eof_before_preamble.
// The connections closed free their places (the two silent ones take both):
// the third and a sender connecting afterwards are not refused, and the
// sender streams its packets.
func TestPreambleTimeout(t *testing.T) {
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1 << 20, MaxConnections: 2, PreambleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var logs transporttest.LogBuffer
	in.SetLogger(slog.New(slog.NewJSONHandler(&logs, nil)))
	sink := transporttest.NewCountSink()
	transporttest.Run(t, in, sink)
	addr := in.Addr().String()

	silent := func(send []byte) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(send); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var remotes []string
	for round, send := range [][]byte{nil, []byte("STL")} {
		c := silent(send)
		remotes = append(remotes, c.LocalAddr().String())
		if round == 0 {
			c2 := silent(nil)
			remotes = append(remotes, c2.LocalAddr().String())
			waitClosed(t, c2)
		}
		waitClosed(t, c)
	}
	// The counter is bumped before the connection closes: it is there.
	if got := in.Stats().Closed[ClosedPreambleTimeout]; got != 3 {
		t.Fatalf("Closed[%q] = %d, want 3 (closed: %v)", ClosedPreambleTimeout, got, in.Stats().Closed)
	}
	for r, n := range in.Stats().Closed {
		if r != ClosedPreambleTimeout && n != 0 {
			t.Fatalf("Closed = %v, want only %s", in.Stats().Closed, ClosedPreambleTimeout)
		}
	}
	logged := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r struct {
			Msg, Reason, Remote string
			Timeout             string `json:"preamble_timeout"`
			Got                 int    `json:"preamble_bytes_received"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r.Reason != ClosedPreambleTimeout || r.Timeout != "300ms" {
			t.Errorf("log line %q: want reason %s and preamble_timeout 300ms", line, ClosedPreambleTimeout)
		}
		logged[r.Remote] = r.Got
	}
	if len(logged) != 3 {
		t.Fatalf("logged %v, want the 3 connections %v", logged, remotes)
	}
	for i, r := range remotes {
		want := 0
		if i == 2 {
			want = 3
		}
		if got, ok := logged[r]; !ok || got != want {
			t.Errorf("remote %s: logged %v with %d preamble bytes, want %d", r, ok, got, want)
		}
	}
	if st := in.Stats(); st.Refused[RefusedMaxConnections] != 0 || len(st.Refused) != 1 {
		t.Fatalf("refused %v, want max_connections 0 only", st.Refused)
	}

	ctx := context.Background()
	s, err := Dial(ctx, addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	sink.Expect(5)
	for range 5 {
		if err := s.Send(ctx, transporttest.MFP(1, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	s.Flush()
	select {
	case <-sink.Reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of 5 packets arrived after the silent connections were closed", sink.Packets.Load())
	}
	s.Close(ctx)
}

// waitClosed reads c until the input closes it (EOF or a reset); it fails
// the test if c is still open after 30 s (the deadline is 300 ms) or
// carries bytes.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection %s still open after 30 s", c.LocalAddr())
	}
	if n != 0 {
		t.Fatalf("connection %s got %d bytes before any preamble", c.LocalAddr(), n)
	}
}
