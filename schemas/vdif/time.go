package vdif

import (
	"fmt"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// EpochTime returns the start of VDIF reference epoch e: 2000-01-01 00:00
// UTC plus e half-years (epoch 28 = 2014-01-01, 29 = 2014-07-01).
func EpochTime(e uint8) time.Time {
	return time.Date(2000+int(e)/2, time.Month(1+6*(int(e)%2)), 1, 0, 0, 0, 0, time.UTC)
}

// Time returns the UTC start of the frame: the reference epoch plus Seconds
// plus FrameNumber/framesPerSecond. Seconds are counted as DiFX vdifio does,
// in days of 86400 s: a leap second between the epoch and the frame is not
// counted (baseband counts it; the two agree for data within the half-year
// of their epoch, the normal case). framesPerSecond (per thread) is needed
// only when FrameNumber > 0; a frame number not below it is an error
// wrapping schemas.ErrInconsistent.
func (h *Header) Time(framesPerSecond int) (time.Time, error) {
	t := EpochTime(h.RefEpoch).Add(time.Duration(h.Seconds) * time.Second)
	if h.FrameNumber == 0 {
		return t, nil
	}
	if framesPerSecond <= 0 || h.FrameNumber >= uint32(framesPerSecond) {
		return time.Time{}, fmt.Errorf("vdif: frame number %d with %d frames/s: %w", h.FrameNumber, framesPerSecond, schemas.ErrInconsistent)
	}
	return t.Add(time.Duration(uint64(h.FrameNumber) * uint64(time.Second) / uint64(framesPerSecond))), nil
}

// epochSecond is the frame's whole second as seconds since 2000-01-01 UTC
// (days of 86400 s), comparable across reference epochs.
func (h *Header) epochSecond() int64 {
	return EpochTime(h.RefEpoch).Unix() - epoch2000 + int64(h.Seconds)
}

var epoch2000 = EpochTime(0).Unix()
