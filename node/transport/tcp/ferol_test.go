package tcp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/samples"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// ferolPieces cuts a FEROL stream into its fragments' bytes (the blocks of
// each), with their FED ids.
func ferolPieces(t testing.TB, stream []byte) (pieces [][]byte, feds [][]byte) {
	t.Helper()
	fr := cms.NewFEROLReader(bytes.NewReader(stream))
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return pieces, feds
		}
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, stream[f.Offset:fr.Offset()])
		feds = append(feds, append([]byte(nil), f.Data...))
	}
}

// recordSink keeps a copy of every fragment handed on.
type recordSink struct {
	mu    sync.Mutex
	frags []schemas.Fragment
}

func (s *recordSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	defer release()
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Fragments(func(_ int, ev uint64, crc uint32, payload []byte) bool {
		s.frags = append(s.frags, schemas.Fragment{SourceID: p.SourceID, EventID: ev, Flags: p.Flags, CRC: crc, Payload: append([]byte(nil), payload...)})
		return true
	})
	return nil
}

func (s *recordSink) got() []schemas.Fragment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]schemas.Fragment(nil), s.frags...)
}

// runFEROLInput starts a FEROL input expecting streams clean ends and
// returns it, its sink and a wait for its end.
func runFEROLInput(t *testing.T, streams int) (*Input, *recordSink, func() error) {
	t.Helper()
	return runFEROLInputLogged(t, streams, nil)
}

