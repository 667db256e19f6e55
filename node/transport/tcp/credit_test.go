package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
)

// TestLargeFrameGetsCredit: a sender that sent a frame of just under a
// grant batch (1/8 of the window) and then waits to send one larger than
// 7/8 of the window must get its credit once the sink released the first.
// The first's credit alone is less than a batch, so a receiver that only
// batches its grants would never send it: the sender would wait forever.
// Version 2 says it waits (a credit wanted record), version 1 is granted
// because the sink holds nothing more of its connection. ctx's deadline
// only turns such a deadlock into a failure.
func TestLargeFrameGetsCredit(t *testing.T) {
	const window = 64 << 10
	for _, version := range []int{StreamVersion1, StreamVersion2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			in, err := Listen("127.0.0.1:0", Options{CreditWindow: window, ExpectStreams: 1})
			if err != nil {
				t.Fatal(err)
			}
			sink := transporttest.NewCheckSink(0)
			_, errc := transporttest.Run(t, in, sink)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := DialVersion(ctx, in.Addr().String(), 0, version)
			if err != nil {
				t.Fatal(err)
			}
			small := transporttest.MFP(1, window/8-512)
			large := transporttest.MFP(1, window*7/8+1024)
			if err := s.Send(ctx, small); err != nil {
				t.Fatal(err)
			}
			if err := s.Send(ctx, large); err != nil {
				t.Fatalf("a %d-byte frame after a %d-byte one, window %d: %v (its credit never came)", len(large), len(small), window, err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if st := in.Stats(); st.Packets != 2 || st.Bytes != uint64(len(small)+len(large)) {
				t.Fatalf("received %d packets of %d bytes, want 2 of %d", st.Packets, st.Bytes, len(small)+len(large))
			}
		})
	}
}

// TestGrantPolicy: when a release wakes the connection's grants. Version 2
// grants in batches of 1/8 of the window, also when the sink holds nothing
// more of the connection (version 1 grants then, which for a sink that
// releases at once is a grant per frame), and sooner only for a sender
// that said it waits (credit wanted) once the credit for its frame is
// back: here one that sent 7.5 KiB and waits to send 57.5 KiB through a
// 64 KiB window, whose released 7.5 KiB is less than a batch.
func TestGrantPolicy(t *testing.T) {
	const window, batch = 64 << 10, 8 << 10
	conn := func(w wire) *tcpConn {
		tc := &tcpConn{wire: w, batch: batch, wake: make(chan struct{}, 1)}
		tc.avail.Store(window)
		return tc
	}
	woken := func(tc *tcpConn) bool {
		select {
		case <-tc.wake:
			return true
		default:
			return false
		}
	}
	take := func(tc *tcpConn, n int64) { tc.avail.Add(-n); tc.held.Add(n) } // the reader hands on n bytes
	grant := func(tc *tcpConn) { tc.avail.Add(tc.returned.Swap(0)) }

	v1, v2 := conn(wireV1), conn(wireV2)
	for _, tc := range []*tcpConn{v1, v2} {
		take(tc, 1<<10)
		tc.returnCredit(1 << 10)
	}
	if !woken(v1) {
		t.Error("version 1: the sink holds nothing, no grant")
	}
	if woken(v2) {
		t.Error("version 2: 1 KiB released, the sink holds nothing: a grant of less than a batch nobody asked for")
	}
	for range 7 {
		take(v2, 1<<10)
		if v2.returnCredit(1 << 10); woken(v2) != (v2.returned.Load() >= batch) {
			t.Fatalf("version 2: %d bytes to grant, woken %v", v2.returned.Load(), !woken(v2))
		}
	}
	if grant(v2); v2.avail.Load() != window {
		t.Fatalf("avail %d after the batch, want %d", v2.avail.Load(), window)
	}

	small, large := int64(window/8-512), int64(window*7/8+1024)
	take(v2, small)
	v2.want(window - small) // a grant on its way would cover this: not wanted
	if woken(v2) || v2.wanted.Load() != 0 {
		t.Fatalf("credit wanted that the sender has: woken %v, wanted %d", woken(v2), v2.wanted.Load())
	}
	v2.want(large)
	if woken(v2) {
		t.Fatal("credit wanted before the sink released enough: woken")
	}
	v2.returnCredit(int(small))
	if !woken(v2) {
		t.Fatalf("%d bytes wanted, %d available + %d released: no grant (the sender would wait forever)", large, v2.avail.Load(), v2.returned.Load())
	}
}

// v2Frame is p as a version 2 frame record: header, p, padding.
func v2Frame(p []byte) []byte {
	rec := make([]byte, wireV2.record(len(p)))
	binary.LittleEndian.PutUint32(rec, uint32(len(p)))
	copy(rec[wireV2.header:], p)
	return rec
}

// v2CreditWanted is a version 2 credit wanted record for n bytes.
func v2CreditWanted(n int) []byte {
	rec := make([]byte, wireAlign)
	binary.LittleEndian.PutUint32(rec, uint32(n))
	binary.LittleEndian.PutUint32(rec[4:], recordCreditWanted)
	return rec
}

// TestV2ProtocolViolations: a version 2 record of an unknown kind, a
// credit wanted for nothing or for more than the window, and a frame
// beyond the credit are each counted as a protocol violation and the
// connection closed; a stream cut inside a credit wanted record is no lost
// packet.
func TestV2ProtocolViolations(t *testing.T) {
	const window = 64 << 10
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = transporttest.Run(t, in, transporttest.NewCheckSink(0))
	unknown := v2CreditWanted(100)
	binary.LittleEndian.PutUint32(unknown[4:], 7)
	beyond := v2Frame(make([]byte, window+64))
	for i, tc := range []struct {
		name    string
		stream  []byte
		counted bool // as reason
		reason  transport.Reason
	}{
		{"unknown record kind", unknown, true, transport.Protocol},
		{"credit wanted for 0 bytes", v2CreditWanted(0), true, transport.Protocol},
		{"credit wanted beyond the window", v2CreditWanted(window + 1), true, transport.Protocol},
		{"frame beyond the credit", beyond, true, transport.Protocol},
		{"cut in a frame", v2Frame(transporttest.MFP(1, 200))[:100], true, transport.TruncatedAtDisconnect},
		{"cut in a credit wanted record", v2CreditWanted(100)[:20], false, 0},
	} {
		before := in.Stats()
		c, err := net.Dial("tcp", in.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		pre := binary.LittleEndian.AppendUint32(nil, tcpMagic)
		pre = binary.LittleEndian.AppendUint32(pre, StreamVersion2)
		c.Write(append(pre, make([]byte, preambleV2-8)...))
		var g [8]byte
		if _, err := io.ReadFull(c, g[:]); err != nil { // the window: frames may go
			t.Fatal(err)
		}
		c.Write(tc.stream)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c) // until the receiver closes: it has dealt with the stream
		c.Close()
		for in.Stats().Open != 0 {
			time.Sleep(100 * time.Microsecond)
		}
		after := in.Stats()
		for _, r := range []transport.Reason{transport.Protocol, transport.TruncatedAtDisconnect} {
			want := before.Discarded[r]
			if tc.counted && r == tc.reason {
				want++
			}
			if got := after.Discarded[r]; got != want {
				t.Errorf("%d %s: %s counted %d, want %d", i, tc.name, r, got, want)
			}
		}
		if after.Packets != before.Packets {
			t.Errorf("%s: a packet was handed on", tc.name)
		}
	}
}
