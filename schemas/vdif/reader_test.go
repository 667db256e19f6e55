package vdif

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// readAll reads every frame of b with a Reader, copying each.
func readAll(b []byte) ([]Frame, error) {
	rd := NewReader(bytes.NewReader(b))
	var out []Frame
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		f.Bytes = bytes.Clone(f.Bytes)
		out = append(out, f)
	}
}

func TestReaderSamples(t *testing.T) {
	for name, want := range map[string]struct{ n, size int }{"sample.vdif": {16, 5032}, "sample_mwa.vdif": {10, 544}} {
		b := sample(t, name)
		fs, err := readAll(b)
		if err != nil || len(fs) != want.n {
			t.Fatalf("%s: %d frames, %v", name, len(fs), err)
		}
		for i, f := range fs {
			if f.Offset != int64(i*want.size) || !bytes.Equal(f.Bytes, b[f.Offset:f.Offset+int64(want.size)]) {
				t.Fatalf("%s frame %d at %d", name, i, f.Offset)
			}
			if len(f.Payload()) != want.size-HeaderSize {
				t.Fatalf("payload %d bytes", len(f.Payload()))
			}
		}
	}
}

// TestWriterRoundTrip writes every sample frame back from its decoded
// header and payload: the stream must be byte-identical.
func TestWriterRoundTrip(t *testing.T) {
	for _, name := range []string{"sample.vdif", "sample_mwa.vdif"} {
		b := sample(t, name)
		var out bytes.Buffer
		w := NewWriter(&out)
		for _, f := range frames(t, b) {
			if err := w.WriteFrame(f.Header, f.Payload()); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out.Bytes(), b) || w.Frames != int64(len(b)/len(frames(t, b)[0].Bytes)) {
			t.Fatalf("%s: written stream differs (%d frames)", name, w.Frames)
		}
	}
}

func TestLegacyFrames(t *testing.T) {
	h := edv0Header(5, 100, 2)
	h.Legacy = true
	payload := bytes.Repeat([]byte{0xa5}, 64)
	b := mustAppendFrame(t, nil, h, payload)
	b = mustAppendFrame(t, b, h, payload)
	fs, err := readAll(b)
	if err != nil || len(fs) != 2 || fs[1].Offset != 80 || fs[0].Header.Size() != 16 || !bytes.Equal(fs[1].Payload(), payload) {
		t.Fatalf("%d frames %v", len(fs), err)
	}
	if fs[0].Header.FrameLength != 10 {
		t.Fatalf("frame length %d", fs[0].Header.FrameLength)
	}
}

// TestReaderErrors checks each bad stream yields its exact error at its
// byte offset in the stream, after the good frames before it.
func TestReaderErrors(t *testing.T) {
	b := sample(t, "sample.vdif")
	le := binary.LittleEndian
	mod := func(f func(c []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	huge := edv0Header(0, 0, 0)
	huge.FrameLength = 1<<24 - 1
	hugeB, _ := AppendHeader(bytes.Clone(b[:5032]), &huge)
	for _, tc := range []struct {
		name     string
		b        []byte
		good     int
		sentinel error
		off      int64
	}{
		{"truncated frame", b[:len(b)-100], 15, schemas.ErrTruncated, 75480},
		{"truncated header", b[:5032+20], 1, schemas.ErrTruncated, 5032},
		{"truncated legacy-size header", b[:5032+7], 1, schemas.ErrTruncated, 5032},
		{"frame length 0", mod(func(c []byte) { le.PutUint32(c[5032+8:], 0x20000000) }), 1, schemas.ErrBadHeader, 5032 + 8},
		{"frame length below header", mod(func(c []byte) { le.PutUint32(c[10064+8:], 0x20000002) }), 2, schemas.ErrBadHeader, 10064 + 8},
		{"bad EDV 3 sync", mod(func(c []byte) { c[10064+21] = 0 }), 2, schemas.ErrBadMagic, 10064 + 20},
		{"128 MiB frame length in a short stream", hugeB, 1, schemas.ErrTruncated, 5032},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := readAll(tc.b)
			if len(fs) != tc.good {
				t.Fatalf("%d good frames, want %d", len(fs), tc.good)
			}
			wantDecodeError(t, err, "vdif", tc.sentinel, tc.off)
		})
	}
	// DecodeFrame on a buffer shorter than the frame.
	_, err := DecodeFrame(b[:5000])
	wantDecodeError(t, err, "vdif", schemas.ErrTruncated, 0)
}

// TestReaderIOError passes through a non-EOF read error with its offset.
func TestReaderIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	rd := NewReader(io.MultiReader(bytes.NewReader(sample(t, "sample.vdif")[:5032]), errReader{boom}))
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	if rd.Offset() != 5032 {
		t.Fatalf("offset %d", rd.Offset())
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
