package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/internal/shmspace"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/plugins"
)

// shmDir is where the plugin arena and the readout rings live.
const shmDir = shm.Dir

// sharedMemory is what the node creates in /dev/shm at start: the plugin
// arena (the batches share, when a trigger stage or inter-fill replay
// runs) and the ring of each embedded emulator writing to shm://, with a
// name and bytes each. Rings another process writes are not the node's.
func (c *Config) sharedMemory() []sharedPart {
	var out []sharedPart
	if len(c.OnlineStages()) > 0 || (c.Replay.InterFill > 0 && len(c.ReplayStages()) > 0) {
		out = append(out, sharedPart{name: "the plugin arena (node.memory_split.batches)", bytes: c.Memory().Batches})
	}
	for i, in := range c.Inputs {
		if in.Emulator == nil {
			continue
		}
		if mb, ok := in.Emulator.Sender.(transport.Memory); ok && mb.SharedMemory() {
			key := conf.Index("inputs", i)
			// The ring's file: its data region and its control page (a ring of
			// 64MiB does not fit in 64MiB of /dev/shm).
			p := sharedPart{name: fmt.Sprintf("%s's ring (%s.emulator.ring_size)", in.URI, key), bytes: shm.RingFileBytes(uint64(mb.MemoryBytes())), key: key + ".uri", uri: in.URI}
			if u, err := transport.ParseURI(in.URI); err == nil && u.Scheme == "shm" {
				p.ring = u.Target
			}
			out = append(out, p)
		}
	}
	return out
}

// sharedPart is one file the node creates in /dev/shm.
type sharedPart struct {
	name  string
	bytes uint64
	ring  string // a ring's name: a stale one there is replaced
	key   string // the ring's input, for problems
	uri   string
}

// preflightSharedMemory refuses a node whose shared memory does not fit in
// /dev/shm's free space (a container's is 64 MiB unless --shm-size says
// otherwise): the node reserves every page when it creates the files, and
// would fail there instead, after opening the store and the plugins.
// rings false leaves the inputs' rings out (`sluice replay` opens none).
func (c *Config) preflightSharedMemory(ps *conf.Problems, rings bool) {
	parts := c.sharedMemory()
	if !rings {
		// An input's ring has its input's key; the arena has none.
		parts = slices.DeleteFunc(parts, func(p sharedPart) bool { return p.key != "" })
	}
	if len(parts) == 0 {
		return
	}
	free, total, err := shmspace.Free(shmDir)
	if err != nil {
		return // no /dev/shm: the arena goes to the temporary directory
	}
	var need uint64
	names := make([]string, len(parts))
	// What killed nodes left is reclaimed at start (and only what is
	// provably stale): its space counts as free.
	free += uint64(plugins.StaleRegionBytes())
	for i, p := range parts {
		need += p.bytes
		names[i] = fmt.Sprintf("%s %s", p.name, shmspace.Bytes(p.bytes))
		if p.ring == "" {
			continue
		}
		o, err := shm.RingOwner(filepath.Join(shm.Dir, p.ring))
		if err != nil {
			continue // no ring there yet
		}
		if why := o.InUse(); why != "" {
			ps.Add(p.key, p.uri, "the ring %s exists and is in use (%s): another node or readout uses this name", p.ring, why)
			continue
		}
		free += uint64(o.Bytes)
	}
	if need > free {
		ps.Add("node.memory_budget", conf.ByteSize(c.Node.MemoryBudget),
			"the node's shared memory does not fit in %s: %s need %s; %s has %s free of %s (give the container more, e.g. docker run --shm-size, or lower the budget or the ring sizes)",
			shmDir, strings.Join(names, " and "), shmspace.Bytes(need), shmDir, shmspace.Bytes(free), shmspace.Bytes(total))
	}
}
