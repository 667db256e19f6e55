package emulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// Fault names, as used in Summary.Faults and by the CLI flags.
const (
	FaultDrop      = "drop"
	FaultDuplicate = "duplicate"
	FaultCorrupt   = "corrupt"
	FaultTruncate  = "truncate"
	FaultReorder   = "reorder"
	FaultStall     = "stall"
)

// Summary is what Run sent (`sluice readout --summary-json`).
// Receivers reconcile against it: packets received = generated - drop -
// truncate + duplicate, and so on.
type Summary struct {
	To                 string `json:"to"`
	Mode               string `json:"mode"` // "synthetic", or "file:" and the file's format (its export name, e.g. "file:mdf", "file:frd", else its name, e.g. "file:sluice-mfp")
	Sources            int    `json:"sources"`
	PacketsGenerated   uint64 `json:"packets_generated"`
	FragmentsGenerated uint64 `json:"fragments_generated"`
	// Sent counts what went onto the transport: duplicates twice, truncated
	// packets once, dropped ones not at all.
	PacketsSent   uint64 `json:"packets_sent"`
	FragmentsSent uint64 `json:"fragments_sent"`
	BytesSent     uint64 `json:"bytes_sent"`
	// BytesPlaced are the bytes of BytesSent a shared-memory ring held
	// from a lap before, so that only the packets' headers were written
	// (a looped replay whose pass fits a lap: shm.PassComesRound), as a
	// board's DMA costs the node's cores nothing.
	BytesPlaced uint64 `json:"bytes_placed"`
	ThrottledNs uint64 `json:"throttled_ns"` // waiting for ring space or TCP credit
	DurationNs  int64  `json:"duration_ns"`
	// Faults counts the packets each fault hit; FaultFragments the
	// fragments in them (corrupt: the one fragment corrupted per packet).
	Faults         map[string]uint64 `json:"faults"`
	FaultFragments map[string]uint64 `json:"fault_fragments"`
	// SequenceNumbers (UDP) are the numbers used: one per generated packet.
	SequenceNumbers uint64 `json:"sequence_numbers,omitempty"`
	Reconnects      int    `json:"reconnects,omitempty"` // TCP, truncation faults included
	Resent          int    `json:"resent,omitempty"`     // TCP packets sent again after a failure
	Refused         int    `json:"refused,omitempty"`    // UDP datagrams refused: nothing listened
}

// Run generates (or replays from a file) multi-fragment packets, injects
// the configured faults and sends them to cfg.To through the sender of its
// transport (package transport), pacing them at cfg.Rate events per
// second. It returns what it sent and injected; the Summary is valid (what
// was sent so far) also when it returns an error. It is Prepare, then
// Prepared.Run.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	p, _ := Prepare(cfg)
	return p.Run(ctx)
}

// Prepared is an emulator run made ready by Prepare: its configuration
// checked and, in file mode, the file read and split into packets, so that
// Run starts sending at once (a node prepares its embedded emulators while
// it starts, and the file's reading is not part of the run).
type Prepared struct {
	cfg     Config
	sum     Summary
	src     packetSource
	sources []uint32 // file mode: the file's sources, for Config.OnSources
	ferol   bool     // To carries FEROL streams
	err     error    // Prepare's
}

// Prepare checks cfg and reads its file (file mode). On error the
// Prepared's Run returns the same error (and the Summary so far), so a
// caller may report it when the run would start. A Prepared runs once.
func Prepare(cfg Config) (*Prepared, error) {
	p := &Prepared{}
	p.err = p.prepare(cfg)
	return p, p.err
}

