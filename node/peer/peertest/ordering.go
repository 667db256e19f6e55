package peertest

import (
	"context"
	"sync"
	"testing"

	"github.com/sluice-daq/sluice/node/peer"
)

// testOrdering: both directions at once, control and data interleaved;
// each kind arrives in the order sent, intact, in the receive pool.
func (f *Factory) testOrdering(t *testing.T) {
	ta, tb, a, b := f.pair(t, Config("a"), Config("b"))
	const n = 2000
	ctx := context.Background()
	var wg sync.WaitGroup
	sender := func(tr peer.Transport, c peer.Conn) {
		defer wg.Done()
		s := newSlots(t, tr, 16, 4096)
		defer s.close(t)
		for i := uint64(0); i < n; i++ {
			if err := c.SendControl(ctx, uint16(i), hdr(i)); err != nil {
				t.Error(err)
				return
			}
			if err := s.send(ctx, c, i, int(i%4096)+1); err != nil {
				t.Error(err)
				return
			}
		}
	}
	receiver := func(tr peer.Transport, c peer.Conn) {
		defer wg.Done()
		var ctl, data uint64
		for ctl < n || data < n {
			m, err := c.Recv(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			switch m.Kind {
			case peer.KindControl:
				if s := seqOf(t, m.Body); s != ctl || m.Type != uint16(ctl) {
					t.Errorf("control message %d (type %d) where %d was due", s, m.Type, ctl)
					return
				}
				ctl++
			case peer.KindData:
				if s := seqOf(t, m.Header); s != data || len(m.Data.Bytes()) != int(data%4096)+1 {
					t.Errorf("data message %d of %d bytes where %d was due", s, len(m.Data.Bytes()), data)
					return
				}
				checkFill(t, m.Data.Bytes(), data)
				checkInPool(t, tr, m.Data.Bytes())
				m.Data.Release()
				data++
			}
		}
	}
	wg.Add(4)
	go sender(ta, a)
	go sender(tb, b)
	go receiver(ta, a)
	go receiver(tb, b)
	wg.Wait()
	for _, tr := range []peer.Transport{ta, tb} {
		s := tr.Stats()
		if s.ControlSent != n || s.ControlReceived != n || s.DataSent != n || s.DataReceived != n {
			t.Errorf("%s stats: control %d/%d data %d/%d, want %d each", tr.Addr(), s.ControlSent, s.ControlReceived, s.DataSent, s.DataReceived, n)
		}
		if s.CopiedBytes != 0 {
			t.Errorf("%s copied %d payload bytes", tr.Addr(), s.CopiedBytes)
		}
	}
}
