package vdif

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// Format names, as Report.Format and the formats' Name give them.
const (
	FormatVDIF   = "vdif"
	FormatMark5B = "mark5b"
)

// DetectMark5B reports whether head starts with a Mark 5B header with
// valid sync, BCD time code and CRC16, followed by the next frame's sync
// when head reaches it.
func DetectMark5B(head []byte) bool {
	if _, err := DecodeMark5BHeader(head); err != nil {
		return false
	}
	return len(head) < Mark5BFrameSize+4 || binary.LittleEndian.Uint32(head[Mark5BFrameSize:]) == Mark5BSync
}

// DetectVDIF reports whether head starts with a VDIF header that
// DecodeHeader accepts with its unassigned bits zero and version below 2,
// and either the next frame's header (when head holds it) agreeing on
// legacy flag, frame length, reference epoch, version and EDV, or, when
// head ends before it, a header whose EDV carries a sync word (1, 2, 3, 4,
// 0xAB): a lone legacy or EDV 0 header is too weak a sign (zeros pass it).
// It looks only at the bytes.
func DetectVDIF(head []byte) bool {
	h, err := DecodeHeader(head)
	if err != nil || h.Unassigned != 0 || h.Version > 1 {
		return false
	}
	next := h.FrameBytes()
	if len(head) < next+h.Size() {
		synced := h.EDV == EDVSampleRate || h.EDV == EDVALMA || h.EDV == EDVVLBA || h.EDV == EDVMulti || h.EDV == EDVMark5B
		return !h.Legacy && synced
	}
	n, err := DecodeHeader(head[next:])
	return err == nil && n.Legacy == h.Legacy && n.FrameLength == h.FrameLength && n.RefEpoch == h.RefEpoch && n.Version == h.Version && n.EDV == h.EDV
}

// refusal is DetectVDIF's question asked without the EDV checks: when
// head's first two headers agree as DetectVDIF wants them to but one of
// them fails the checks of its EDV's extended words (e.g. EDV 0 with a
// non-zero word 5), that header's error, at its offset in head; else nil.
func refusal(head []byte) error {
	h, err := decodeFields(head)
	if err != nil || h.Unassigned != 0 || h.Version > 1 || h.Legacy {
		return nil
	}
	next := h.FrameBytes()
	if len(head) < next+HeaderSize {
		return nil // one header alone is no sign of VDIF
	}
	n, err := decodeFields(head[next:])
	if err != nil || n.Legacy || n.FrameLength != h.FrameLength || n.RefEpoch != h.RefEpoch || n.Version != h.Version || n.EDV != h.EDV {
		return nil
	}
	if _, err := DecodeHeader(head); err != nil {
		return err
	}
	if _, err := DecodeHeader(head[next:]); err != nil {
		return schemas.WithOffset(err, int64(next))
	}
	return nil
}

