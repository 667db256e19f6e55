package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/schemas"
)

// route carries out what the state machines asked for, until none asks
// for more (delivering to this node's own machines makes new outputs).
func (a *Agent) route(ctx context.Context) {
	for round := 0; round < 64; round++ {
		n := 0
		if a.em != nil {
			for _, o := range a.em.Outputs() {
				n++
				a.routeEM(ctx, o)
			}
		}
		if a.ru != nil {
			for _, o := range a.ru.Outputs() {
				n++
				a.routeRU(o)
			}
		}
		if a.bu != nil {
			for _, o := range a.bu.Outputs() {
				n++
				a.routeBU(ctx, o)
			}
		}
		if n == 0 {
			return
		}
	}
}

// send puts a control message for node on its queue, or applies it here
// when node is this one.
func (a *Agent) send(node string, typ uint16, body []byte) {
	if node == a.cfg.Node {
		if err := a.control(node, typ, body); err != nil {
			a.log.Error("farm: own message", "err", err)
		}
		return
	}
	a.ensurePeer(a.ctx, node).enqueue(outMsg{typ: typ, body: body})
}

// rus lists the RU members, sorted.
func (a *Agent) rus() []string {
	var out []string
	for n, m := range a.members {
		if m.roles&farm.RoleRU != 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (a *Agent) routeEM(ctx context.Context, o farm.Output) {
	switch o.Kind {
	case farm.OutReserve:
		l, em, n := a.lead, a.em, a.cfg.BlockSize
		go func() {
			b, err := l.Reserve(ctx, n)
			a.post(ctx, func() {
				if a.em != em {
					return
				}
				if err != nil {
					if errors.Is(err, control.ErrNotLeader) {
						a.log.Warn("farm: deposed", "epoch", em.Epoch())
						a.em, a.lead = nil, nil
					} else if ctx.Err() == nil {
						a.log.Error("farm: reserve ids", "err", err)
					}
					return
				}
				if err := em.Reserved(b); err != nil {
					a.log.Error("farm: reserved block", "err", err)
				}
			})
		}()
	case farm.OutAssign:
		body, err := farm.AppendAssign(nil, o.Assign)
		if err != nil {
			a.log.Error("farm: encode assign", "err", err)
			return
		}
		dests := map[string]bool{o.Assign.BU: true}
		if o.ToRUs {
			for _, ru := range a.rus() {
				dests[ru] = true
			}
		}
		for _, d := range sortedKeys(dests) {
			a.send(d, uint16(farm.KindAssign), body)
		}
	case farm.OutVoid:
		v, run := o.Void, a.cfg.Run.Run
		a.log.Warn("farm: builder unit declared dead; its unreleased assignments go to other BUs",
			"bu", v.BU, "incarnation", fmt.Sprintf("%x", v.Incarnation), "assignments", len(v.Assigns))
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := a.cfg.Control.PutVoid(pctx, run, v); err != nil && ctx.Err() == nil {
				a.log.Error("farm: void record", "bu", v.BU, "err", err)
			}
		}()
	case farm.OutRelease:
		body, err := farm.AppendRelease(nil, o.Release)
		if err != nil {
			a.log.Error("farm: encode release", "err", err)
			return
		}
		for _, ru := range a.rus() {
			a.send(ru, typRelay, body)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *Agent) routeRU(o farm.RUOutput) {
	switch o.Kind {
	case farm.RUFree:
		o.Packet.Handle.(*held).free()
	case farm.RUSend:
		packets := make([][]byte, len(o.Packets))
		hs := make([]*held, len(o.Packets))
		for i, p := range o.Packets {
			hs[i] = p.Handle.(*held)
			hs[i].pin()
			packets[i] = hs[i].mfp.Bytes()
		}
		unpin := func() {
			for _, h := range hs {
				h.unpin()
			}
		}
		if o.BU == a.cfg.Node {
			// This node's own BU: one copy, as a remote BU's receive makes
			// (the RU frees its packets at the release policy, which may
			// come before the pipeline is done with the bytes).
			var buf []byte
			for _, b := range packets {
				buf = append(buf, b...)
			}
			unpin()
			a.onData(a.cfg.Node, o.Header, localBuffer(buf))
			return
		}
		if a.ended[o.Header.Incarnation] {
			// Its BU incarnation ended (fenced, left): nobody will take
			// the data, and queued it would pin the packets for ever.
			unpin()
			a.drop("data_for_ended_bu")
			return
		}
		h, err := farm.AppendData(nil, o.Header)
		if err != nil {
			unpin()
			a.log.Error("farm: encode data header", "err", err)
			return
		}
		a.ensurePeer(a.ctx, o.BU).enqueue(outMsg{header: h, packets: packets, unpin: unpin, inc: o.Header.Incarnation})
	}
}

// localBuffer is a payload this node's RU handed its own BU.
type localBuffer []byte

func (b localBuffer) Bytes() []byte { return b }
func (b localBuffer) Release()      {}

func (a *Agent) routeBU(ctx context.Context, o farm.BUOutput) {
	switch o.Kind {
	case farm.BUCredit:
		body, err := farm.AppendCredit(nil, o.Credit)
		if err == nil {
			a.toEMBody(uint16(farm.KindCredit), body)
		}
	case farm.BURelease:
		body, err := farm.AppendRelease(nil, o.Release)
		if err == nil {
			a.toEMBody(uint16(farm.KindRelease), body)
		}
	case farm.BURequest:
		body, err := farm.AppendRequest(nil, o.Request)
		if err == nil {
			a.send(o.RU, uint16(farm.KindRequest), body)
		}
	case farm.BUComplete:
		a.build(o.Assignment, o.Missing)
	case farm.BUDrained:
		a.log.Info("farm: drained")
	case farm.BUDiscard:
		if r := a.data[o.Assignment.ID]; r != nil {
			for _, b := range r.bufs {
				b.Release()
			}
			delete(a.data, o.Assignment.ID)
		}
		a.drop("data_never_assigned")
	}
}

// toEMBody sends a message to the EM (dropped, counted, when none leads:
// BUs credit the next EM afresh).
func (a *Agent) toEMBody(typ uint16, body []byte) {
	if !a.hasLead {
		a.drop("no_em")
		return
	}
	a.send(a.leader.Node, typ, body)
}

// toEM sends an announcement to the EM, or keeps it until one leads.
func (a *Agent) toEM(_ context.Context, an farm.Announce) {
	if !a.hasLead {
		a.early = append(a.early, an)
		return
	}
	body, err := farm.AppendAnnounce(nil, an)
	if err != nil {
		a.log.Error("farm: encode announce", "err", err)
		return
	}
	a.send(a.leader.Node, uint16(farm.KindAnnounce), body)
}

// received is what arrived for one assignment: the payloads and the
// multi-fragment packets in them.
type received struct {
	bufs []peer.Buffer
	mfps []schemas.MFP
}

// onData takes one data message for this node's BU: its packets are
// decoded at once (the BU's completeness is by source), the payload kept
// until the assignment is built.
func (a *Agent) onData(from string, h farm.DataHeader, buf peer.Buffer) {
	if a.bu == nil {
		a.drop("data_not_bu")
		buf.Release()
		return
	}
	var mfps []schemas.MFP
	var srcs []uint32
	for rest := buf.Bytes(); len(rest) > 0; {
		p, n, err := schemas.DecodeMFP(rest)
		if err != nil {
			a.log.Warn("farm: bad packet in data", "peer", from, "assignment", h.Assignment, "err", err)
			a.drop("bad_packet")
			break
		}
		mfps = append(mfps, p)
		if !slices.Contains(srcs, p.SourceID) {
			srcs = append(srcs, p.SourceID)
		}
		rest = rest[n:]
	}
	if !a.bu.Data(from, h, srcs) {
		a.drop("data_refused")
		buf.Release()
		return
	}
	r := a.data[h.Assignment]
	if r == nil {
		r = &received{}
		a.data[h.Assignment] = r
	}
	r.bufs = append(r.bufs, buf)
	r.mfps = append(r.mfps, mfps...)
}

// build hands a complete assignment to the pipeline.
func (a *Agent) build(as farm.Assign, missing []uint32) {
	r := a.data[as.ID]
	delete(a.data, as.ID)
	if r == nil {
		r = &received{}
	}
	released := false
	a.cfg.Pipeline.Build(as, r.mfps, missing, func() {
		if released {
			panic("agent: assignment data released twice")
		}
		released = true
		for _, b := range r.bufs {
			b.Release()
		}
	})
}

// held is a packet the RU tracker holds: the readout's bytes and how to
// give them back. A data message queued for a peer pins the packets it
// views until they are copied into the send pool (or the message is
// dropped): the RU may free a packet meanwhile — its assignment released
// by a BU that gave up waiting, or superseded after its BU died — and the
// readout must not reuse (or unmap) the bytes under the copy.
type held struct {
	mfp     schemas.MFP
	release func()

	mu    sync.Mutex
	pins  int
	freed bool // the RU let it go: released at the last unpin
	gone  bool // release called
}

func (h *held) pin() {
	h.mu.Lock()
	h.pins++
	h.mu.Unlock()
}

func (h *held) unpin() {
	h.mu.Lock()
	h.pins--
	rel := h.pins == 0 && h.freed && !h.gone
	h.gone = h.gone || rel
	h.mu.Unlock()
	if rel {
		h.release()
	}
}

// free is the RU tracker letting the packet go.
func (h *held) free() {
	h.mu.Lock()
	h.freed = true
	rel := h.pins == 0 && !h.gone
	h.gone = h.gone || rel
	h.mu.Unlock()
	if rel {
		h.release()
	}
}

// AddPacket is the readout's sink (readout.Sink): the RU holds the packet
// until every assignment needing it is released; a packet of the trigger
// source also names its events to the EM. The packet is released exactly
// once, also on error.
func (a *Agent) AddPacket(ctx context.Context, p schemas.MFP, release func()) error {
	if err := a.post(ctx, func() { a.addPacket(ctx, p, release) }); err != nil {
		release()
		return err
	}
	return nil
}

func (a *Agent) addPacket(ctx context.Context, p schemas.MFP, release func()) {
	if a.ru == nil {
		release()
		a.drop("packet_not_ru")
		return
	}
	first, n := p.FirstEventID, uint32(p.N)
	if a.unit == farm.UnitPackets {
		first, n = a.seq[p.SourceID], 1
		a.seq[p.SourceID]++
	}
	key := farm.UnitKey{Run: a.cfg.Run.Run, Kind: a.unit}
	pk := &farm.Packet{Key: key, Source: p.SourceID, First: first, N: n, Bytes: len(p.Bytes()), Handle: &held{mfp: p, release: release}}
	if err := a.ru.Add(pk); err != nil {
		a.log.Warn("farm: packet refused", "err", err)
		a.drop("packet_refused")
		release()
		return
	}
	if p.SourceID == a.cfg.TriggerSource && a.ru.Names(key) {
		a.toEM(ctx, farm.Announce{Unit: farm.Unit{Run: key.Run, Resync: key.Resync, Kind: key.Kind, Ranges: []farm.Range{{First: first, N: n}}}})
	}
}

var _ peer.Buffer = localBuffer(nil)
