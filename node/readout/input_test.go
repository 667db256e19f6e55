package readout

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

const (
	sampleVDIF = "../../testdata/third_party/baseband/sample.vdif"
	sampleMDF  = "../../testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		uri, scheme, target string
	}{
		{"shm://ring0", "shm", "ring0"},
		{"tcp://127.0.0.1:9000", "tcp", "127.0.0.1:9000"},
		{"udp://[::1]:0", "udp", "[::1]:0"},
		{"udp://127.0.0.1:9000?format=vtp", "udp", "127.0.0.1:9000"},
		{"file:///data/run1.mfp", "file", "/data/run1.mfp"},
		{"file://rel/run1.mfp", "file", "rel/run1.mfp"},
	} {
		e, err := ParseURI(tc.uri)
		if err != nil || e.Scheme != tc.scheme || e.Target != tc.target {
			t.Errorf("ParseURI(%q) = %+v, %v; want %s %s", tc.uri, e, err, tc.scheme, tc.target)
		}
	}
	for _, bad := range []string{"", "ring0", "http://x:1", "shm://", "shm://a/b", "tcp://127.0.0.1", "tcp://127.0.0.1:http", "udp://:99999", "file://", "udp://1.2.3.4:5?%zz"} {
		if _, err := ParseURI(bad); !errors.Is(err, ErrBadURI) {
			t.Errorf("ParseURI(%q): %v, want ErrBadURI", bad, err)
		}
	}
	if _, err := Open("udp://127.0.0.1:0?format=mdf", Config{}); !errors.Is(err, ErrBadURI) {
		t.Errorf("unknown udp format: %v, want ErrBadURI", err)
	}
	if _, err := Open("tcp://127.0.0.1:0?window=5", Config{}); !errors.Is(err, ErrBadURI) {
		t.Errorf("unknown tcp option: %v, want ErrBadURI", err)
	}
	// Inputs opened but never run release their sockets on Close.
	for _, uri := range []string{"tcp://127.0.0.1:0", "udp://127.0.0.1:0"} {
		in, err := Open(uri, Config{})
		if err != nil {
			t.Fatal(err)
		}
		c := in.(interface{ Close() error })
		if err := c.Close(); err != nil {
			t.Errorf("%s: Close: %v", uri, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s: second Close: %v", uri, err)
		}
	}
}

func TestFileInputRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.mfp")
	cfg := synthConfig("file://"+path, 200)
	cfg.Faults = Faults{Corrupt: 0.1, Duplicate: 0.1, Drop: 0.1}
	sum, err := RunEmulator(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Open("file://"+path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sink := newCheckSink(0)
	if err := in.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	st := in.Stats()
	if st.Packets != sum.PacketsSent || st.Bytes != sum.BytesSent || sink.badCRC != sum.Faults[FaultCorrupt] || sink.dups != sum.FaultFragments[FaultDuplicate] {
		t.Fatalf("read %+v (dups %d, bad CRC %d), sent %+v", st, sink.dups, sink.badCRC, sum)
	}
	// Cut the file inside its last packet: counted truncated, the rest read.
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-5], 0o644)
	in2 := NewFileInput(path)
	if err := in2.Run(context.Background(), newCheckSink(0)); err != nil {
		t.Fatal(err)
	}
	if st2 := in2.Stats(); st2.Packets != sum.PacketsSent-1 || st2.Discarded[ReasonTruncated] != 1 {
		t.Fatalf("cut file: %+v, want %d packets and 1 truncated", st2, sum.PacketsSent-1)
	}
	// Garbage where a packet header should be: a decode error with its offset.
	os.WriteFile(path, append(b[:len(b):len(b)], make([]byte, 40)...), 0o644)
	var de *schemas.DecodeError
	if err := NewFileInput(path).Run(context.Background(), newCheckSink(0)); !errors.As(err, &de) || de.Offset != int64(len(b)) {
		t.Fatalf("garbage after %d bytes: %v, want a DecodeError at that offset", len(b), err)
	}
}

// The emulator replays an MDF file split into per-source packets; --loop
// shifts event ids so every replay's fragments are new.
func TestEmulatorReplaysMDFWithLoop(t *testing.T) {
	dir := t.TempDir()
	run := func(loop int) (Summary, *checkSink) {
		path := filepath.Join(dir, "mdf.mfp")
		sum, err := RunEmulator(context.Background(), EmulatorConfig{To: "file://" + path, From: sampleMDF, Loop: loop, Packing: 2})
		if err != nil {
			t.Fatal(err)
		}
		sink := newCheckSink(0)
		if err := NewFileInput(path).Run(context.Background(), sink); err != nil {
			t.Fatal(err)
		}
		return sum, sink
	}
	one, s1 := run(1)
	three, s3 := run(3)
	if one.Mode != "file:mdf" || one.Sources < 100 {
		t.Fatalf("MDF sample: mode %s, %d sources", one.Mode, one.Sources)
	}
	if three.PacketsSent != 3*one.PacketsSent || s3.unique != 3*s1.unique || s3.dups != 0 || s1.badCRC != 0 {
		t.Fatalf("loop 3: %d packets, %d distinct fragments (%d dups); loop 1: %d, %d", three.PacketsSent, s3.unique, s3.dups, one.PacketsSent, s1.unique)
	}
}