// Report summarizes a VDIF or Mark 5B file for `sluice inspect`.
type Report struct {
	Format     string      `json:"format"`      // "vdif" or "mark5b"
	Bytes      int64       `json:"bytes"`       // bytes in the frames read
	Frames     int         `json:"frames"`      // frames read
	FrameSizes map[int]int `json:"frame_sizes"` // frame bytes -> frames
	// VDIF
	Threads      []uint16 `json:"threads,omitempty"`  // thread ids, ascending
	Stations     []string `json:"stations,omitempty"` // see Header.Station
	EDVs         []int    `json:"edvs,omitempty"`     // extended data versions of non-legacy frames
	LegacyFrames int      `json:"legacy_frames,omitempty"`
	// InvalidFrames counts VDIF frames with the invalid-data flag set.
	InvalidFrames int `json:"invalid_frames"`
	// Events counts the (second, frame number) events the node builds
	// from the frames, one frame per thread each (VDIF only).
	Events int `json:"events,omitempty"`
	// Signal is what the frames hold (VDIF only).
	Signal *Signal `json:"signal,omitempty"`
	// FramesPerSecond per thread, and where it came from
	// (FrameRateSource): "header" (the EDV's sample rate), "stream" (largest
	// frame number + 1, a whole second was seen) or "lower-bound" (no whole
	// second seen: the rate may be higher, so the time of a frame with a
	// non-zero frame number is not known).
	FramesPerSecond int    `json:"frames_per_second"`
	FrameRateSource string `json:"frame_rate_source"`
	// SecondsSpanned counts the whole seconds from the earliest frame's to
	// the latest frame's, both included (VDIF only).
	SecondsSpanned int `json:"seconds_spanned,omitempty"`
	// TimeRangeExact says whether Start, End and the frame times of the
	// details are known: VDIF frames with a frame rate from the header or
	// the stream. With only a lower bound on the rate they are left out.
	TimeRangeExact bool `json:"time_range_exact"`
	// Start and End are the UTC start of the earliest and latest frame
	// (VDIF only: a Mark 5B time code lacks the thousands of the MJD).
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// ThreadCheck is the ThreadCheck error with a tolerance of one frame,
	// empty when the threads agree.
	ThreadCheck string `json:"thread_check,omitempty"`
	// Mark 5B
	UserFields []uint16 `json:"user_fields,omitempty"`
	TVGFrames  int      `json:"tvg_frames,omitempty"`
	CRCValid   int      `json:"crc_valid,omitempty"` // frames whose time-code CRC16 matched
	// StartTimeCode and EndTimeCode are the Mark 5B time codes of the
	// first and last frame as "MJD mod 1000/seconds of day.fraction".
	StartTimeCode string `json:"start_time_code,omitempty"`
	EndTimeCode   string `json:"end_time_code,omitempty"`
	// Details of the first frames, as many as Inspect was asked for.
	Details []FrameDetail `json:"detail,omitempty"`
}

// Signal is a VDIF file's signal as its first frame describes it (Mixed:
// not every frame agrees): VDIF version, channels, bits per sample, real
// or complex samples, samples per frame (per channel), the reference epoch
// and its start date (UTC), and the sample rate per channel (samples per
// frame × frames/s; 0 while the frame rate is only a lower bound).
type Signal struct {
	VDIFVersion     int     `json:"vdif_version"`
	Channels        int     `json:"channels"`
	BitsPerSample   int     `json:"bits_per_sample"`
	Complex         bool    `json:"complex"`
	SamplesPerFrame int     `json:"samples_per_frame"`
	SampleRateHz    float64 `json:"sample_rate_hz,omitempty"`
	RefEpoch        int     `json:"ref_epoch"`
	RefEpochStart   string  `json:"ref_epoch_start"` // e.g. "2014-01-01"
	Mixed           bool    `json:"mixed,omitempty"`
}

// FrameDetail describes one frame.
type FrameDetail struct {
	Index       int        `json:"index"` // of the frame in the file, from 0
	Offset      int64      `json:"offset"`
	Bytes       int        `json:"frame_bytes"`
	Thread      uint16     `json:"thread"`
	Station     string     `json:"station,omitempty"`
	EDV         int        `json:"edv"`
	Legacy      bool       `json:"legacy,omitempty"`
	Invalid     bool       `json:"invalid,omitempty"`
	Seconds     uint32     `json:"seconds"` // VDIF: since the reference epoch; Mark 5B: of the day
	FrameNumber uint32     `json:"frame_number"`
	Time        *time.Time `json:"time,omitempty"` // VDIF: UTC start of the frame
	TimeCode    string     `json:"time_code,omitempty"`
	User        uint16     `json:"user,omitempty"`
	TVG         bool       `json:"tvg,omitempty"`
}

