// Package native is sluice's own streams as a format: native fragments
// and multi-fragment packets back to back (schemas.AppendFragment,
// schemas.AppendMFP; the layouts are in package schemas), either may
// follow the other. It detects and inspects them.
package native

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// The formats, as registered in schemas/formats; they differ only in what
// the stream starts with.
var (
	// FragmentFormat is a stream starting with a native fragment ("SLFG").
	FragmentFormat format.Format = stream{name: "sluice-fragment", magic: schemas.FragmentMagic, version: schemas.FragmentVersion,
		sign: `a sluice fragment ("SLFG")`}
	// MFPFormat is a stream starting with a multi-fragment packet ("SLMP").
	MFPFormat format.Format = stream{name: "sluice-mfp", magic: schemas.MFPMagic, version: schemas.MFPVersion,
		sign: `a sluice multi-fragment packet ("SLMP")`}
)

type stream struct {
	name, sign string
	magic      uint32
	version    uint8
}

func (s stream) Name() string { return s.name }
func (s stream) Sign() string { return s.sign }

// Detect is Certain for the magic followed by the version this build
// reads.
func (s stream) Detect(head []byte) format.Match {
	if len(head) >= 5 && binary.LittleEndian.Uint32(head) == s.magic && head[4] == s.version {
		return format.Certain
	}
	return format.NoMatch
}

func (s stream) Inspect(st *format.Stream, maxEvents int) (*format.Report, error) {
	return inspect(st, s.name, maxEvents)
}
