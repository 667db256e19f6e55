package vdif

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

func TestVTPRoundTrip(t *testing.T) {
	for i, f := range frames(t, sample(t, "sample.vdif")) {
		seq := uint64(1)<<40 + uint64(i)
		d := AppendVTP(nil, seq, f.Bytes)
		if len(d) != 8+5032 || d[0] != byte(i) || d[5] != 1 {
			t.Fatalf("datagram of %d bytes starts % x", len(d), d[:8])
		}
		gotSeq, g, err := DecodeVTP(d)
		if err != nil || gotSeq != seq || g.Header != f.Header || !bytes.Equal(g.Bytes, f.Bytes) || g.Offset != 8 {
			t.Fatalf("frame %d: seq %d err %v", i, gotSeq, err)
		}
	}
}

func TestVTPErrors(t *testing.T) {
	frame := sample(t, "sample.vdif")[:5032]
	good := AppendVTP(nil, 7, frame)
	badSync := bytes.Clone(good)
	badSync[8+20] ^= 0xff
	for _, tc := range []struct {
		name     string
		d        []byte
		sentinel error
		off      int64
	}{
		{"no sequence number", good[:7], schemas.ErrTruncated, 0},
		{"header cut", good[:8+20], schemas.ErrTruncated, 8},
		{"frame cut", good[:len(good)-1], schemas.ErrTruncated, 8},
		{"trailing bytes", append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0), schemas.ErrInconsistent, 8 + 5032},
		{"bad sync", badSync, schemas.ErrBadMagic, 8 + 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeVTP(tc.d)
			wantDecodeError(t, err, "vtp", tc.sentinel, tc.off)
		})
	}
}
