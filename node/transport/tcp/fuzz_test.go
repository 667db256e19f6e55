package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// FuzzTCPStream sends arbitrary bytes after a valid preamble into a TCP
// input: it never panics, hands on only whole packets within the credit,
// and counts the rest. The bytes are written in pieces cut at points the
// fuzzer chooses (cuts: one byte per piece, its length), with TCP_NODELAY
// and a pause after each, so that the input's reads end inside length
// prefixes and frames, as nats-server's parser fuzzers split their input,
// to reach the code that carries a partial frame into the next chunk.
func FuzzTCPStream(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{[]byte("payload")}, nil)
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(mfp)))
	frame = append(frame, mfp...)
	twice := append(append(append([]byte(nil), frame...), frame...), 0, 0, 0, 0)
	f.Add(append(append([]byte(nil), frame...), 0, 0, 0, 0), []byte(nil))
	f.Add(frame[:len(frame)-3], []byte{2})
	f.Add(append(binary.LittleEndian.AppendUint32(nil, 1<<30), 1, 2, 3), []byte{1, 1, 1})
	f.Add(twice, []byte{1, 3, 9, 1, 20, 2})
	pre := binary.LittleEndian.AppendUint32(nil, tcpMagic)
	fuzzTCPInput(f, binary.LittleEndian.AppendUint32(pre, StreamVersion1))
}

// FuzzTCPStreamV2 is FuzzTCPStream for version 2 streams: 64-byte record
// headers of any kind, padding, credit wanted records, cut anywhere.
func FuzzTCPStreamV2(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 1, 5, 0, 0, [][]byte{[]byte("payload")}, nil)
	frame := v2Frame(mfp)
	end := make([]byte, wireAlign)
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	unknown := v2CreditWanted(10)
	binary.LittleEndian.PutUint32(unknown[4:], 2)
	f.Add(cat(frame, end), []byte(nil))
	f.Add(cat(frame, v2CreditWanted(len(mfp)), frame, end), []byte{1, 70, 9, 64, 20, 2})
	f.Add(frame[:len(frame)-3], []byte{2})
	f.Add(cat(frame, v2CreditWanted(1<<17)), []byte(nil))
	f.Add(cat(v2CreditWanted(0), frame), []byte(nil))
	f.Add(cat(unknown, frame), []byte{64})
	f.Add(cat(v2Frame(make([]byte, 1<<16+1)), end), []byte{200, 100})
	f.Add(cat(frame, v2CreditWanted(len(mfp))[:30]), []byte{80})
	pre := binary.LittleEndian.AppendUint32(nil, tcpMagic)
	pre = binary.LittleEndian.AppendUint32(pre, StreamVersion2)
	fuzzTCPInput(f, append(pre, make([]byte, preambleV2-8)...))
}

// fuzzTCPInput runs FuzzTCPStream's checks on the fuzzer's stream sent
// after preamble into one input of 64 KiB windows.
func fuzzTCPInput(f *testing.F, preamble []byte) {
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	sink := transporttest.NewCheckSink(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	f.Cleanup(func() { cancel(); <-done })
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		before := in.Stats().Connections
		c, err := net.Dial("tcp", in.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		// An input that leaves a finished stream's connection open fails
		// here, naming its state, instead of blocking this worker for good
		// (a fuzz worker has no per-input timeout).
		c.SetDeadline(time.Now().Add(streamDeadline))
		rest := append(append([]byte(nil), preamble...), stream...)
		for _, n := range cuts[:min(len(cuts), 16)] {
			k := min(int(n), len(rest))
			if k == 0 {
				continue
			}
			c.Write(rest[:k])
			rest = rest[k:]
			time.Sleep(100 * time.Microsecond) // the input reads this piece alone
		}
		c.Write(rest)
		c.(*net.TCPConn).CloseWrite()
		var grant [8]byte
		// The receiver closes its side once it has dealt with everything.
		for {
			if _, err := c.Read(grant[:]); err != nil {
				checkClosed(t, err, in)
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

// FuzzFEROLStream sends arbitrary bytes into a FEROL input (?framing=ferol)
// in pieces cut where the fuzzer chooses (cuts, as FuzzTCPStream), so that
// reads end inside block headers and payloads: it never panics, hands on
// only whole FED fragments, counts what it does not take and holds nothing
// once the connection ended.
func FuzzFEROLStream(f *testing.F) {
	fed := make([]byte, 3*cms.FEDWordSize)
	binary.LittleEndian.PutUint64(fed, 0x5<<60|7<<32|931<<8)
	binary.LittleEndian.PutUint64(fed[16:], 0xA<<60|3<<32)
	binary.LittleEndian.PutUint16(fed[16+2:], cms.FEDCRC(fed))
	one, err := cms.AppendFEROL(nil, 931, 7, fed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one, []byte(nil))
	f.Add(append(append([]byte(nil), one...), one...), []byte{3, 13, 1, 20})
	f.Add(one[:len(one)-5], []byte{9})
	big, _ := cms.AppendFEROL(nil, 5, 1, make([]byte, 3*cms.FEROLMaxPayload))
	f.Add(big, []byte{16, 200, 100})
	in, err := Listen("127.0.0.1:0", Options{Framing: FramingFEROL, CreditWindow: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	sink := transporttest.NewCheckSink(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	f.Cleanup(func() { cancel(); <-done })
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		before := in.Stats().Connections
		c, err := net.Dial("tcp", in.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		c.SetDeadline(time.Now().Add(streamDeadline)) // as FuzzTCPStream
		rest := stream
		for _, n := range cuts[:min(len(cuts), 16)] {
			k := min(int(n), len(rest))
			if k == 0 {
				continue
			}
			c.Write(rest[:k])
			rest = rest[k:]
			time.Sleep(100 * time.Microsecond) // the input reads this piece alone
		}
		c.Write(rest)
		c.(*net.TCPConn).CloseWrite()
		var b [64]byte
		for { // the input closes its side once it has dealt with everything
			if _, err := c.Read(b[:]); err != nil {
				checkClosed(t, err, in)
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
		if cc := sink.Counts(); cc.BadCRC != 0 {
			t.Fatalf("a fragment handed on with a CRC-32C that does not match: %+v", cc)
		}
	})
}

// streamDeadline bounds one fuzz input's connection, writes and the wait
// for the input to close it.
const streamDeadline = 10 * time.Second

// checkClosed fails t if err, the error that ended the sender's reads, is
// the deadline: the input kept the connection open after the stream.
func checkClosed(t *testing.T, err error, in *Input) {
	t.Helper()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the input did not close the connection within %v of the stream's end: %+v", streamDeadline, in.Stats())
	}
}
