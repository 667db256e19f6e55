package link

import (
	"sync"
	"sync/atomic"

	"github.com/sluice-daq/sluice/node/peer"
)

// Counters are the atomics behind a transport's peer.Stats.
type Counters struct {
	Connected, Accepted          atomic.Uint64
	Open                         atomic.Int64
	ControlSent, ControlReceived atomic.Uint64
	DataSent, DataReceived       atomic.Uint64
	DataBytesSent, DataBytesRecv atomic.Uint64
	SendErrors, DataTruncated    atomic.Uint64
	CopiedBytes                  atomic.Uint64
	Regions                      atomic.Int64

	mu      sync.Mutex
	refused map[string]uint64
	lost    map[string]uint64
}

// CountRefused counts a failed hello by reason (peer.Refused*).
func (c *Counters) CountRefused(reason string) {
	c.mu.Lock()
	if c.refused == nil {
		c.refused = map[string]uint64{}
	}
	c.refused[reason]++
	c.mu.Unlock()
}

// CountLost counts a lost Conn by reason (peer.Lost*).
func (c *Counters) CountLost(reason string) {
	c.mu.Lock()
	if c.lost == nil {
		c.lost = map[string]uint64{}
	}
	c.lost[reason]++
	c.mu.Unlock()
}

// Snapshot fills a peer.Stats (the pool fields are the transport's).
func (c *Counters) Snapshot() peer.Stats {
	s := peer.Stats{
		Connected: c.Connected.Load(), Accepted: c.Accepted.Load(), Open: c.Open.Load(),
		ControlSent: c.ControlSent.Load(), ControlReceived: c.ControlReceived.Load(),
		DataSent: c.DataSent.Load(), DataReceived: c.DataReceived.Load(),
		DataBytesSent: c.DataBytesSent.Load(), DataBytesRecv: c.DataBytesRecv.Load(),
		SendErrors: c.SendErrors.Load(), DataTruncated: c.DataTruncated.Load(),
		CopiedBytes: c.CopiedBytes.Load(), Regions: c.Regions.Load(),
		Refused: map[string]uint64{}, Lost: map[string]uint64{},
	}
	c.mu.Lock()
	for k, v := range c.refused {
		s.Refused[k] = v
	}
	for k, v := range c.lost {
		s.Lost[k] = v
	}
	c.mu.Unlock()
	return s
}
