package wire

import (
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
)

func FuzzParseFrame(f *testing.F) {
	f.Add(AppendFrame(nil, KindControl, 3, []byte("abc")))
	f.Add(AppendCredit(nil, 9))
	f.Add(AppendRefuse(nil, 2, "token"))
	f.Add(AppendHeader(nil, Header{Kind: KindData, Type: 4, Length: 100}))
	f.Add(AppendCount(nil, KindBye, 1<<40+7))
	f.Add(AppendFrame(nil, KindHello, 0, AppendHello(nil, &Hello{Version: Version, MaxData: 1, ControlWindow: 1, Node: "n"})))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := ParseFrame(b, lim)
		decodetest.Check(t, err, len(b))
		if err != nil {
			return
		}
		if len(body) != int(h.Length) {
			t.Fatalf("body %d bytes, header says %d", len(body), h.Length)
		}
		switch h.Kind {
		case KindHello:
			_, err = DecodeHello(body, false)
		case KindHelloReply:
			_, err = DecodeHello(body, true)
		case KindRefuse:
			_, _, err = DecodeRefuse(body)
		case KindCredit:
			Credit(body)
		case KindBye, KindByeAck:
			if n := Count(body); string(AppendCount(nil, h.Kind, n)[HeaderSize:]) != string(body) {
				t.Fatalf("count %d re-encoded differently from %x", n, body)
			}
		}
		decodetest.Check(t, err, len(body))
	})
}

func FuzzParseHeader(f *testing.F) {
	f.Add(AppendHeader(nil, Header{Kind: KindData, Type: 10, Length: 1 << 20}))
	f.Add(AppendHeader(nil, Header{Kind: KindHeartbeat}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, lim)
		decodetest.Check(t, err, len(b))
		if err == nil {
			if got := AppendHeader(nil, h); string(got) != string(b[:HeaderSize]) {
				t.Fatalf("re-encoded %x, input %x", got, b[:HeaderSize])
			}
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	h := Hello{Version: Version, MaxData: 1 << 20, ControlWindow: 8, Farm: "f", Node: "n", Addr: "a:1"}
	f.Add(AppendHello(nil, &h), false)
	h.MAC = make([]byte, MACSize)
	f.Add(AppendHello(nil, &h), true)
	f.Fuzz(func(t *testing.T, b []byte, withMAC bool) {
		got, err := DecodeHello(b, withMAC)
		decodetest.Check(t, err, len(b))
		if err == nil {
			if re := AppendHello(nil, &got); string(re) != string(b) {
				t.Fatalf("re-encoded %x, input %x", re, b)
			}
		}
	})
}

func FuzzNextFrame(f *testing.F) {
	seq := AppendFrame(nil, KindControl, 3, []byte("abc"))
	seq = AppendCredit(seq, 4)
	seq = AppendFrame(seq, KindHeartbeat, 0, nil)
	f.Add(seq)
	f.Add(seq[:len(seq)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		rest := b
		for len(rest) > 0 {
			off := len(b) - len(rest)
			h, body, r, err := NextFrame(rest, lim)
			if err != nil {
				decodetest.Check(t, err, len(rest))
				return
			}
			if len(body) != int(h.Length) || len(r) >= len(rest) {
				t.Fatalf("frame at %d: body %d bytes (header %d), rest %d of %d", off, len(body), h.Length, len(r), len(rest))
			}
			rest = r
		}
	})
}