func (p *Prepared) prepare(cfg Config) error {
	cfg = cfg.WithDefaults()
	if ps := cfg.Validate(); len(ps) > 0 {
		return fmt.Errorf("emulator: %s", ps)
	}
	p.sum = Summary{To: cfg.To, Faults: map[string]uint64{}, FaultFragments: map[string]uint64{}}
	sum := &p.sum
	u, err := transport.ParseURI(cfg.To)
	if err != nil {
		return err
	}
	payload := transport.PayloadOf(u)
	vtp, ferol := payload == transport.PayloadVDIF, payload == transport.PayloadFEROL
	var src packetSource
	if cfg.From != "" {
		fs, format, err := loadFile(cfg.From, cfg.Packing, cfg.Loop, cfg.To, payload)
		if err != nil {
			return err
		}
		if cfg.SourceList != "" {
			ids, _ := schemas.ParseSourceList(cfg.SourceList) // Validate parsed it
			if err := fs.keep(ids); err != nil {
				return fmt.Errorf("%s: sources %s: %w", cfg.From, cfg.SourceList, err)
			}
		}
		p.sources = fs.sourceIDs()
		// Replayed in place unless a fault keeps a packet back (reorder,
		// stall) or changes its bytes (corrupt).
		fs.inPlace = cfg.Faults.Reorder == 0 && cfg.Faults.Stall == 0 && cfg.Faults.Corrupt == 0
		src, sum.Mode = fs, "file:"+modeName(format)
	} else {
		if vtp {
			return fmt.Errorf("%s carries VDIF frames: give a VDIF file with --from", cfg.To)
		}
		if ferol {
			return fmt.Errorf("%s carries FEROL streams: give a FEROL capture with --from", cfg.To)
		}
		if cfg.SourceList != "" {
			ids, _ := schemas.ParseSourceList(cfg.SourceList) // Validate parsed it
			cfg.Groups = []schemas.SourceGroup{{Name: "emulated", Sources: ids}}
		}
		if len(cfg.Groups) == 0 {
			if cfg.Sources <= 0 {
				cfg.Sources = 4
			}
			ids := make([]uint32, cfg.Sources)
			for i := range ids {
				ids[i] = uint32(i)
			}
			cfg.Groups = []schemas.SourceGroup{{Name: "tracker", Sources: ids}}
		}
		src, sum.Mode = newSynthSource(&cfg), "synthetic"
	}
	if vtp && cfg.Faults.Corrupt > 0 {
		return fmt.Errorf("--corrupt needs a CRC in the packet; VTP frames carry none")
	}
	sum.Sources = src.sources()
	p.cfg, p.src, p.ferol = cfg, src, ferol
	return nil
}

// Run sends what Prepare made ready; see the package function Run.
func (p *Prepared) Run(ctx context.Context) (Summary, error) {
	cfg, src, sum := &p.cfg, p.src, &p.sum
	if p.err != nil {
		return *sum, p.err
	}
	if src == nil {
		return *sum, errors.New("emulator: a Prepared runs once")
	}
	p.src = nil
	if p.sources != nil && cfg.OnSources != nil {
		cfg.OnSources(p.sources)
	}
	out, err := transport.OpenSender(ctx, cfg.To, cfg.Sender, sum.Sources)
	if err != nil {
		return *sum, err
	}
	em := &emulator{cfg: cfg, out: out, sum: sum, rng: rand.New(rand.NewPCG(cfg.Seed, 0xFA017)),
		stalled: map[uint32]*stallQueue{}, ferol: p.ferol}
	t0 := time.Now()
	err = em.run(ctx, src, t0)
	if cerr := out.Close(ctx, em.seq); err == nil {
		err = cerr
	}
	st := out.Stats()
	sum.ThrottledNs, sum.BytesPlaced = st.ThrottleNs, st.PlacedBytes
	sum.Reconnects, sum.Resent, sum.Refused, sum.SequenceNumbers = st.Reconnects, st.Resent, st.Refused, st.SequenceNumbers
	sum.DurationNs = int64(time.Since(t0))
	return *sum, err
}

// emulator is one run's fault injection and pacing.
type emulator struct {
	cfg     *Config
	out     transport.Sender
	sum     *Summary
	rng     *rand.Rand
	seq     uint64 // next sequence number (one per generated packet)
	held    []heldPacket
	stalled map[uint32]*stallQueue
	free    [][]byte // spare packet buffers
	ferol   bool     // packets are FEROL blocks, not MFPs
}

type heldPacket struct {
	p     emuPacket
	seq   uint64
	after int // sends still to pass before this one goes
	dup   bool
}

type stallQueue struct {
	until time.Time
	q     []heldPacket
}

func (em *emulator) buf() []byte {
	if n := len(em.free); n > 0 {
		b := em.free[n-1]
		em.free = em.free[:n-1]
		return b
	}
	return nil
}

func (em *emulator) recycle(p *emuPacket) {
	if !p.borrowed {
		em.free = append(em.free, p.b[:0])
	}
}

