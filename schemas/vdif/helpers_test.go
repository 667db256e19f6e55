package vdif

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
)

// sample returns a baseband sample file from testdata/third_party/baseband.
func sample(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", "baseband", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// wantDecodeError fails unless err is a *schemas.DecodeError of the given
// format wrapping sentinel at offset off.
func wantDecodeError(t *testing.T, err error, format string, sentinel error, off int64) {
	t.Helper()
	if de := decodetest.Want(t, err, sentinel, off); de.Format != format {
		t.Fatalf("error %q: want format %q", err, format)
	}
}

// frames decodes every frame of an in-memory VDIF stream, copying them.
func frames(tb testing.TB, b []byte) []Frame {
	tb.Helper()
	var out []Frame
	for off := 0; off < len(b); {
		f, err := DecodeFrame(b[off:])
		if err != nil {
			tb.Fatalf("frame at %d: %v", off, err)
		}
		f.Offset = int64(off)
		out = append(out, f)
		off += len(f.Bytes)
	}
	return out
}

// mustAppendFrame encodes a frame or fails the test.
func mustAppendFrame(tb testing.TB, dst []byte, h Header, payload []byte) []byte {
	tb.Helper()
	out, err := AppendFrame(dst, h, payload)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// edv0Header is a plain EDV 0 header of thread th at (seconds, frame).
func edv0Header(th uint16, seconds, frame uint32) Header {
	return Header{Seconds: seconds, RefEpoch: 40, FrameNumber: frame, Version: 1, BitsPerSample: 2, ThreadID: th, StationID: 0x4142}
}
