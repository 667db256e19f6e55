package vdif

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

func TestCheckThreadsSample(t *testing.T) {
	for _, fps := range []int{0, 1600} {
		if err := CheckThreads(bytes.NewReader(sample(t, "sample.vdif")), fps, 0); err != nil {
			t.Fatalf("%d frames/s: %v", fps, err)
		}
	}
}

// TestCheckThreadsLag builds two threads where thread 1 runs 5 frames
// behind thread 0: the first lagging frame is reported at its offset.
func TestCheckThreadsLag(t *testing.T) {
	var b []byte
	payload := make([]byte, 64)
	for k := uint32(5); k < 10; k++ {
		b = mustAppendFrame(t, b, edv0Header(0, 100, k), payload)
		b = mustAppendFrame(t, b, edv0Header(1, 100, k-5), payload)
	}
	err := CheckThreads(bytes.NewReader(b), 10, 2)
	wantDecodeError(t, err, "vdif", schemas.ErrInconsistent, 96)
	if err := CheckThreads(bytes.NewReader(b), 10, 5); err != nil {
		t.Fatalf("tolerance 5: %v", err)
	}
	// Across a second: thread 1 one second (= 10 frames) behind thread 0.
	b = b[:0]
	b = mustAppendFrame(t, b, edv0Header(0, 101, 0), payload)
	b = mustAppendFrame(t, b, edv0Header(1, 101, 0), payload)
	b = mustAppendFrame(t, b, edv0Header(0, 102, 0), payload)
	b = mustAppendFrame(t, b, edv0Header(1, 101, 1), payload)
	err = CheckThreads(bytes.NewReader(b), 10, 8)
	wantDecodeError(t, err, "vdif", schemas.ErrInconsistent, 3*96)
	if err := CheckThreads(bytes.NewReader(b), 10, 9); err != nil {
		t.Fatalf("lag 9 with tolerance 9: %v", err)
	}
	// Read errors pass through.
	err = CheckThreads(bytes.NewReader(b[:100]), 10, 9)
	wantDecodeError(t, err, "vdif", schemas.ErrTruncated, 96)
}
