package emulator

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/file"
	"github.com/sluice-daq/sluice/node/transport/udp"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

const (
	sampleVDIF = "../../testdata/third_party/baseband/sample.vdif"
	sampleMDF  = "../../testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"
)

func TestFileInputRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.mfp")
	cfg := synthConfig("file://"+path, 200)
	cfg.Faults = Faults{Corrupt: 0.1, Duplicate: 0.1, Drop: 0.1}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := transport.OpenInput("file://"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := transporttest.NewCheckSink(0)
	if err := in.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	st, got := in.Stats(), sink.Counts()
	if st.Packets != sum.PacketsSent || st.Bytes != sum.BytesSent || got.BadCRC != sum.Faults[FaultCorrupt] || got.Dups != sum.FaultFragments[FaultDuplicate] {
		t.Fatalf("read %+v (%+v), sent %+v", st, got, sum)
	}
	// Cut the file inside its last packet: counted truncated, the rest read.
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-5], 0o644)
	in2 := file.NewInput(path)
	if err := in2.Run(context.Background(), transporttest.NewCheckSink(0)); err != nil {
		t.Fatal(err)
	}
	if st2 := in2.Stats(); st2.Packets != sum.PacketsSent-1 || st2.Discarded[transport.Truncated] != 1 {
		t.Fatalf("cut file: %+v, want %d packets and 1 truncated", st2, sum.PacketsSent-1)
	}
	// Garbage where a packet header should be: a decode error with its offset.
	os.WriteFile(path, append(b[:len(b):len(b)], make([]byte, 40)...), 0o644)
	var de *schemas.DecodeError
	if err := file.NewInput(path).Run(context.Background(), transporttest.NewCheckSink(0)); !errors.As(err, &de) || de.Offset != int64(len(b)) {
		t.Fatalf("garbage after %d bytes: %v, want a DecodeError at that offset", len(b), err)
	}
}

// The emulator replays an MDF file split into per-source packets; --loop
// shifts event ids so every replay's fragments are new.
func TestEmulatorReplaysMDFWithLoop(t *testing.T) {
	dir := t.TempDir()
	run := func(loop int) (Summary, transporttest.CheckCounts) {
		path := filepath.Join(dir, "mdf.mfp")
		sum, err := Run(context.Background(), Config{To: "file://" + path, From: sampleMDF, Loop: loop, Packing: 2})
		if err != nil {
			t.Fatal(err)
		}
		sink := transporttest.NewCheckSink(0)
		if err := file.NewInput(path).Run(context.Background(), sink); err != nil {
			t.Fatal(err)
		}
		return sum, sink.Counts()
	}
	one, s1 := run(1)
	three, s3 := run(3)
	if one.Mode != "file:mdf" || one.Sources < 100 {
		t.Fatalf("MDF sample: mode %s, %d sources", one.Mode, one.Sources)
	}
	if three.PacketsSent != 3*one.PacketsSent || s3.Unique != 3*s1.Unique || s3.Dups != 0 || s1.BadCRC != 0 {
		t.Fatalf("loop 3: %d packets, %d distinct fragments (%d dups); loop 1: %d, %d", three.PacketsSent, s3.Unique, s3.Dups, one.PacketsSent, s1.Unique)
	}
}

// VTP: VDIF frames over UDP, each frame handed on as a one-fragment MFP
// whose payload is the frame, unchanged.
func TestVTPOverUDP(t *testing.T) {
	in, err := transport.OpenInput("udp://127.0.0.1:0?format=vtp", &udp.Options{ExpectStreams: 1, LatencyBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	addr := in.(*udp.Input).Addr().String()
	sink := &frameSink{}
	errc := make(chan error, 1)
	go func() { errc <- in.Run(context.Background(), sink) }()
	sum, err := Run(context.Background(), Config{To: "udp://" + addr + "?format=vtp", From: sampleVDIF, Rate: 20000})
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
	for _, cfg := range []Config{
		{To: "file:///dev/null", Faults: Faults{Drop: 0.6, Corrupt: 0.6}},
		{To: "file:///dev/null", Faults: Faults{Stall: 2}},
		{To: "udp://127.0.0.1:9?format=vtp"},
		{To: "file:///dev/null", From: "/nonexistent"},
		{To: "ftp://x"},
	} {
		if _, err := Run(ctx, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := Run(ctx, Config{To: "file:///dev/null", Faults: Faults{Truncate: 1}}); err == nil {
		t.Error("truncation into a file accepted")
	}
	for _, s := range []string{"fixed:", "uniform:5", "uniform:9,3", "lognormal:0,1", "lognormal:100,0", "gauss:1,2", "fixed:-1", "fixed:0", "fixed:1.5"} {
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
