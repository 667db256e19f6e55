package config

import (
	"fmt"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/internal/shmspace"
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

// validateBounds refuses settings that validate one by one but could not
// run in the memory budget: a builder whose open events (max_open_events
// and max_suspect_events) with every source's slot would need more than
// the Go heap's share. Such a node used to die of out-of-memory at start
// (max_open_events 10^12) or take seconds and megabytes per event (16
// groups of 2^20 sources).
func (c *Config) validateBounds(ps *conf.Problems) {
	b := c.Builder.Config
	if b.MaxOpenEvents < 1 || b.MaxSuspectEvents < 0 || c.Node.MemoryBudget < 64<<20 {
		return // builder.Validate and validateMemory name them
	}
	groups, err := c.Groups()
	if err != nil {
		return // validateSources names it
	}
	var sources uint64
	for _, g := range groups {
		sources += uint64(len(g.Sources))
	}
	events := uint64(b.MaxOpenEvents) + uint64(b.MaxSuspectEvents)
	per := builderBytesPerEvent + builderBytesPerSource*sources
	heap := c.Memory().Heap
	if heap == 0 {
		return // a split that leaves no heap: validateMemory names it
	}
	if events > heap/per { // events*per > heap, without overflow
		ps.Add("builder.max_open_events", b.MaxOpenEvents,
			"the builder's bookkeeping for %d open events (max_open_events + max_suspect_events) of %d sources needs %s of Go heap (~%d bytes an event), more than the heap's share of node.memory_budget (%s): lower max_open_events or the sources, or raise the budget",
			events, sources, bytesOf(events, per), per, shmspace.Bytes(heap))
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
	groups, err := c.Groups()
	if err != nil {
		return // validateSources names it
	}
	sources := 0
	for _, g := range groups {
		sources += len(g.Sources)
	}
	p := c.Memory()
	st := c.Store.WithMemory(int64(p.Store))
	need := m + storage.EventOverhead(len(groups), sources)
	if limit := st.MaxEventBytes(); need > limit {
		how := "the store takes no event that large (256MiB at most, or store.value_log_file_size)"
		if share := st.MemoryForEvent(need); share > 0 {
			how = fmt.Sprintf("give node.memory_split.store at least %s, or lower this", shmspace.Bytes(uint64(share)))
		}
		ps.Add(key, c.Builder.MaxEventBytes,
			"want at most the largest event the store takes less its headers: %s encoded with node.memory_split.store %s (%s), of which an event of %d sources (%d source groups) needs %s beyond its payload; %s",
			shmspace.Bytes(uint64(limit)), c.Node.MemorySplit.Store, shmspace.Bytes(p.Store), sources, len(groups), shmspace.Bytes(uint64(need-m)), how)
	}
	if uint64(m) > p.Builder {
		ps.Add(key, c.Builder.MaxEventBytes, "want at most the builder's share of the memory budget (node.memory_split.builder %s: %s), which holds an event while it is built",
			c.Node.MemorySplit.Builder, shmspace.Bytes(p.Builder))
	}
}
