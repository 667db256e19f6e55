package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// claim returns a copy of mfp whose header claims size bytes.
func claim(mfp []byte, size uint32) []byte {
	b := append([]byte(nil), mfp...)
	binary.LittleEndian.PutUint32(b[24:], size)
	return b
}

// TestClaimedSizeOverLimit: a header claiming more than the packet limit
// ends the read with ErrPacketTooLarge naming the file and the header's
// byte offset, after the packets before it were handed on.
func TestClaimedSizeOverLimit(t *testing.T) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{make([]byte, 1000)}, nil)
	bad := claim(mfp, 2<<20)
	data := append(append(append([]byte(nil), mfp...), bad...), make([]byte, 3<<20)...) // the file holds the claim
	path := filepath.Join(t.TempDir(), "big.mfp")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	in := NewInput(path)
	in.LimitPacket(1 << 20)
	sink := transporttest.NewCheckSink(0)
	err := in.Run(context.Background(), sink)
	if !errors.Is(err, transport.ErrPacketTooLarge) {
		t.Fatalf("Run: %v, want ErrPacketTooLarge", err)
	}
	for _, want := range []string{path, fmt.Sprintf("byte offset %d", len(mfp)), "claims 2097152 bytes", "1048576"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := sink.Counts().Packets; got != 1 {
		t.Fatalf("sink got %d packets, want the 1 before the bad header", got)
	}
}

// TestClaimedSizeBeyondFile: a header claiming ~4 GiB (within the default
// limit's type, beyond the file) is counted truncated without allocating
// the claim.
func TestClaimedSizeBeyondFile(t *testing.T) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{make([]byte, 1000)}, nil)
	for _, size := range []uint32{200 << 20, 0xFFFF_FFF0} {
		path := filepath.Join(t.TempDir(), "cut.mfp")
		if err := os.WriteFile(path, append(append([]byte(nil), mfp...), claim(mfp, size)...), 0o600); err != nil {
			t.Fatal(err)
		}
		in := NewInput(path)
		in.LimitPacket(1 << 40) // no memory limit: only the file's size bounds it
		sink := transporttest.NewCheckSink(0)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := in.Run(context.Background(), sink); err != nil {
			t.Fatalf("claim %d: Run: %v", size, err)
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
			t.Errorf("claim %d: allocated %d bytes reading a %d-byte file", size, got, 2*len(mfp))
		}
		st := in.Stats()
		if st.Packets != 1 || st.Discarded[transport.Truncated] != 1 {
			t.Errorf("claim %d: stats %+v, want 1 packet and 1 truncated", size, st)
		}
	}
}
