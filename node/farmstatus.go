package node

import (
	"strconv"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/agent"
	farmctl "github.com/sluice-daq/sluice/node/farm/control"
)

// FarmStatus is the farm part of GET /status (nil when the node runs
// alone): this node's roles in the farm, the event manager, the farm's
// run state, the peers with the bytes this node's RU holds for each, and
// its RU, BU and EM state.
type FarmStatus struct {
	Farm  string `json:"farm"`
	Roles string `json:"roles"` // e.g. "ru,bu,em" (em: an event manager candidate)
	// Incarnation is this node's membership lease id (hex); "" before it
	// joined.
	Incarnation string `json:"incarnation"`
	// EM is the event manager's node id ("" while none leads), EMEpoch
	// its epoch; IsEM: this node leads.
	EM       string `json:"em"`
	EMEpoch  uint64 `json:"em_epoch"`
	IsEM     bool   `json:"is_em"`
	Protocol string `json:"protocol"` // push or pull
	Unit     string `json:"unit"`     // events or packets
	Release  string `json:"release"`  // received, decided or durable
	// RunState is the farm's desired state of this node's run, as the
	// node last saw it in etcd: running, stopped, or "" (not set).
	RunState string `json:"run_state"`
	// Peers are the other members, with the bytes this node's RU holds
	// for assignments built by each (sent, not released).
	Peers []FarmPeer `json:"peers"`
	// HeldBytesPerBU is what this node's RU holds per BU, this node's own
	// BU included (the RU's bytes_held_per_bu).
	HeldBytesPerBU map[string]int64 `json:"held_bytes_per_bu,omitempty"`
	RU             *farm.RUStats    `json:"ru,omitempty"`
	BU             *farm.BUStats    `json:"bu,omitempty"`
	EMState        *farm.EMStats    `json:"em_state,omitempty"` // while this node leads
	SendPool       agent.PoolStatus `json:"send_pool"`
	// Dropped counts the farm messages this node dropped, by why.
	Dropped map[string]uint64 `json:"dropped,omitempty"`
	// PeersRefused counts peer connections whose hello failed, by reason
	// (token: the tokens differ; farm: another farm; ...).
	PeersRefused map[string]uint64 `json:"peers_refused,omitempty"`
}

// FarmPeer is one other member of the farm.
type FarmPeer struct {
	agent.PeerStatus
	HeldBytes int64 `json:"held_bytes"` // this node's RU holds for it
}

// status is the farm part of the node's status.
func (f *farmNode) status() *FarmStatus {
	st := f.agent.Load().Status()
	fc := f.n.cfg.Farm
	s := &FarmStatus{Farm: fc.ID, Roles: st.Roles, EM: st.Leader, EMEpoch: st.Epoch,
		IsEM: st.EM != nil && st.Leader == st.Node, Protocol: fc.Protocol, Unit: fc.Unit, Release: fc.Release,
		RU: st.RU, BU: st.BU, EMState: st.EM, SendPool: st.SendPool, Dropped: st.Dropped, PeersRefused: st.PeersRefused}
	if s.Roles == "" {
		s.Roles = f.stats.Roles // not joined yet
	}
	if st.Incarnation != 0 {
		s.Incarnation = strconv.FormatUint(uint64(st.Incarnation), 16)
	}
	f.mu.Lock()
	s.RunState = f.runState
	f.mu.Unlock()
	if st.RU != nil {
		s.HeldBytesPerBU = st.RU.BytesPerBU
	}
	s.Peers = make([]FarmPeer, 0, len(st.Members))
	for _, m := range st.Members {
		p := FarmPeer{PeerStatus: m}
		if st.RU != nil {
			p.HeldBytes = st.RU.BytesPerBU[m.Node]
		}
		s.Peers = append(s.Peers, p)
	}
	return s
}

// seenRunState records the farm's desired state of this node's run.
func (f *farmNode) seenRunState(st farmctl.RunState) {
	if st.Run != f.n.cfg.Run {
		return
	}
	f.mu.Lock()
	f.runState = st.State
	f.mu.Unlock()
}

// sampleMemory raises the farm's sampled memory peaks (sampleMemory's
// period): the BU's bytes in flight, at least its receive pool's held
// slots, and the RU's held bytes.
func (f *farmNode) sampleMemory(pk *memoryPeaks) {
	st := f.agent.Load().Status()
	recv := uint64(max(f.tr.Stats().PoolHeld, 0))
	if st.BU != nil {
		recv = max(recv, uint64(max(st.BU.BytesUsed, 0)))
	}
	var held uint64
	if st.RU != nil {
		held = uint64(max(st.RU.HeldBytes, 0))
	}
	pk.mu.Lock()
	pk.farmReceive = max(pk.farmReceive, recv)
	pk.farmHeld = max(pk.farmHeld, held)
	pk.mu.Unlock()
}
