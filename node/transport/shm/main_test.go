package shm

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.MaybeChild(benchChild)
	code := m.Run()
	// Every ring a test created, or a child it killed left behind, must be
	// gone: ringName's clean-up removes them.
	if left := transporttest.RingsLeft(Dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "files left in %s by the tests: %v\n", Dir, left)
		code = 1
	}
	os.Exit(code)
}

func ringName(t testing.TB) string { return transporttest.RingName(t, Dir) }

const benchPacket = 64 << 10 // bytes per packet in the ring benchmarks

// benchChild writes into a ring: args are "shm" and the ring name.
func benchChild(args []string) (func(string, int) error, func(), error) {
	w, err := CreateWriter(args[1], WriterConfig{DataSize: 16 << 20})
	if err != nil {
		return nil, nil, err
	}
	pkt := transporttest.MFP(0, benchPacket)
	ctx := context.Background()
	return func(_ string, n int) error {
		for range n {
			if err := w.Write(ctx, pkt); err != nil {
				return err
			}
		}
		w.Flush()
		return nil
	}, func() { w.Close() }, nil
}

// openRing creates ring name with dataSize bytes of data and opens a reader
// of it; both are closed when the test ends (the reader first).
func openRing(t testing.TB, name string, dataSize uint64) (*Writer, *Reader) {
	t.Helper()
	w, err := CreateWriter(name, WriterConfig{DataSize: dataSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err := OpenReader(name, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return w, r
}
