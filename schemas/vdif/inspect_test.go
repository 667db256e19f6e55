package vdif

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

func TestDetect(t *testing.T) {
	vdif, mwa, m5b := sample(t, "sample.vdif"), sample(t, "sample_mwa.vdif"), sample(t, "sample.m5b")
	mdfLike := make([]byte, 256) // LHCb MDF starts with its size three times
	for i := 0; i < 12; i += 4 {
		binary.LittleEndian.PutUint32(mdfLike[i:], 0x3000)
	}
	legacy := edv0Header(0, 0, 0)
	legacy.Legacy = true
	leg := mustAppendFrame(t, nil, legacy, make([]byte, 64))
	for _, tc := range []struct {
		name string
		head []byte
		want string
	}{
		{"sample.vdif", vdif, FormatVDIF},
		{"sample.vdif first header only", vdif[:32], FormatVDIF},
		{"sample_mwa.vdif", mwa, FormatVDIF},
		{"sample.m5b", m5b, FormatMark5B},
		{"sample.m5b first header only", m5b[:16], FormatMark5B},
		{"Mark 5B with a bad second sync", append(bytes.Clone(m5b[:10016]), 1, 2, 3, 4), ""},
		{"Mark 5B header with bad CRC", append([]byte{0xed, 0xde, 0xad, 0xab}, m5b[4:12]...), ""},
		{"VDIF whose next header disagrees", append(bytes.Clone(mwa[:544]), vdif[:32]...), ""},
		{"legacy VDIF, two frames", append(bytes.Clone(leg), leg...), FormatVDIF},
		{"legacy VDIF, one header", leg[:16], ""},
		{"MDF-like", mdfLike, ""},
		{"zeros", make([]byte, 4096), ""},
		{"empty", nil, ""},
	} {
		got := ""
		switch {
		case DetectMark5B(tc.head):
			got = FormatMark5B
		case DetectVDIF(tc.head):
			got = FormatVDIF
		}
		if got != tc.want {
			t.Errorf("%s: Detect = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestInspectVDIF(t *testing.T) {
	rep, err := Inspect(bytes.NewReader(sample(t, "sample.vdif")), 3)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2014, 6, 16, 5, 56, 7, 0, time.UTC)
	if rep.Format != "vdif" || rep.Frames != 16 || rep.Bytes != 80512 || rep.FrameSizes[5032] != 16 || len(rep.Threads) != 8 ||
		rep.Threads[7] != 7 || len(rep.Stations) != 1 || rep.Stations[0] != "65532" || len(rep.EDVs) != 1 || rep.EDVs[0] != 3 ||
		rep.InvalidFrames != 0 || rep.FramesPerSecond != 1600 || rep.FrameRateSource != "header" || !rep.TimeRangeExact || rep.SecondsSpanned != 1 || rep.ThreadCheck != "" {
		t.Fatalf("report %+v", rep)
	}
	if !rep.Start.Equal(start) || !rep.End.Equal(start.Add(625*time.Microsecond)) {
		t.Fatalf("time range %v .. %v", rep.Start, rep.End)
	}
	if len(rep.Details) != 3 || rep.Details[2].Index != 2 || rep.Details[2].Offset != 10064 || rep.Details[2].Bytes != 5032 || rep.Details[2].Thread != 5 || !rep.Details[2].Time.Equal(start) {
		t.Fatalf("details %+v", rep.Details)
	}
	js, err := json.Marshal(rep)
	if err != nil || !bytes.Contains(js, []byte(`"frames_per_second":1600`)) || !bytes.Contains(js, []byte(`"start":"2014-06-16T05:56:07Z"`)) ||
		!bytes.Contains(js, []byte(`"frame_rate_source":"header"`)) || !bytes.Contains(js, []byte(`"time_range_exact":true`)) || !bytes.Contains(js, []byte(`"frame_bytes":5032`)) {
		t.Fatalf("json %s (%v)", js, err)
	}
}

func TestInspectMWA(t *testing.T) {
	rep, err := Inspect(bytes.NewReader(sample(t, "sample_mwa.vdif")), 100)
	if err != nil {
		t.Fatal(err)
	}
	// One second, frames 0..9 only: the rate is a lower bound, so no
	// frame time is given as if it were known.
	if rep.Frames != 10 || rep.FramesPerSecond != 10 || rep.FrameRateSource != "lower-bound" || rep.Stations[0] != "mw" ||
		rep.EDVs[0] != 0 || len(rep.Details) != 10 || rep.SecondsSpanned != 1 || rep.TimeRangeExact || rep.Start != nil || rep.End != nil {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range rep.Details {
		if d.Time != nil {
			t.Fatalf("frame %d has a time %v from a lower-bound rate", d.Index, d.Time)
		}
	}
	js, err := json.Marshal(rep)
	if err != nil || !bytes.Contains(js, []byte(`"frame_rate_source":"lower-bound"`)) || !bytes.Contains(js, []byte(`"time_range_exact":false`)) || bytes.Contains(js, []byte(`"start"`)) {
		t.Fatalf("json %s (%v)", js, err)
	}
}

// TestInspectStreamRate: two whole seconds of one thread give the rate
// from the stream; an invalid frame is counted; a lagging thread reported.
func TestInspectStreamRate(t *testing.T) {
	var b []byte
	for sec := uint32(50); sec < 53; sec++ {
		for fr := uint32(0); fr < 4; fr++ {
			h := edv0Header(0, sec, fr)
			h.Invalid = sec == 51 && fr == 2
			b = mustAppendFrame(t, b, h, make([]byte, 32))
		}
	}
	b = mustAppendFrame(t, b, edv0Header(1, 50, 0), make([]byte, 32))
	rep, err := Inspect(bytes.NewReader(b), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FramesPerSecond != 4 || rep.FrameRateSource != "stream" || !rep.TimeRangeExact || rep.SecondsSpanned != 3 || rep.InvalidFrames != 1 || rep.Details != nil || rep.ThreadCheck == "" {
		t.Fatalf("report %+v", rep)
	}
	if want := EpochTime(40).Add(52*time.Second + 750*time.Millisecond); !rep.End.Equal(want) {
		t.Fatalf("end %v, want %v", rep.End, want)
	}
}

func TestInspectMark5B(t *testing.T) {
	rep, err := Inspect(bytes.NewReader(sample(t, "sample.m5b")), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != "mark5b" || rep.Frames != 4 || rep.CRCValid != 4 || rep.FrameSizes[10016] != 4 || len(rep.UserFields) != 1 ||
		rep.UserFields[0] != 0xbead || rep.StartTimeCode != "821/19801.0000" || rep.EndTimeCode != "821/19801.0004" ||
		rep.FramesPerSecond != 4 || rep.FrameRateSource != "lower-bound" || rep.TimeRangeExact || len(rep.Details) != 2 || rep.Details[1].FrameNumber != 1 {
		t.Fatalf("report %+v", rep)
	}
}

func TestInspectErrors(t *testing.T) {
	rep, err := Inspect(bytes.NewReader(sample(t, "sample.vdif")[:80000]), 0)
	wantDecodeError(t, err, "vdif", schemas.ErrTruncated, 75480)
	if rep == nil || rep.Frames != 15 {
		t.Fatalf("partial report %+v", rep)
	}
	m := bytes.Clone(sample(t, "sample.m5b"))
	m[30048+12] ^= 1
	rep, err = Inspect(bytes.NewReader(m), 0)
	wantDecodeError(t, err, "mark5b", schemas.ErrCRCMismatch, 30048+12)
	if rep.Frames != 3 || rep.CRCValid != 3 {
		t.Fatalf("partial report %+v", rep)
	}
	_, err = Inspect(bytes.NewReader(make([]byte, 1000)), 0)
	wantDecodeError(t, err, "inspect", schemas.ErrBadMagic, 0)
}

// TestRefusalEDV0: an EDV 0 file whose headers carry a non-zero word 5 is
// not detected (its headers are refused), but the registry can say why
// with the decoder's own error, at the header's word 5.
func TestRefusalEDV0(t *testing.T) {
	b := bytes.Clone(sample(t, "sample_mwa.vdif"))
	if !DetectVDIF(b) {
		t.Fatal("the EDV 0 sample is not detected")
	}
	if err := refusal(b); err != nil {
		t.Fatalf("refusal of a good file: %v", err)
	}
	for off := 0; off < len(b); off += 544 {
		binary.LittleEndian.PutUint32(b[off+20:], 0x12345678)
	}
	if DetectVDIF(b) {
		t.Fatal("EDV 0 with word 5 set detected as VDIF")
	}
	err := VDIFFormat.(format.Refuser).Refusal(b)
	de := decodetest.Want(t, err, schemas.ErrInconsistent, 20)
	if !strings.Contains(de.Error(), "EDV 0 requires extended user data 0") {
		t.Fatalf("refusal %v", err)
	}
	// Bytes that are no VDIF at all are not refused as VDIF.
	if err := refusal(bytes.Repeat([]byte{0xff}, 2000)); err != nil {
		t.Fatalf("refusal of 0xff bytes: %v", err)
	}
}
