package tcp

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

// TestConnectionsClosedCounted: every connection an input accepts is
// counted once it closes, under the reason it closed for, and logged with
// its remote address and the bytes it sent: an HTTP request where a
// preamble goes (bad_preamble, 8 bytes read), 3 bytes of a preamble and a
// close (eof_in_preamble), a connect and close (eof_before_preamble), a
// version 2 stream whose sender closes after one frame without an
// end-of-stream frame (peer_closed, the preamble and the frame's record),
// and a stream that ends cleanly (end_of_stream).
func TestConnectionsClosedCounted(t *testing.T) {
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1 << 20, MaxConnections: 4, PreambleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs transporttest.LogBuffer
	in.SetLogger(slog.New(slog.NewJSONHandler(&logs, nil)))
	sink := transporttest.NewCountSink()
	transporttest.Run(t, in, sink)
	addr := in.Addr().String()

	want := map[string]uint64{}
	remotes := map[string]string{} // reason -> remote address
	wantBytes := map[string]int64{}
	// closed waits until the input counted the connection under reason.
	closed := func(reason, remote string, rx int64) {
		t.Helper()
		want[reason]++
		remotes[reason], wantBytes[reason] = remote, rx
		for deadline := time.Now().Add(30 * time.Second); in.Stats().Closed[reason] < want[reason]; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: Closed = %v after 30 s, want %s %d", remote, in.Stats().Closed, reason, want[reason])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	dial := func() *net.TCPConn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.TCPConn)
	}

	c := dial()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: node\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c)
	closed(ClosedBadPreamble, c.LocalAddr().String(), 8)

	c = dial()
	if _, err := c.Write([]byte("STL")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	closed(ClosedEOFInPreamble, c.LocalAddr().String(), 3)

	c = dial()
	c.Close()
	closed(ClosedEOFBeforePreamble, c.LocalAddr().String(), 0)

	// A version 2 stream by hand: the preamble, the grant, one frame, close.
	c = dial()
	rec := make([]byte, preambleV2)
	binary.LittleEndian.PutUint32(rec[0:], tcpMagic)
	binary.LittleEndian.PutUint32(rec[4:], StreamVersion2)
	p := transporttest.MFP(1, 1000)
	frame := make([]byte, wireV2.record(len(p)))
	binary.LittleEndian.PutUint32(frame[0:], uint32(len(p)))
	copy(frame[wireAlign:], p)
	var grant [8]byte
	sink.Expect(1)
	if _, err := c.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(grant[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	<-sink.Reached
	c.Close()
	closed(ClosedPeerClosed, c.LocalAddr().String(), int64(len(rec)+len(frame)))

	ctx := context.Background()
	s, err := Dial(ctx, addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	remote := s.conn.LocalAddr().String()
	if err := s.Send(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed(ClosedEndOfStream, remote, int64(preambleV2+len(frame)+wireAlign))

	st := in.Stats()
	for _, r := range closedReasons {
		if st.Closed[r] != want[r] {
			t.Errorf("Closed[%s] = %d, want %d", r, st.Closed[r], want[r])
		}
	}
	logged := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Msg, Reason, Remote, Level string
			Bytes                      int64 `json:"bytes_received"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Msg != "readout input closed a connection" {
			continue
		}
		if l.Remote != remotes[l.Reason] || l.Bytes != wantBytes[l.Reason] || logged[l.Reason] {
			t.Errorf("log line %q: want remote %s, bytes_received %d, once", line, remotes[l.Reason], wantBytes[l.Reason])
		}
		// What may have lost data warns; a clean end and a connect that
		// sent nothing inform.
		wantLevel := "WARN"
		if l.Reason == ClosedEndOfStream || l.Reason == ClosedEOFBeforePreamble {
			wantLevel = "INFO"
		}
		if l.Level != wantLevel {
			t.Errorf("log line %q: want level %s", line, wantLevel)
		}
		logged[l.Reason] = true
	}
	if len(logged) != len(want) {
		t.Errorf("logged closes for %v, want %v", logged, want)
	}
}

// TestSenderRefusedNamesMaxConnections: a sender of 3 connections to an
// input with max_connections 2 fails on its third once it stops retrying,
// with one error that names the stream once, says the receiver closed its
// connections before granting credit and points at max_connections; the
// input counted the refusals.
func TestSenderRefusedNamesMaxConnections(t *testing.T) {
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1 << 20, MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	in.SetLogger(slog.New(slog.DiscardHandler))
	transporttest.Run(t, in, transporttest.NewCountSink())
	saved := reconnectTimeout
	reconnectTimeout = 300 * time.Millisecond
	t.Cleanup(func() { reconnectTimeout = saved })

	_, err = NewSender(context.Background(), in.Addr().String(), SenderOptions{Connections: 3}, 3)
	if err == nil {
		t.Fatal("3 connections to an input that takes 2: no error")
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	if n := strings.Count(msg, "readout tcp://"); n != 1 {
		t.Errorf("error %q names the stream %d times, want once", msg, n)
	}
	for _, w := range []string{"closed every connection before granting credit", "max_connections", "connection 3 of 3"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	if r := in.Stats().Refused[RefusedMaxConnections]; r == 0 {
		t.Errorf("the input refused no connection (refused %v)", in.Stats().Refused)
	}
}