// Inspect detects the format of r from its first bytes (DetectMark5B, then
// DetectVDIF), reads
// every frame and returns the report, with per-frame details for the first
// maxFrames frames. On a read or decode error it returns the report of the
// frames before it together with the error (*schemas.DecodeError with the
// byte offset). Neither format: ErrBadMagic at offset 0.
func Inspect(r io.Reader, maxFrames int) (*Report, error) {
	br := bufio.NewReaderSize(r, format.HeadBytes)
	head, _ := br.Peek(format.HeadBytes)
	switch {
	case DetectMark5B(head):
		return inspectMark5B(br, maxFrames)
	case DetectVDIF(head):
		return inspectVDIF(br, maxFrames)
	}
	return nil, schemas.Errorf("inspect", "header", 0, schemas.ErrBadMagic, "neither a VDIF header with a consistent next frame nor a Mark 5B sync word 0x%08x", Mark5BSync)
}

func inspectVDIF(r io.Reader, maxFrames int) (*Report, error) {
	rep := &Report{Format: FormatVDIF, FrameSizes: map[int]int{}}
	rd := NewReader(r)
	threads, stations, edvs := map[uint16]bool{}, map[string]bool{}, map[int]bool{}
	var details []Header
	var first, last Header
	var check ThreadCheck
	check.Tolerance = 1
	headerRate, secondSeen := 0, false
	frameZero := map[uint32]int64{} // source -> last second whose frame 0 it sent
	events := map[uint64]bool{}
	type signal struct {
		version, channels, bits, samples int
		complex                          bool
		epoch                            uint8
	}
	signalOf := func(h *Header) signal {
		return signal{int(h.Version), h.Channels(), int(h.BitsPerSample), h.SamplesPerFrame(), h.Complex, h.RefEpoch}
	}
	var sig0 signal
	var err error
	for {
		var f Frame
		if f, err = rd.Next(); err != nil {
			break
		}
		h := f.Header
		if rep.Frames < maxFrames {
			details = append(details, h)
			rep.Details = append(rep.Details, FrameDetail{Index: rep.Frames, Offset: f.Offset, Bytes: len(f.Bytes), Thread: h.ThreadID, Station: h.Station(),
				EDV: int(h.EDV), Legacy: h.Legacy, Invalid: h.Invalid, Seconds: h.Seconds, FrameNumber: h.FrameNumber})
		}
		events[EventID(&h)] = true
		if s := signalOf(&h); rep.Frames == 0 {
			sig0 = s
			rep.Signal = &Signal{VDIFVersion: s.version, Channels: s.channels, BitsPerSample: s.bits, Complex: s.complex,
				SamplesPerFrame: s.samples, RefEpoch: int(s.epoch), RefEpochStart: EpochTime(s.epoch).Format(time.DateOnly)}
		} else if s != sig0 {
			rep.Signal.Mixed = true
		}
		if rep.Frames == 0 || later(&first, &h) {
			first = h
		}
		if rep.Frames == 0 || later(&h, &last) {
			last = h
		}
		rep.Frames++
		rep.Bytes += int64(len(f.Bytes))
		rep.FrameSizes[len(f.Bytes)]++
		threads[h.ThreadID], stations[h.Station()] = true, true
		if h.Legacy {
			rep.LegacyFrames++
		} else {
			edvs[int(h.EDV)] = true
		}
		if h.Invalid {
			rep.InvalidFrames++
		}
		if fps, ok := h.HeaderFrameRate(); ok && headerRate == 0 {
			headerRate, check.FramesPerSecond = fps, fps
		}
		rep.FramesPerSecond = max(rep.FramesPerSecond, int(h.FrameNumber)+1)
		if h.FrameNumber == 0 {
			src, sec := SourceID(&h), h.epochSecond()
			if prev, ok := frameZero[src]; ok && sec == prev+1 {
				secondSeen = true
			}
			frameZero[src] = sec
		}
		if rep.ThreadCheck == "" {
			if cerr := check.Add(&f); cerr != nil {
				rep.ThreadCheck = cerr.Error()
			}
		}
	}
	switch {
	case headerRate > 0:
		rep.FramesPerSecond, rep.FrameRateSource = headerRate, "header"
	case secondSeen:
		rep.FrameRateSource = "stream"
	default:
		rep.FrameRateSource = "lower-bound"
	}
	rep.Events = len(events)
	if rep.Signal != nil && rep.FrameRateSource != "lower-bound" {
		rep.Signal.SampleRateHz = float64(rep.Signal.SamplesPerFrame) * float64(rep.FramesPerSecond)
	}
	for t := range threads {
		rep.Threads = append(rep.Threads, t)
	}
	slices.Sort(rep.Threads)
	for s := range stations {
		rep.Stations = append(rep.Stations, s)
	}
	slices.Sort(rep.Stations)
	for e := range edvs {
		rep.EDVs = append(rep.EDVs, e)
	}
	slices.Sort(rep.EDVs)
	if rep.Frames > 0 {
		rep.SecondsSpanned = int(last.epochSecond()-first.epochSecond()) + 1
	}
	// A lower bound on the rate would place frames too late in their
	// second: give times only when the rate is known.
	if rep.Frames > 0 && rep.FrameRateSource != "lower-bound" {
		rep.TimeRangeExact = true
		rep.Start, rep.End = frameTime(&first, rep.FramesPerSecond), frameTime(&last, rep.FramesPerSecond)
		for i := range details {
			rep.Details[i].Time = frameTime(&details[i], rep.FramesPerSecond)
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return rep, err
}

// later reports whether a starts after b.
func later(a, b *Header) bool {
	sa, sb := a.epochSecond(), b.epochSecond()
	return sa > sb || sa == sb && a.FrameNumber > b.FrameNumber
}

// frameTime is h.Time as a pointer, nil when the rate does not cover the
// frame number.
func frameTime(h *Header, fps int) *time.Time {
	t, err := h.Time(fps)
	if err != nil {
		return nil
	}
	return &t
}

func inspectMark5B(r io.Reader, maxFrames int) (*Report, error) {
	rep := &Report{Format: FormatMark5B, FrameSizes: map[int]int{}}
	rd := NewMark5BReader(r)
	users := map[uint16]bool{}
	secondSeen := false
	var prevZero int64 = -2
	var err error
	for {
		var f Mark5BFrame
		if f, err = rd.Next(); err != nil {
			break
		}
		h := f.Header
		code := fmt.Sprintf("%03d/%05d.%04d", h.JDay, h.SecondsOfDay, h.Fraction)
		if rep.Frames < maxFrames {
			rep.Details = append(rep.Details, FrameDetail{Index: rep.Frames, Offset: f.Offset, Bytes: len(f.Bytes), Seconds: h.SecondsOfDay,
				FrameNumber: uint32(h.FrameNumber), TimeCode: code, User: h.User, TVG: h.TVG})
		}
		if rep.Frames == 0 {
			rep.StartTimeCode = code
		}
		rep.EndTimeCode = code
		rep.Frames++
		rep.CRCValid++ // the reader stops at a CRC mismatch
		rep.Bytes += int64(len(f.Bytes))
		rep.FrameSizes[len(f.Bytes)]++
		users[h.User] = true
		if h.TVG {
			rep.TVGFrames++
		}
		rep.FramesPerSecond = max(rep.FramesPerSecond, int(h.FrameNumber)+1)
		if h.FrameNumber == 0 {
			sec := int64(h.JDay)*86400 + int64(h.SecondsOfDay)
			secondSeen = secondSeen || sec == prevZero+1
			prevZero = sec
		}
	}
	rep.FrameRateSource = "lower-bound"
	if secondSeen {
		rep.FrameRateSource = "stream"
	}
	for u := range users {
		rep.UserFields = append(rep.UserFields, u)
	}
	slices.Sort(rep.UserFields)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return rep, err
}
