package readout

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// seedDatagrams are valid datagrams of both formats and cut copies.
func seedDatagrams(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 3, 100, 0, 3, [][]byte{[]byte("abc"), {}, []byte("0123456789")}, nil)
	f.Add(binary.LittleEndian.AppendUint64(nil, 7), mfp)
	if b, err := os.ReadFile(sampleVDIF); err == nil {
		if fr, err := vdif.DecodeFrame(b); err == nil {
			vtp := vdif.AppendVTP(nil, 9, fr.Bytes)
			f.Add(vtp[:8], vtp[8:])
			f.Add(vtp[:8], vtp[8:100])
		}
	}
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, mfp[:40])
}

// FuzzDatagramDecoders: neither decoder panics or reads outside the
// datagram and its headroom, and what decodes is a consistent packet.
func FuzzDatagramDecoders(f *testing.F) {
	seedDatagrams(f)
	f.Fuzz(func(t *testing.T, seq, payload []byte) {
		if len(seq) != seqSize {
			return
		}
		for _, dec := range []DatagramDecoder{DecodeMFPDatagram, DecodeVTPDatagram} {
			b := make([]byte, udpHeadroom, udpHeadroom+len(seq)+len(payload))
			b = append(append(b, seq...), payload...)
			p, err := dec(b, udpHeadroom)
			if err != nil {
				continue
			}
			n := 0
			p.Fragments(func(_ int, _ uint64, _ uint32, pl []byte) bool { n += len(pl); return true })
			if n > len(payload) || len(p.Bytes()) > len(b) {
				t.Fatalf("packet of %d payload bytes from a %d-byte datagram", n, len(payload))
			}
		}
	})
}

// FuzzSeqWindow feeds a sender's sequence numbers (each byte: a step from
// the previous number, so that reordering, duplicates and gaps all occur)
// through the reorder window and checks its accounting: every number from
// the start up to the end marker is delivered once or declared lost, in
// increasing order, and every arrival is delivered, late or a duplicate.
func FuzzSeqWindow(f *testing.F) {
	f.Add([]byte{1, 1, 1, 1}, uint8(4))
	f.Add([]byte{3, 0xFF, 1, 1, 0, 7, 0xFE, 40, 1}, uint8(2))
	f.Add([]byte{200, 1, 0xF0, 0x80, 2}, uint8(16))
	f.Fuzz(func(t *testing.T, steps []byte, size uint8) {
		if size == 0 {
			return
		}
		var c counters
		pool := bufPool{held: &c}
		var seqs []uint64
		s := uint64(1 << 40) // far from 0: steps never wrap
		for _, st := range steps {
			s += uint64(int8(st)) // -128..127
			seqs = append(seqs, s)
		}
		if len(seqs) == 0 {
			return
		}
		w := newSeqWindow(int(size), seqs[0], &c)
		start := w.next
		var delivered []uint64
		deliver := func(b *rxBuf, n int) error {
			delivered = append(delivered, binary.LittleEndian.Uint64(b.b))
			b.put()
			return nil
		}
		end := uint64(0)
		now := time.Now()
		for _, q := range seqs {
			b := pool.get(8)
			binary.LittleEndian.PutUint64(b.b, q)
			if err := w.add(q, b, 8, now, deliver); err != nil {
				t.Fatal(err)
			}
			end = max(end, q+1)
		}
		if err := w.flush(end, deliver); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(delivered); i++ {
			if delivered[i] <= delivered[i-1] {
				t.Fatalf("delivered %d after %d", delivered[i], delivered[i-1])
			}
		}
		st := c.snapshot()
		if got := uint64(len(delivered)) + st.Lost; got != end-start {
			t.Fatalf("delivered %d + lost %d != %d numbers [%d, %d)", len(delivered), st.Lost, end-start, start, end)
		}
		if got := uint64(len(delivered)) + st.Discarded[ReasonLate] + st.Discarded[ReasonDuplicate]; got != uint64(len(seqs)) {
			t.Fatalf("delivered + late + duplicate = %d, %d arrived", got, len(seqs))
		}
		if w.held != 0 {
			t.Fatalf("%d datagrams still held after flush", w.held)
		}
	})
}

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
		in := NewFileInput(path)
		sink := newCheckSink(0)
		in.Run(context.Background(), sink)
		st := in.Stats()
		if int(st.Packets) != sink.packets || st.HeldBytes != 0 || st.Bytes > uint64(len(data)) {
			t.Fatalf("stats %+v, sink saw %d packets, file %d bytes", st, sink.packets, len(data))
		}
	})
}

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
	in, err := ListenTCP("127.0.0.1:0", Config{CreditWindow: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	sink := newCheckSink(0)
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
