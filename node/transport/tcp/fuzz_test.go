package tcp

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/schemas"
)

// FuzzTCPStream sends arbitrary bytes after a valid preamble into a TCP
// input: it never panics, hands on only whole packets within the credit,
// and counts the rest.
func FuzzTCPStream(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{[]byte("payload")}, nil)
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(mfp)))
	frame = append(frame, mfp...)
	f.Add(append(append([]byte(nil), frame...), 0, 0, 0, 0))
	f.Add(frame[:len(frame)-3])
	f.Add(append(binary.LittleEndian.AppendUint32(nil, 1<<30), 1, 2, 3))
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	sink := transporttest.NewCheckSink(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	f.Cleanup(func() { cancel(); <-done })
	f.Fuzz(func(t *testing.T, stream []byte) {
		before := in.Stats().Connections
		c, err := net.Dial("tcp", in.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		pre := binary.LittleEndian.AppendUint32(nil, tcpMagic)
		pre = binary.LittleEndian.AppendUint32(pre, tcpVersion)
		c.Write(append(pre, stream...))
		c.(*net.TCPConn).CloseWrite()
		var grant [8]byte
		c.Read(grant[:])
		// The receiver closes its side once it has dealt with everything.
		for {
			if _, err := c.Read(grant[:]); err != nil {
				break
			}
		}
		c.Close()
		for deadline := time.Now().Add(5 * time.Second); in.Stats().Open != 0 || in.Stats().Connections == before; {
			if time.Now().After(deadline) {
				t.Fatalf("connection not done after 5 s: %+v", in.Stats())
			}
			time.Sleep(50 * time.Microsecond)
		}
		if st := in.Stats(); st.HeldBytes != 0 {
			t.Fatalf("%d bytes held after the connection ended", st.HeldBytes)
		}
	})
}
