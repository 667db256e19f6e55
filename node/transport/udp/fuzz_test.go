package udp

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

const sampleVDIF = "../../../testdata/third_party/baseband/sample.vdif"

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
		var c transport.Counters
		pool := rxbuf.Pool{Held: &c}
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
		deliver := func(b *rxbuf.Buf, n int) error {
			delivered = append(delivered, binary.LittleEndian.Uint64(b.B))
			b.Put()
			return nil
		}
		end := uint64(0)
		now := time.Now()
		for _, q := range seqs {
			b := pool.Get(8)
			binary.LittleEndian.PutUint64(b.B, q)
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
		st := c.Snapshot()
		if got := uint64(len(delivered)) + st.Lost; got != end-start {
			t.Fatalf("delivered %d + lost %d != %d numbers [%d, %d)", len(delivered), st.Lost, end-start, start, end)
		}
		if got := uint64(len(delivered)) + st.Discarded[transport.Late] + st.Discarded[transport.Duplicate]; got != uint64(len(seqs)) {
			t.Fatalf("delivered + late + duplicate = %d, %d arrived", got, len(seqs))
		}
		if w.held != 0 {
			t.Fatalf("%d datagrams still held after flush", w.held)
		}
	})
}

// FuzzUDPReads feeds a byte stream to the input's receive path cut into
// datagrams at points the fuzzer chooses, and those datagrams into reads
// (recvmmsg batches) and senders, as nats-server's parser fuzzers split
// their input, so that packets end at every offset, windows fill and
// expire between reads, and end markers come early, late or twice. Each
// cuts byte is one datagram: its low 7 bits its length (0: 8 bytes, an
// end marker when the stream still has them), bit 7 starts a new read
// after the latency budget ran out and switches sender. Every datagram must
// be accounted for exactly once (delivered, discarded by reason or an end
// marker), nothing stays held, and no input panics.
func FuzzUDPReads(f *testing.F) {
	mfp := schemas.AppendMFP(nil, 3, 100, 0, 3, [][]byte{[]byte("abc"), {}, []byte("0123456789")}, nil)
	var stream []byte
	var cuts []byte
	for seq := range uint64(4) {
		d := binary.LittleEndian.AppendUint64(nil, 10+seq)
		d = append(d, mfp...)
		stream = append(stream, d...)
		cuts = append(cuts, byte(len(d)))
	}
	f.Add(stream, cuts, false)
	f.Add(stream, []byte{byte(len(mfp) + 8), 0x80 | byte(len(mfp)+8), 0, 7, 50}, false)
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 5), mfp[:30]...), []byte{12, 0x80 | 8, 30}, false)
	if b, err := os.ReadFile(sampleVDIF); err == nil {
		if fr, err := vdif.DecodeFrame(b); err == nil {
			vtp := vdif.AppendVTP(nil, 9, fr.Bytes)
			f.Add(vtp, []byte{100, 100, 100}, true)
		}
	}
	f.Fuzz(func(t *testing.T, stream, cuts []byte, vtp bool) {
		cfg := Options{ReorderWindow: 4, LatencyBudget: time.Millisecond, MaxDatagram: 256}.withDefaults()
		in := &Input{cfg: cfg, decode: DecodeMFPDatagram}
		if vtp {
			in.decode = DecodeVTPDatagram
		}
		in.pool.Held = &in.c
		sink := transporttest.NewCheckSink(0)
		r := udpReceiver{in: in, ctx: context.Background(), sink: sink, streams: map[netip.AddrPort]*seqWindow{}}
		senders := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2")}
		from := 0
		now := time.Unix(1e9, 0)
		var datagrams, markers, repeated uint64
		send := func(d []byte) {
			b := in.pool.Get(udpHeadroom + int(cfg.MaxDatagram))
			n := copy(b.B[udpHeadroom:], d)
			datagrams++
			if n == seqSize {
				if w := r.streams[senders[from]]; w != nil && w.ended {
					repeated++
				} else {
					markers++
				}
			}
			if _, err := r.datagram(b, n, senders[from], now); err != nil {
				t.Fatal(err)
			}
		}
		rest := stream
		for _, c := range cuts[:min(len(cuts), 64)] {
			if c&0x80 != 0 {
				now = now.Add(2 * cfg.LatencyBudget)
				if err := r.expire(now); err != nil {
					t.Fatal(err)
				}
				from = 1 - from
			}
			k := int(c & 0x7f)
			if k == 0 {
				k = seqSize
			}
			k = min(k, len(rest))
			send(rest[:k])
			rest = rest[k:]
		}
		for len(rest) > 0 {
			k := min(len(rest), int(cfg.MaxDatagram))
			send(rest[:k])
			rest = rest[k:]
		}
		now = now.Add(time.Hour)
		if err := r.expire(now); err != nil {
			t.Fatal(err)
		}
		st := in.c.Snapshot()
		d := st.Discarded
		// A sender's second end marker carries nothing and counts nowhere.
		accounted := st.Packets + d[transport.Truncated] + d[transport.Malformed] + d[transport.Late] + d[transport.Duplicate] + markers + repeated
		if accounted != datagrams {
			t.Fatalf("%d datagrams accounted (%d packets, discarded %v, %d end markers, %d repeated) of %d received",
				accounted, st.Packets, d, markers, repeated, datagrams)
		}
		for a, w := range r.streams {
			if w.held != 0 {
				t.Fatalf("sender %s: %d datagrams still held after its budget ran out", a, w.held)
			}
		}
		if st.HeldBytes != 0 {
			t.Fatalf("%d bytes held after the sink released everything", st.HeldBytes)
		}
		if c := sink.Counts(); c.Packets != int(st.Packets) {
			t.Fatalf("sink saw %d packets, input counted %d", c.Packets, st.Packets)
		}
	})
}