func (em *emulator) count(f string, frags int) {
	em.sum.Faults[f]++
	em.sum.FaultFragments[f] += uint64(frags)
}

// flushEvery bounds how long a rate-paced emulator behind its schedule
// leaves packets in the sender's buffers (see run).
const flushEvery = 10 * time.Millisecond

func (em *emulator) run(ctx context.Context, src packetSource, t0 time.Time) error {
	f := em.cfg.Faults
	lastFlush := t0
	var (
		cur     uint64 // event of the packets being sent
		started bool
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, ok := src.next(em.buf())
		if !ok {
			break
		}
		// A run of limited duration ends at an event boundary: once the
		// time is up, the packets of the event being sent still go (every
		// source's fragment of it), the next event's none. (Packets come
		// event by event; those of one packing block share its first event.)
		if em.cfg.Duration > 0 && (!started || p.pace != cur) && time.Since(t0) >= em.cfg.Duration {
			em.recycle(&p)
			break
		}
		cur, started = p.pace, true
		if em.cfg.Rate > 0 {
			// Pace by event: packets of the run's k-th event go out at t0 + k/rate.
			// Behind that schedule it never sleeps, and what the sender
			// buffered goes out at least every flushEvery: a board sends
			// what it has; left in the buffers of a sender of many
			// connections it waited seconds, the events it belongs to with it.
			now := time.Now()
			if d := t0.Add(time.Duration(float64(p.pace) / em.cfg.Rate * 1e9)).Sub(now); d > 0 {
				if err := em.out.Flush(); err != nil {
					return err
				}
				if err := sleep(ctx, d); err != nil {
					return err
				}
				lastFlush = now.Add(d)
			} else if now.Sub(lastFlush) >= flushEvery {
				if err := em.out.Flush(); err != nil {
					return err
				}
				lastFlush = now
			}
		}
		em.sum.PacketsGenerated++
		em.sum.FragmentsGenerated += uint64(p.n)
		h := heldPacket{p: p, seq: em.seq}
		em.seq++
		// One exclusive fault per packet, then the independent ones.
		r := em.rng.Float64()
		cut := 0
		switch {
		case r < f.Drop:
			em.count(FaultDrop, p.n)
			em.recycle(&p)
			if err := em.passed(ctx); err != nil {
				return err
			}
			continue
		case r < f.Drop+f.Truncate:
			em.count(FaultTruncate, p.n)
			cut = 1 + em.rng.IntN(len(p.b)-1)
		case r < f.Drop+f.Truncate+f.Corrupt:
			if em.corrupt(&p) {
				em.count(FaultCorrupt, 1)
			}
		case r < f.Drop+f.Truncate+f.Corrupt+f.Duplicate:
			em.count(FaultDuplicate, p.n)
			h.dup = true
		}
		if cut > 0 {
			// A truncated packet is sent at once: on TCP it ends its connection.
			err := em.out.SendTruncated(ctx, p.packet(h.seq), cut)
			em.sum.PacketsSent++
			em.sum.FragmentsSent += uint64(p.n)
			em.sum.BytesSent += uint64(cut)
			em.recycle(&p)
			if err != nil {
				return err
			}
			if err := em.passed(ctx); err != nil {
				return err
			}
			continue
		}
		if f.Stall > 0 && em.rng.Float64() < f.Stall {
			em.count(FaultStall, p.n)
			sq := em.stalled[p.source]
			if sq == nil {
				sq = &stallQueue{}
				em.stalled[p.source] = sq
			}
			sq.until = time.Now().Add(f.StallDuration)
		}
		if sq := em.stalled[p.source]; sq != nil && (len(sq.q) > 0 || time.Now().Before(sq.until)) {
			sq.q = append(sq.q, h)
		} else if f.Reorder > 0 && em.rng.Float64() < f.Reorder {
			em.count(FaultReorder, p.n)
			h.after = 1 + em.rng.IntN(f.ReorderWindow)
			em.held = append(em.held, h)
		} else if err := em.emit(ctx, h); err != nil {
			return err
		}
		if len(em.stalled) == 0 {
			continue // no stall fault so far: nothing to release (the loop's per-packet cost)
		}
		if err := em.releaseStalls(ctx, false); err != nil {
			return err
		}
	}
	// End of run: what is held back goes out now, stalls when they end.
	for len(em.held) > 0 {
		h := em.held[0]
		em.held = em.held[1:] // emit may send (and remove) others
		if err := em.emit(ctx, h); err != nil {
			return err
		}
	}
	return em.releaseStalls(ctx, true)
}