// VTP: VDIF frames over UDP, each frame handed on as a one-fragment MFP
// whose payload is the frame, unchanged.
func TestVTPOverUDP(t *testing.T) {
	in, err := Open("udp://127.0.0.1:0?format=vtp", Config{ExpectStreams: 1, LatencyBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	addr := in.(*UDPInput).Addr().String()
	sink := &frameSink{}
	errc := make(chan error, 1)
	go func() { errc <- in.Run(context.Background(), sink) }()
	sum, err := RunEmulator(context.Background(), EmulatorConfig{To: "udp://" + addr + "?format=vtp", From: sampleVDIF, Rate: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(sampleVDIF)
	defer f.Close()
	r := vdif.NewReader(f)
	var frames [][]byte
	for {
		fr, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, append([]byte(nil), fr.Bytes...))
	}
	if sum.Mode != "file:vdif" || uint64(len(frames)) != sum.PacketsSent || len(sink.got) != len(frames) {
		t.Fatalf("%d frames in the file, %d sent (%s), %d received", len(frames), sum.PacketsSent, sum.Mode, len(sink.got))
	}
	for i, fr := range frames {
		if string(sink.got[i]) != string(fr) {
			t.Fatalf("frame %d changed on the way", i)
		}
	}
	if sink.badCRC != 0 {
		t.Fatalf("%d frames with a CRC that does not match", sink.badCRC)
	}
}

// frameSink keeps a copy of every one-fragment packet's payload.
type frameSink struct {
	got    [][]byte
	badCRC int
}

func (s *frameSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	defer release()
	p.Fragments(func(_ int, _ uint64, crc uint32, payload []byte) bool {
		s.got = append(s.got, append([]byte(nil), payload...))
		if schemas.Checksum(payload) != crc {
			s.badCRC++
		}
		return true
	})
	return nil
}

func TestEmulatorRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []EmulatorConfig{
		{To: "file:///dev/null", Faults: Faults{Drop: 0.6, Corrupt: 0.6}},
		{To: "file:///dev/null", Faults: Faults{Stall: 2}},
		{To: "udp://127.0.0.1:9?format=vtp"},
		{To: "file:///dev/null", From: "/nonexistent"},
		{To: "ftp://x"},
	} {
		if _, err := RunEmulator(ctx, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := RunEmulator(ctx, EmulatorConfig{To: "file:///dev/null", Faults: Faults{Truncate: 1}}); err == nil {
		t.Error("truncation into a file accepted")
	}
	for _, s := range []string{"fixed:", "uniform:5", "uniform:9,3", "lognormal:0,1", "gauss:1,2", "fixed:-1"} {
		if _, err := ParseSizeDist(s); err == nil {
			t.Errorf("size distribution %q accepted", s)
		}
	}
	for _, s := range []string{"0-3", "ecal:0-3,hcal:3", "ecal:", ":1"} {
		if _, err := ParseGroups(s); err == nil {
			t.Errorf("groups %q accepted", s)
		}
	}
	g, err := ParseGroups("ecal:0-1,5,muon:2")
	if err != nil || len(g) != 2 || len(g[0].Sources) != 3 || g[1].Name != "muon" {
		t.Errorf("ParseGroups: %+v, %v", g, err)
	}
}

// The TCP receiver enforces the protocol: a wrong preamble and a frame
// beyond the granted credit are counted and the connection closed.
func TestTCPProtocolViolations(t *testing.T) {
	in, err := ListenTCP("127.0.0.1:0", Config{CreditWindow: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- in.Run(ctx, newCheckSink(0)) }()
	defer func() { cancel(); <-errc }()
	s, err := DialTCP(ctx, in.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, make([]byte, 2000)); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("2000-byte packet with a 1024-byte window: %v", err)
	}
	// Bypass the sender's credit check: the receiver must catch it.
	var h [4]byte
	binary.LittleEndian.PutUint32(h[:], 2000)
	s.conn.Write(h[:])
	s.conn.Write(make([]byte, 2000))
	<-s.closed
	raw, err := DialTCP(ctx, in.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	raw.conn.Close()
	c, err := net.Dial("tcp", in.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	io.ReadAll(c)
	c.Close()
	if got := in.Stats().Discarded[ReasonProtocol]; got != 2 {
		t.Fatalf("protocol violations counted %d, want 2", got)
	}
}
