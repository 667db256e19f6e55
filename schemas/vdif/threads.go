package vdif

import (
	"errors"
	"io"

	"github.com/sluice-daq/sluice/schemas"
)

// ThreadCheck detects VDIF threads whose timestamps diverge: a frame whose
// time (whole second plus frame number) lags the most advanced time seen on
// any thread by more than Tolerance frames. A thread running ahead is caught
// on the others' next frames. Recorders that write blocks of frames per
// thread need a Tolerance of at least the block length.
type ThreadCheck struct {
	// FramesPerSecond per thread; 0 estimates it as the largest frame
	// number seen so far plus one (a lower bound, so lags are never
	// overstated).
	FramesPerSecond int
	Tolerance       int // largest allowed lag, in frames

	started   bool
	sec       int64  // most advanced whole second seen (since 2000, see epochSecond)
	frame     uint32 // and its frame number
	src       uint32 // the source that reached it
	maxFrames uint32 // largest frame number seen
}

// Add checks one frame. The error, for a lagging frame, is a
// *schemas.DecodeError wrapping schemas.ErrInconsistent at the frame's
// offset, naming both sources and the lag in frames.
func (c *ThreadCheck) Add(f *Frame) error {
	h := &f.Header
	sec := h.epochSecond()
	c.maxFrames = max(c.maxFrames, h.FrameNumber)
	if !c.started || sec > c.sec || (sec == c.sec && h.FrameNumber > c.frame) {
		c.started, c.sec, c.frame, c.src = true, sec, h.FrameNumber, SourceID(h)
		return nil
	}
	fps := int64(c.FramesPerSecond)
	if fps <= 0 {
		fps = int64(c.maxFrames) + 1
	}
	lag := (c.sec-sec)*fps + int64(c.frame) - int64(h.FrameNumber)
	if lag > int64(c.Tolerance) {
		st, th := SplitSourceID(c.src)
		return schemas.Errorf(formatVDIF, "thread time", f.Offset, schemas.ErrInconsistent,
			"thread %d (station %d) at second %d frame %d lags station %d thread %d at second %d frame %d by %d frames (tolerance %d, %d frames/s)",
			h.ThreadID, h.StationID, h.Seconds, h.FrameNumber, st, th, c.sec-(EpochTime(h.RefEpoch).Unix()-epoch2000), c.frame, lag, c.Tolerance, fps)
	}
	return nil
}

// CheckThreads reads a whole VDIF stream through a ThreadCheck and returns
// the first read or consistency error, or nil.
func CheckThreads(r io.Reader, framesPerSecond, tolerance int) error {
	rd := NewReader(r)
	c := ThreadCheck{FramesPerSecond: framesPerSecond, Tolerance: tolerance}
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.Add(&f); err != nil {
			return err
		}
	}
}
