package agent

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/schemas"
)

// watchRunControl follows run control's mask of this run and the farm's
// drain requests (see control.RunMask, control.DrainRequest).
func (a *Agent) watchRunControl(ctx context.Context, wg *sync.WaitGroup) {
	c := a.cfg.Control
	wg.Add(2)
	go func() {
		defer wg.Done()
		for e := range c.WatchMask(ctx, a.cfg.Run.Run) {
			if e.Err != nil {
				if ctx.Err() == nil {
					a.log.Warn("farm: run mask", "err", e.Err)
				}
				continue
			}
			m := e.Mask
			if a.post(ctx, func() { a.maskEvent(m) }) != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for d := range c.WatchDrains(ctx) {
			if a.post(ctx, func() { a.drainEvent(d) }) != nil {
				return
			}
		}
	}()
}

// maskEvent: run control masked more of the run.
func (a *Agent) maskEvent(m control.RunMask) {
	a.mask = m
	// The mask's sources with those its nodes' records named: a mask of
	// nodes only has no sources of its own.
	a.log.Info("farm: run mask", "nodes", m.Nodes, "sources", schemas.FormatSourceList(m.SourceIDs()), "by", m.By)
	a.applyMask()
	if a.pendingLead != nil {
		a.tryLead(a.ctx) // a masked RU no longer holds up leading
	}
}

// applyMask works out the masked sources (the mask's own and those of the
// masked nodes, as their records said or as this node saw them) and tells
// the BU to stop waiting for them.
func (a *Agent) applyMask() {
	ids := a.mask.SourceIDs()
	for _, n := range a.mask.Nodes {
		ids = append(ids, a.seen[n]...)
	}
	var add []uint32
	for _, s := range ids {
		if !a.masked[s] {
			a.masked[s] = true
			add = append(add, s)
		}
	}
	if len(add) == 0 {
		return
	}
	sort.Slice(add, func(i, j int) bool { return add[i] < add[j] })
	a.log.Info("farm: sources masked for the rest of the run", "sources", schemas.FormatSourceList(add))
	if a.bu != nil {
		a.bu.Mask(add)
	}
}

// drainEvent: run control asked an incarnation to drain and leave.
func (a *Agent) drainEvent(d control.DrainRequest) {
	a.drains[d.Node] = uint64(d.Incarnation)
	if a.em != nil {
		if m := a.members[d.Node]; m != nil && m.Incarnation == d.Incarnation && m.roles&farm.RoleBU != 0 {
			a.em.Drain(d.Node, uint64(d.Incarnation))
		}
	}
	if d.Node != a.cfg.Node || uint64(d.Incarnation) != a.inc || a.draining {
		return
	}
	a.log.Info("farm: draining: no new work; leaving once what this node holds is done", "by", d.By)
	a.draining = true
	if a.bu != nil {
		a.bu.Drain()
	}
}

// checkDrained: a draining node whose BU has nothing in flight and whose
// RU holds nothing says bye to its peers and is done (Drained).
func (a *Agent) checkDrained() {
	if !a.draining || a.isDrained() {
		return
	}
	if a.bu != nil && a.bu.Stats().InFlight > 0 {
		return
	}
	if a.bu != nil && a.bu.PendingReleases() > 0 {
		// Sent before the bye: left unsent, the EM would take these
		// assignments for lost with this node and build them again.
		a.bu.FlushReleases()
		return
	}
	if a.ru != nil {
		if s := a.ru.Stats(); s.Held > 0 || s.Pending > 0 || s.Sent > 0 {
			return
		}
	}
	if !a.handOver() {
		return
	}
	now := a.clock.Now()
	if a.byeAt.IsZero() {
		a.byeAt = now
		if a.cfg.Token != "" {
			body, err := farm.AppendBye(nil, farm.Bye{Farm: a.cfg.Control.Farm(), Token: a.cfg.Token, Node: a.cfg.Node, Incarnation: a.inc})
			if err != nil {
				a.log.Error("farm: encode bye", "err", err)
			} else {
				for n := range a.peers {
					a.send(n, uint16(farm.KindBye), body)
				}
			}
		}
	}
	// Leave once the last releases and the byes are out (a second at
	// most: a peer that does not take them is gone or going).
	for _, p := range a.peers {
		if p.unsent() && now.Sub(a.byeAt) < time.Second {
			return
		}
	}
	a.log.Info("farm: drained; leaving")
	close(a.drained)
}

func (a *Agent) isDrained() bool {
	select {
	case <-a.drained:
		return true
	default:
		return false
	}
}

// Drained is closed once this node, asked to drain, has nothing of the
// farm left and said bye: it may leave (end Run; its lease is revoked).
func (a *Agent) Drained() <-chan struct{} { return a.drained }

// onBye: a drained peer leaves: it is gone now (its lease follows), not
// lost.
func (a *Agent) onBye(from string, b farm.Bye) {
	m := a.members[from]
	if b.Node != from || m == nil || uint64(m.Incarnation) != b.Incarnation {
		a.drop("stale_bye")
		return
	}
	a.log.Info("farm: peer drained and left", "peer", from)
	a.byes[from] = b.Incarnation
	delete(a.members, from)
	a.memberGone(m)
	if p := a.peers[from]; p != nil {
		p.close()
		delete(a.peers, from)
	}
}
