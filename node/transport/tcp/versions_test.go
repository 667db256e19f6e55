package tcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
)

// TestStreamVersionsCountedAndLogged: two senders of SenderOptions
// StreamVersion 1 (one connection and two) and one of the default (one
// connection) deliver every packet to one input, which counts its streams by version
// (Stats.ConnectionsByVersion {1: 3, 2: 1}) and logs each accepted stream
// with its version and the remote address.
func TestStreamVersionsCountedAndLogged(t *testing.T) {
	var log transporttest.LogBuffer
	in, err := Listen("127.0.0.1:0", Options{ExpectStreams: 4})
	if err != nil {
		t.Fatal(err)
	}
	in.SetLogger(slog.New(slog.NewJSONHandler(&log, nil)))
	sink := transporttest.NewCountSink()
	_, errc := transporttest.Run(t, in, sink)
	ctx := context.Background()
	const packets = 20
	for _, o := range []SenderOptions{{Connections: 1, StreamVersion: StreamVersion1}, {Connections: 2, StreamVersion: StreamVersion1}, {Connections: 1}} {
		s, err := NewSender(ctx, in.Addr().String(), o, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := range packets {
			if err := s.Send(ctx, transport.Packet{Bytes: transporttest.MFP(uint32(i%2), 300), Source: uint32(i % 2)}); err != nil {
				t.Fatalf("%+v: send %d: %v", o, i, err)
			}
		}
		if err := s.Close(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := in.Stats()
	if got := sink.Packets.Load(); got != 3*packets || st.DiscardTotal() != 0 {
		t.Fatalf("%d packets handed on, %v discarded; want %d, none", got, st.Discarded, 3*packets)
	}
	if want := map[int]uint64{1: 3, 2: 1}; !maps.Equal(st.ConnectionsByVersion, want) {
		t.Fatalf("ConnectionsByVersion %v, want %v", st.ConnectionsByVersion, want)
	}
	versions := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var rec struct {
			Msg, Input, Remote string
			Version            int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg != "readout input accepted a stream" {
			continue
		}
		if rec.Input != "tcp://"+in.Addr().String() || !strings.HasPrefix(rec.Remote, "127.0.0.1:") {
			t.Errorf("record %s: want input tcp://%s and the remote address", line, in.Addr())
		}
		versions[rec.Version]++
	}
	if want := map[int]int{1: 3, 2: 1}; !maps.Equal(versions, want) {
		t.Fatalf("accepted streams logged by version %v, want %v:\n%s", versions, want, log.String())
	}
}

// TestSenderStreamVersionChecked: a stream version other than 1 or 2 (0
// meaning 2) is a setting error, and so is one for a FEROL stream; Dial
// refuses it before connecting.
func TestSenderStreamVersionChecked(t *testing.T) {
	plain := transport.URI{Scheme: "tcp", Target: "127.0.0.1:9000"}
	ferol := transport.URI{Scheme: "tcp", Target: "127.0.0.1:9000", Query: url.Values{"framing": {FramingFEROL}}}
	for _, c := range []struct {
		uri     transport.URI
		version int
		bad     bool
	}{{plain, 0, false}, {plain, 1, false}, {plain, 2, false}, {plain, 3, true}, {plain, -1, true}, {ferol, 0, false}, {ferol, 1, true}} {
		ps := (&SenderOptions{StreamVersion: c.version}).Check(c.uri)
		if bad := len(ps) == 1 && ps[0].Path == "stream_version"; bad != c.bad || (!c.bad && len(ps) > 0) {
			t.Errorf("%s stream_version %d: problems %v, want bad %v", c.uri.Target+"?"+c.uri.Query.Encode(), c.version, ps, c.bad)
		}
	}
	if _, err := DialVersion(context.Background(), "127.0.0.1:9", 0, 3); err == nil || !strings.Contains(err.Error(), "stream version 3") {
		t.Fatalf("DialVersion 3: %v", err)
	}
}
