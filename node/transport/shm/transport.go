package shm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
)

// Transport registers shm://NAME (see package all).
var Transport = transport.Transport{
	Scheme: "shm",
	Target: "NAME",
	About:  "a shared-memory readout ring in /dev/shm (the writer waits when it is full)",
	CheckTarget: func(u transport.URI) error {
		if _, err := ringPath(u.Target); err != nil {
			return fmt.Errorf("want shm://NAME, the ring name a plain file name under %s", Dir)
		}
		return nil
	},
	Embeddable:      true,
	NewInputOptions: func() transport.InputOptions { return &Options{} },
	OpenInput: func(u transport.URI, _ transport.InputOptions) (transport.Input, error) {
		return NewInput(u.Target, ReaderConfig{}), nil
	},
	ClearStale: func(u transport.URI) ([]transport.Reclaimed, error) {
		// The embedded emulator creates this ring; a ring left by a node
		// that was killed must not be attached to meanwhile, and a ring
		// another live process uses must not be taken from it.
		r, err := ReclaimStale(u.Target)
		var out []transport.Reclaimed
		for _, f := range r.Files {
			what := "ring"
			if filepath.Base(f.Path) != u.Target {
				what = "ring being created"
			}
			pid, other := f.WriterPID, f.ReaderPID
			if pid == 0 {
				pid, other = other, 0
			}
			if other == pid {
				other = 0
			}
			out = append(out, transport.Reclaimed{What: what, Path: f.Path, PID: pid, OtherPID: other, Bytes: f.Bytes})
		}
		return out, err
	},
	NewSenderOptions: func() transport.SenderOptions { return &SenderOptions{RingSize: DefaultRingData} },
	OpenSender: func(_ context.Context, u transport.URI, o transport.SenderOptions, _ int) (transport.Sender, error) {
		// A ring whose writer is alive (another readout, or a node's
		// embedded emulator) is not replaced under it: its reader would
		// never see this writer, and this writer would wait for it forever.
		if path, err := ringPath(u.Target); err == nil {
			if ow, err := RingOwner(path); err == nil && ow.WriterAlive && ow.WriterPID != uint32(os.Getpid()) {
				return nil, fmt.Errorf("%w: the ring %s exists and its writer pid %d is alive: another node or readout writes this ring", ErrRingInUse, u.Target, ow.WriterPID)
			}
		}
		w, err := CreateWriter(u.Target, WriterConfig{DataSize: uint64(o.(*SenderOptions).RingSize)})
		if err != nil {
			return nil, err
		}
		return &sender{w}, nil
	},
}

// Options are a ring input's settings: none (the ring's writer sizes it).
type Options struct{}

// Check has nothing to check.
func (*Options) Check(transport.URI) conf.Problems { return nil }

// Ends: a ring ends when its writer closes it after its last packet (a
// writer that dies instead fails the run with ErrWriterDead).
func (*Options) Ends() bool { return true }

// SenderOptions are the settings of a ring's writer.
type SenderOptions struct {
	// RingSize is the data region of the ring it creates, in bytes: a
	// power of two (default DefaultRingData).
	RingSize conf.ByteSize `yaml:"ring_size" doc:"data region of the ring it creates (a power of two)"`
}

// MinRingSize and MaxRingSize bound the ring_size a configuration may
// give an emulator's ring: the sizes an operator would give a board
// (CreateWriter itself takes MinRingData to MaxRingData).
const (
	MinRingSize = 1 << 20
	MaxRingSize = 1 << 36
)

// ValidRingSize reports whether n bytes is a ring_size a configuration
// may give: a power of two in [MinRingSize, MaxRingSize].
func ValidRingSize(n uint64) bool {
	return n >= MinRingSize && n <= MaxRingSize && n&(n-1) == 0
}

// Check wants a ring_size ValidRingSize takes.
func (o *SenderOptions) Check(transport.URI) conf.Problems {
	var ps conf.Problems
	if s := o.RingSize; !ValidRingSize(uint64(s)) {
		ps.Add("ring_size", s, "want a power of two between %s and %s", conf.ByteSize(MinRingSize), conf.ByteSize(MaxRingSize))
	}
	return ps
}

// MemoryBytes is the ring's data region: a writer touches all of it.
func (o *SenderOptions) MemoryBytes() int64 { return int64(o.RingSize) }

// SharedMemory: the ring is shared memory.
func (*SenderOptions) SharedMemory() bool { return true }

// sender writes packets into the ring it created.
type sender struct{ w *Writer }

func (s *sender) Send(ctx context.Context, p transport.Packet) error {
	if p.Placed != nil {
		return s.w.WritePlaced(ctx, p.Bytes, p.Placed)
	}
	return s.w.Write(ctx, p.Bytes)
}

func (s *sender) SendTruncated(ctx context.Context, p transport.Packet, cut int) error {
	return s.w.Write(ctx, p.Bytes[:cut])
}

func (s *sender) Flush() error { s.w.Flush(); return nil }

// Close waits until the reader acknowledged everything, then closes the
// ring (the reader sees the end of the stream).
func (s *sender) Close(ctx context.Context, _ uint64) error {
	err := s.w.Drain(ctx)
	if cerr := s.w.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *sender) Stats() transport.SenderStats {
	return transport.SenderStats{ThrottleNs: s.w.ThrottleNs(), PlacedBytes: s.w.PlacedBytes()}
}
