package vdif

import (
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// Joiner turns built sluice events (rows of an event batch whose fragments
// came from FrameFragment or Packer) back into VDIF frames, byte for byte.
type Joiner struct {
	// Order lists the source ids in the order their frames are written for
	// each event, e.g. ScanSources' result to restore a recording's thread
	// interleave. Nil writes the batch's groups in schema order, each in its
	// source order (ascending source id, i.e. station then thread).
	Order   []uint32
	Frames  uint64 // frames written
	Missing uint64 // sources that sent nothing for an event: no frame written
}

// Join appends the VDIF frames of row i of eb to dst. Each fragment
// payload must be one whole VDIF frame whose thread and time give back the
// fragment's source id and the row's event id. Errors:
// format.ErrForeignEvents for a payload that is no VDIF frame header, or
// one of neither the fragment's source nor the row's event (the events
// were not split from VDIF data), *schemas.DecodeError (offset within the
// fragment payload) wrapping ErrInconsistent for a frame that does not belong where it was found, a
// payload longer than its frame, or an event holding frames of sources not
// in Order (they would be dropped).
func (j *Joiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	id := eb.EventID(i)
	var err error
	add := func(src uint32, payload []byte) bool {
		if len(payload) == 0 {
			j.Missing++
			return true
		}
		// Not a frame header, or one of neither this source nor this
		// event: the events came from another format (a misplaced or cut
		// frame is checkFrame's).
		if h, herr := DecodeHeader(payload); herr != nil || SourceID(&h) != src && EventID(&h) != id {
			err = format.ForeignEvents(VDIFFormat, eb, i, "has a fragment of source %d that is no VDIF frame of that thread or of that second and frame", src)
			return false
		}
		if err = checkFrame(src, id, payload); err != nil {
			return false
		}
		dst = append(dst, payload...)
		j.Frames++
		return true
	}
	if j.Order == nil {
		eb.EachFragment(i, add)
		return dst, err
	}
	written := 0
	for _, src := range j.Order {
		p, ok := eb.Payload(src, i)
		if !ok {
			return dst, fmt.Errorf("vdif: join event %#x: source %d is not in the event batch: %w", id, src, schemas.ErrInconsistent)
		}
		if len(p) > 0 {
			written++
		}
		if !add(src, p) {
			return dst, err
		}
	}
	present := 0
	for g := range eb.Groups {
		for _, sz := range eb.GroupSizes(g, i) {
			if sz > 0 {
				present++
			}
		}
	}
	if present != written {
		return dst, fmt.Errorf("vdif: join event %#x: %d frames present, %d of them from sources in Order: %w", id, present, written, schemas.ErrInconsistent)
	}
	return dst, nil
}

// checkFrame checks that payload is exactly one VDIF frame of source src
// and event id.
func checkFrame(src uint32, id uint64, payload []byte) error {
	f, err := DecodeFrame(payload)
	if err != nil {
		return err
	}
	field := fmt.Sprintf("event %#x source %d", id, src)
	switch {
	case len(f.Bytes) != len(payload):
		return schemas.Errorf(formatVDIF, field, int64(len(f.Bytes)), schemas.ErrInconsistent, "fragment holds %d bytes, its frame %d", len(payload), len(f.Bytes))
	case SourceID(&f.Header) != src:
		return schemas.Errorf(formatVDIF, field, 12, schemas.ErrInconsistent, "frame of source %d (station %d thread %d)", SourceID(&f.Header), f.Header.StationID, f.Header.ThreadID)
	case EventID(&f.Header) != id:
		return schemas.Errorf(formatVDIF, field, 0, schemas.ErrInconsistent, "frame of event %#x", EventID(&f.Header))
	}
	return nil
}
