// Package file is the file transport (file://PATH): the Input that reads a
// native MFP stream file once, multi-fragment packets back to back, and the
// Sender that writes one.
package file

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
)

// Transport registers file://PATH (see package all): file://x.mfp is the
// relative path x.mfp, file:///data/x.mfp an absolute one.
var Transport = transport.Transport{
	Scheme: "file",
	Target: "PATH",
	About:  "a native MFP stream file",
	CheckTarget: func(u transport.URI) error {
		if u.Target == "" {
			return fmt.Errorf("want file://PATH (file://./x for a relative path, file:///abs/x)")
		}
		return nil
	},
	// An emulator writing the file the input reads at the same time would
	// hand the input cut packets.
	Embeddable:      false,
	NewInputOptions: func() transport.InputOptions { return &Options{} },
	OpenInput: func(u transport.URI, _ transport.InputOptions) (transport.Input, error) {
		return NewInput(u.Target), nil
	},
	Preflight: func(u transport.URI) error {
		if _, err := os.Stat(u.Target); err != nil {
			if pe, ok := err.(*os.PathError); ok {
				err = pe.Err
			}
			return fmt.Errorf("want an existing file (%v)", err)
		}
		return nil
	},
	NewSenderOptions: func() transport.SenderOptions { return &Options{} },
	OpenSender: func(_ context.Context, u transport.URI, _ transport.SenderOptions, _ int) (transport.Sender, error) {
		f, err := os.Create(u.Target)
		if err != nil {
			return nil, err
		}
		return &Sender{f: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
	},
}

// Options are the settings of a file input or sender: none.
type Options struct{}

// Check has nothing to check.
func (*Options) Check(transport.URI) conf.Problems { return nil }

// MemoryBytes is what a file input holds itself: its read buffer
// (readBuffer). The packets it hands to the builder are the builder's
// share (HeldBytes counts their whole buffers).
func (*Options) MemoryBytes() int64 { return readBuffer }

// SharedMemory: the read buffer is on the Go heap.
func (*Options) SharedMemory() bool { return false }

// Ends: a file input ends at the end of the file.
func (*Options) Ends() bool { return true }

// Sender writes packets back to back into a file.
type Sender struct {
	f  *os.File
	bw *bufio.Writer
}

// Send appends p to the file.
func (s *Sender) Send(_ context.Context, p transport.Packet) error {
	_, err := s.bw.Write(p.Bytes)
	return err
}

// SendTruncated refuses: a cut packet would break the framing of every
// later one.
func (s *Sender) SendTruncated(context.Context, transport.Packet, int) error {
	return fmt.Errorf("%w into a file: it would break the framing of every later packet", transport.ErrNoTruncation)
}

// Flush does nothing: the file is written out at Close.
func (s *Sender) Flush() error { return nil }

// Close writes out the buffer and closes the file.
func (s *Sender) Close(context.Context, uint64) error {
	err := s.bw.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stats: a file sender has none to report.
func (s *Sender) Stats() transport.SenderStats { return transport.SenderStats{} }
