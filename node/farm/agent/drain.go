package agent

import (
	"context"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
)

// handOverTimeout bounds the last ledger's publication and the
// resignation of a draining EM.
const handOverTimeout = 3 * time.Second

// handOver is a draining node's part as EM candidate: it reports whether
// the node may leave. A node that leads (or was elected and waits to) and
// is asked to drain hands the farm to another candidate: its last ledger
// goes to etcd for the next EM to inherit, then it resigns; the next EM
// takes over as from a dead one (inventories, see farm.EM.Reconcile),
// this node's BU and RU among the parties, and this node drains under it.
// A candidate that does not lead stops campaigning. With no other EM
// candidate in the farm the EM stays (leaving would stop the farm) and
// leaves at the run's end.
func (a *Agent) handOver() bool {
	if a.handedOver {
		return true
	}
	if a.em == nil && a.pendingLead == nil {
		if !a.resigned && a.stopCampaign != nil {
			a.resigned = true
			a.stopCampaign()
		}
		return a.resigned || a.cfg.Roles&farm.RoleEM == 0
	}
	if a.resigned {
		return false // resigning
	}
	if !a.successor() {
		if !a.noSuccessor {
			a.noSuccessor = true
			a.log.Warn("farm: draining the event manager: no other member is an EM candidate, so it leads until the run ends")
		}
		return false
	}
	l := a.lead
	if l == nil {
		l = a.pendingLead
	}
	var last *farm.LedgerSummary
	if a.em != nil {
		a.route(a.ctx) // what it decided so far goes out
		s := a.em.Ledger().Summary()
		last = &s
		a.log.Info("farm: draining the event manager: handing over", "epoch", a.em.Epoch(), "announced", s.Announced, "built", s.Built)
	}
	a.em, a.lead, a.pendingLead = nil, nil, nil
	a.resign(a.ctx, l, last)
	return false
}

// resign publishes last (when not nil) while l leads, then resigns l; the
// loop learns when it is done (handedOver). No more leading for this
// incarnation: messages for an EM here are dropped, counted.
func (a *Agent) resign(ctx context.Context, l *control.Leadership, last *farm.LedgerSummary) {
	a.resigned = true
	if a.stopCampaign != nil {
		a.stopCampaign()
	}
	run := a.cfg.Run.Run
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handOverTimeout)
		defer cancel()
		if last != nil {
			if err := l.PutLedger(rctx, run, *last); err != nil {
				a.log.Warn("farm: the last ledger of a draining EM", "err", err)
			}
		}
		if err := l.Resign(rctx); err != nil {
			// Its lease goes when it leaves: the election key with it.
			a.log.Warn("farm: resign", "err", err)
		}
		a.post(ctx, func() {
			a.handedOver = true
			a.log.Info("farm: resigned as event manager", "epoch", l.Epoch())
		})
	}()
}

// successor reports whether another member is an EM candidate.
func (a *Agent) successor() bool {
	for n, m := range a.members {
		if n != a.cfg.Node && m.roles&farm.RoleEM != 0 {
			return true
		}
	}
	return false
}