// emit sends h (twice if duplicated), then lets held packets whose turn
// came go.
func (em *emulator) emit(ctx context.Context, h heldPacket) error {
	for range 1 + b2i(h.dup) {
		if err := em.out.Send(ctx, h.p.packet(h.seq)); err != nil {
			return err
		}
		em.sum.PacketsSent++
		em.sum.FragmentsSent += uint64(h.p.n)
		em.sum.BytesSent += uint64(len(h.p.b))
	}
	em.recycle(&h.p)
	return em.passed(ctx)
}

// passed counts one packet slot passing for the reorder-held packets and
// sends those whose turn came.
func (em *emulator) passed(ctx context.Context) error {
	var due []heldPacket
	kept := em.held[:0]
	for _, h := range em.held {
		if h.after--; h.after <= 0 {
			due = append(due, h)
		} else {
			kept = append(kept, h)
		}
	}
	em.held = kept
	for _, h := range due {
		if err := em.emit(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// releaseStalls sends the queues of sources whose stall ended; at the end
// of the run (wait) it waits for every stall to end.
func (em *emulator) releaseStalls(ctx context.Context, wait bool) error {
	for _, sq := range em.stalled {
		if len(sq.q) == 0 {
			continue
		}
		if d := time.Until(sq.until); d > 0 {
			if !wait {
				continue
			}
			if err := sleep(ctx, d); err != nil {
				return err
			}
		}
		q := sq.q
		sq.q = nil
		for _, h := range q {
			if err := em.emit(ctx, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// corrupt flips one payload byte of one non-empty fragment of MFP p after
// its CRC was computed (of a FEROL packet, one byte of its FED fragment's
// payload in the first block, which the FED's CRC-16 covers); false if p
// has no payload byte to flip.
func (em *emulator) corrupt(p *emuPacket) bool {
	if em.ferol {
		// Block header, FED header word, ..., trailer word (one block) or
		// the end of the first block.
		lo, hi := cms.FEROLHeaderSize+cms.FEDWordSize, len(p.b)-cms.FEDWordSize
		if h, err := cms.DecodeFEROLBlock(p.b); err == nil && !h.Last {
			hi = cms.FEROLHeaderSize + int(h.Words)*cms.FEDWordSize
		}
		if hi <= lo {
			return false
		}
		p.b[lo+em.rng.IntN(hi-lo)] ^= 0x5A
		return true
	}
	m, _, err := schemas.DecodeMFP(p.b)
	if err != nil {
		return false
	}
	k := em.rng.IntN(m.N)
	done := false
	for try := 0; try < m.N && !done; try++ {
		i := (k + try) % m.N
		m.Fragments(func(j int, _ uint64, _ uint32, payload []byte) bool {
			if j == i && len(payload) > 0 {
				payload[em.rng.IntN(len(payload))] ^= 0x5A
				done = true
			}
			return j < i
		})
	}
	return done
}

// sleep waits d, or until ctx ends (its error): a stopped run does not
// wait out its pacing.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// String renders the human-readable account `sluice readout` prints.
func (s *Summary) String() string {
	line := fmt.Sprintf("sent %d packets (%d fragments, %d bytes) of %d generated to %s in %v; throttled %v",
		s.PacketsSent, s.FragmentsSent, s.BytesSent, s.PacketsGenerated, s.To,
		time.Duration(s.DurationNs).Round(time.Millisecond), time.Duration(s.ThrottledNs).Round(time.Microsecond))
	if s.BytesPlaced > 0 {
		line += fmt.Sprintf("; %d bytes of them in the ring from a lap before (headers written only)", s.BytesPlaced)
	}
	for _, f := range []string{FaultDrop, FaultDuplicate, FaultCorrupt, FaultTruncate, FaultReorder, FaultStall} {
		if n := s.Faults[f]; n > 0 {
			line += fmt.Sprintf("; %s %d", f, n)
		}
	}
	return line
}