// runFEROLInputLogged is runFEROLInput with the input's records in logs
// (JSON) when it is not nil.
func runFEROLInputLogged(t *testing.T, streams int, logs *transporttest.LogBuffer) (*Input, *recordSink, func() error) {
	t.Helper()
	in, err := Listen("127.0.0.1:0", Options{Framing: FramingFEROL, ExpectStreams: streams, CreditWindow: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if logs != nil {
		in.SetLogger(slog.New(slog.NewJSONHandler(logs, nil)))
	}
	sink := &recordSink{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	t.Cleanup(cancel)
	return in, sink, func() error { defer cancel(); return <-done }
}

// Both real captures, sent as a FEROL sends them (two FEDs' streams on two
// connections, the second capture renumbered to FED 932), arrive as one
// fragment per FED fragment keyed (FED id, event number), the FED
// fragments byte for byte, none flagged; both streams end cleanly.
func TestFEROLInputRealCaptures(t *testing.T) {
	in, sink, wait := runFEROLInput(t, 2)
	s, err := NewFEROLSender(context.Background(), in.ListenAddr(), 2, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]uint64][]byte{}
	for k, name := range []string{"mol_run55.dat.gz", "mol_run2.dat.gz"} {
		pieces, feds := ferolPieces(t, samples.Read(t, "cms/"+name))
		if len(pieces) != 300 {
			t.Fatalf("%s: %d fragments", name, len(pieces))
		}
		fed := uint16(931 + k)
		for i, p := range pieces {
			// The FEROL header's FED id is 931 in both: give the second its own
			// stream's id in the blocks and in the FED header (and its CRC).
			if k == 1 {
				feds[i] = refed(t, feds[i], fed)
				var err error
				if p, err = cms.AppendFEROL(nil, fed, uint32(i+1), feds[i]); err != nil {
					t.Fatal(err)
				}
			}
			want[[2]uint64{uint64(fed), uint64(i + 1)}] = feds[i]
			if err := s.Send(context.Background(), transport.Packet{Bytes: p, Source: uint32(k)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	got := sink.got()
	if len(got) != 600 {
		t.Fatalf("%d fragments handed on, want 600", len(got))
	}
	for _, f := range got {
		w, ok := want[[2]uint64{uint64(f.SourceID), f.EventID}]
		if !ok || !bytes.Equal(f.Payload, w) || f.Flags != 0 || f.CRC != schemas.Checksum(w) {
			t.Fatalf("fragment FED %d event %d (flags %v): not the FED fragment sent", f.SourceID, f.EventID, f.Flags)
		}
		delete(want, [2]uint64{uint64(f.SourceID), f.EventID})
	}
	st := in.Stats()
	if st.Streams != 2 || st.DiscardTotal() != 0 || st.Flagged[FlagFEDCRC]+st.Flagged[FlagFEDErrorBits]+st.Flagged[FlagFEDHeaderMismatch] != 0 || len(st.Flagged) != 3 || st.Packets != 600 || st.HeldBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// refed rewrites FED fragment b's Source_id to fed and its CRC-16 to match.
func refed(t testing.TB, b []byte, fed uint16) []byte {
	t.Helper()
	f, err := cms.DecodeFED(b)
	if err != nil {
		t.Fatal(err)
	}
	f.SourceID = fed
	out, err := cms.AppendFED(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A FED fragment with a bad CRC-16 is handed on flagged and counted
// fed_crc; one whose FED header names another event, fed_header_mismatch.
// A stream cut inside a fragment counts truncated_at_disconnect, one
// framed otherwise (a bad signature) protocol; neither is a clean end, and
// the fragments before them arrive.
func TestFEROLInputBadFragments(t *testing.T) {
	_, feds := ferolPieces(t, samples.Read(t, "cms/mol_run55.dat.gz"))
	corrupt := append([]byte(nil), feds[1]...)
	corrupt[40] ^= 0x5A
	var stream []byte
	for i, fed := range [][]byte{feds[0], corrupt, feds[2]} {
		var err error
		if stream, err = cms.AppendFEROL(stream, 931, uint32(i+1), fed); err != nil {
			t.Fatal(err)
		}
	}
	// FED header LV1 4, FEROL event 9.
	stream, err := cms.AppendFEROL(stream, 931, 9, feds[3])
	if err != nil {
		t.Fatal(err)
	}
	next, _ := cms.AppendFEROL(nil, 931, 5, feds[4])
	for _, tc := range []struct {
		name   string
		tail   []byte
		reason transport.Reason
	}{
		{"cut", next[:100], transport.TruncatedAtDisconnect},
		{"signature", bytes.Repeat([]byte{0xEE}, 32), transport.Protocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs transporttest.LogBuffer
			in, sink, wait := runFEROLInputLogged(t, 0, &logs)
			c, err := net.Dial("tcp", in.ListenAddr())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(append(append([]byte(nil), stream...), tc.tail...)); err != nil {
				t.Fatal(err)
			}
			c.Close()
			for deadline := time.Now().Add(20 * time.Second); in.Stats().Discarded[tc.reason] == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no %v after 20 s: %+v", tc.reason, in.Stats())
				}
			}
			in.Close()
			wait()
			got := sink.got()
			st := in.Stats()
			if len(got) != 4 || got[1].Flags&schemas.FlagSourceError == 0 || got[3].Flags&schemas.FlagSourceError == 0 ||
				got[0].Flags != 0 || got[2].Flags != 0 || got[3].EventID != 9 {
				t.Fatalf("fragments %d: %+v", len(got), got)
			}
			if st.Flagged[FlagFEDCRC] != 1 || st.Flagged[FlagFEDHeaderMismatch] != 1 || st.Streams != 0 || st.DiscardTotal() != 1 {
				t.Fatalf("stats %+v", st)
			}
			// The break is one Warn record, the connection's close, naming
			// why (it was two: the stream's and the connection's).
			warns := 0
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, `"level":"WARN"`) && !strings.Contains(line, "FED fragment") {
					warns++
					if !strings.Contains(line, `"msg":"readout input closed a connection"`) || !strings.Contains(line, `"error":`) {
						t.Errorf("the break's record %s: want the connection's close with its error", line)
					}
				}
			}
			if warns != 1 {
				t.Errorf("%d Warn records for the break, want 1:\n%s", warns, logs.String())
			}
		})
	}
}

// Event numbers are extended past the FEROL's 24 bits per stream: the
// numbers after a wrap continue above 2^24, a straggler from before the
// wrap keeps its own.
func TestEventUnwrapper(t *testing.T) {
	var u cms.EventUnwrapper
	for _, tc := range []struct {
		n    uint32
		want uint64
	}{{1, 1}, {2, 2}, {1<<24 - 1, 1<<24 - 1}, {0, 1 << 24}, {3, 1<<24 | 3}, {1<<24 - 2, 1<<24 - 2}, {4, 1<<24 | 4}, {1 << 23, 1<<24 | 1<<23}, {1<<24 - 1, 1<<24 | (1<<24 - 1)}, {1, 2<<24 | 1}} {
		if got := u.Event(tc.n); got != tc.want {
			t.Fatalf("event number %#x: %#x, want %#x", tc.n, got, tc.want)
		}
	}
}
