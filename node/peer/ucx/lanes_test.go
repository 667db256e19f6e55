//go:build ucx

package ucx_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer/peertest"
	"github.com/sluice-daq/sluice/node/peer/ucx"
)

func TestLanes(t *testing.T) {
	a, err := ucx.New(peertest.Config("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ucx.New(peertest.Config("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.Connect(ctx, b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UCX_TLS=%q:\n%s", os.Getenv("UCX_TLS"), c.(*ucx.Conn).Lanes())
}

// TestGoKeepsSignals: with a transport open, a nil dereference in Go is
// still Go's to recover (UCX did not take SIGSEGV), and malloc/mmap from C
// (cgo) still work (no UCX memory hooks in the way).
func TestGoKeepsSignals(t *testing.T) {
	tr, err := ucx.New(peertest.Config("sig"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	recovered := func() (ok bool) {
		defer func() { ok = recover() != nil }()
		var p *int
		return *p == 0
	}()
	if !recovered {
		t.Fatal("nil dereference was not recovered")
	}
	r, err := tr.AllocRegion(64 << 20) // a fresh mmap through libc after ucp_init
	if err != nil {
		t.Fatal(err)
	}
	r.Bytes()[64<<20-1] = 1
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
