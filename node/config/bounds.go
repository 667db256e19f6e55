package config

import (
	"fmt"
	"math"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/internal/shmspace"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// The builder's bookkeeping, which lives on the Go heap beside the payload
// bytes its memory share bounds: a table of 2-4 slots and a ready list of
// one pointer per event it may hold, allocated at start, and per open
// event its state and a slot and packet reference per source.
const (
	builderBytesPerEvent  = 4*8 + 8 + 256 // table slots, ready list, event state
	builderBytesPerSource = 40            // slot and packet reference, per source and open event
)

// nodeBytesPerSource is the state the node keeps per configured source
// from its start, open events or not: the builder's tables by source
// (index, identity with its counter-reset state, late counts, activity,
// watermark, absence) with the parsed source lists, 130 bytes (145 with ids
// beyond the dense index: TestPerSourceState), the node's sets of sources
// (silence watch), and the garbage collector's room over the live heap,
// about as much again. An idle node of 2^18 sources was ~260 bytes a
// source larger than one of 4 before the counter-reset state was added.
const nodeBytesPerSource = 320

// sourceCounts is the number of sources of each group, counted from the
// lists' ranges (no id is listed); ok is false when a list does not parse
// (validateSources names it).
func (c *Config) sourceCounts() (counts []uint64, total uint64, ok bool) {
	counts = make([]uint64, len(c.Sources))
	for i, g := range c.Sources {
		rs, err := schemas.ParseSourceRanges(g.Sources)
		if err != nil {
			return nil, 0, false
		}
		counts[i] = schemas.CountSources(rs)
		total += counts[i]
	}
	return counts, total, true
}

// validateBounds refuses settings that validate one by one but could not
// run in the memory budget, before anything of their size is allocated:
// sources whose per-source state (nodeBytesPerSource each) alone needs
// more than the Go heap's share of node.memory_budget, named at the group
// whose sources cross it; and a builder whose open events
// (max_open_events and max_suspect_events) with every source's slot would
// need more than that share. Such a node used to die of out-of-memory at
// start (max_open_events 10^12), or take 19 s and 950 MB to be refused
// (16 groups of 2^20 sources).
func (c *Config) validateBounds(ps *conf.Problems) {
	b := c.Builder.Config
	if c.Node.MemoryBudget < 64<<20 {
		return // validateMemory names it
	}
	counts, sources, ok := c.sourceCounts()
	if !ok {
		return
	}
	heap := c.Memory().Heap
	if heap == 0 {
		return // a split that leaves no heap: validateMemory names it
	}
	state := sources * nodeBytesPerSource // < 2^40: no overflow
	var sum uint64
	for i, n := range counts {
		sum += n
		if sum > heap/nodeBytesPerSource {
			before := ""
			if i > 0 {
				before = fmt.Sprintf(" (%d with the groups before it)", sum)
			}
			ps.Add(fmt.Sprintf("sources[%d].sources", i), c.Sources[i].Sources,
				"%d sources%s x %d bytes of per-source state (the builder's and the node's tables) need %s, more than the Go heap's share of node.memory_budget (%s of %s): fewer sources, or a larger budget or node.memory_split.heap",
				n, before, nodeBytesPerSource, shmspace.Bytes(sum*nodeBytesPerSource), shmspace.Bytes(heap), c.Node.MemoryBudget)
			break
		}
	}
	if b.MaxOpenEvents < 1 || b.MaxSuspectEvents < 0 {
		return // builder.Validate names them
	}
	room := heap // what the open events may take: the heap less the per-source state, unless that is refused above
	if state < heap {
		room = heap - state
	}
	events := uint64(b.MaxOpenEvents) + uint64(b.MaxSuspectEvents)
	per := builderBytesPerEvent + builderBytesPerSource*sources
	if events > room/per { // events*per > room, without overflow
		ps.Add("builder.max_open_events", b.MaxOpenEvents,
			"the builder's bookkeeping for %d open events (max_open_events + max_suspect_events) of %d sources needs %s of Go heap (~%d bytes an event), more than the %s the heap's share of node.memory_budget (%s) leaves beside the sources' per-source state: lower max_open_events or the sources, or raise the budget",
			events, sources, bytesOf(events, per), per, shmspace.Bytes(room), shmspace.Bytes(heap))
	}
}

// bytesOf is events*per for a message, saturated.
func bytesOf(events, per uint64) string {
	if per != 0 && events > ^uint64(0)/per {
		return "more than 16EiB"
	}
	return shmspace.Bytes(events * per)
}

// validateEventSize refuses a builder.max_event_bytes no part of the node
// can hold: more than the store takes with its memory share (naming the
// share that would), or more than the builder's share.
func (c *Config) validateEventSize(ps *conf.Problems) {
	m := int64(c.Builder.MaxEventBytes)
	if m == 0 || c.Node.MemoryBudget < 64<<20 {
		return
	}
	const key = "builder.max_event_bytes"
	if m < 0 {
		ps.Add(key, c.Builder.MaxEventBytes, "want a size >= 0 (0 = the store's limit only)")
		return
	}
	_, n, ok := c.sourceCounts()
	if !ok {
		return // validateSources names it
	}
	sources := int(min(n, math.MaxInt32)) // beyond, validateBounds refuses them
	p := c.Memory()
	st := c.Store.WithMemory(int64(p.Store))
	need := m + storage.EventOverhead(len(c.Sources), sources)
	if limit := st.MaxEventBytes(); need > limit {
		how := "the store takes no event that large (256MiB at most, or store.value_log_file_size)"
		if share := st.MemoryForEvent(need); share > 0 {
			how = fmt.Sprintf("give node.memory_split.store at least %s, or lower this", shmspace.Bytes(uint64(share)))
		}
		ps.Add(key, c.Builder.MaxEventBytes,
			"want at most the largest event the store takes less its headers: %s encoded with node.memory_split.store %s (%s), of which an event of %d sources (%d source groups) needs %s beyond its payload; %s",
			shmspace.Bytes(uint64(limit)), c.Node.MemorySplit.Store, shmspace.Bytes(p.Store), sources, len(c.Sources), shmspace.Bytes(uint64(need-m)), how)
	}
	if uint64(m) > p.Builder {
		ps.Add(key, c.Builder.MaxEventBytes, "want at most the builder's share of the memory budget (node.memory_split.builder %s: %s), which holds an event while it is built",
			c.Node.MemorySplit.Builder, shmspace.Bytes(p.Builder))
	}
}
