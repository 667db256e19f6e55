package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/schemas"
)

// FuzzFileInput: any file is read without panicking, and every packet is
// either handed on or counted.
func FuzzFileInput(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{[]byte("payload")}, nil)
	f.Add(append(append([]byte(nil), mfp...), mfp...))
	f.Add(mfp[:len(mfp)-1])
	f.Add(append(append([]byte(nil), mfp...), 0x53, 0x4C, 0x4D, 0x50, 1))
	path := filepath.Join(f.TempDir(), "fuzz.mfp")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		in := NewInput(path)
		sink := transporttest.NewCheckSink(0)
		in.Run(context.Background(), sink)
		st := in.Stats()
		if int(st.Packets) != sink.Counts().Packets || st.HeldBytes != 0 || st.Bytes > uint64(len(data)) {
			t.Fatalf("stats %+v, sink saw %d packets, file %d bytes", st, sink.Counts().Packets, len(data))
		}
	})
}
