package wire

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

var lim = Limits{MaxControl: 64 << 10, MaxHeader: 4 << 10, MaxData: 64 << 20}

func TestHelloRoundTrip(t *testing.T) {
	h := Hello{Version: Version, MaxData: 1 << 26, ControlWindow: 256, Farm: "farm-a", Node: "node-7", Addr: "10.0.0.7:7000"}
	for i := range h.Nonce {
		h.Nonce[i] = byte(i * 7)
	}
	for _, withMAC := range []bool{false, true} {
		hh := h
		if withMAC {
			hh.MAC = MAC("secret", RoleAcceptor, h.Nonce, [NonceSize]byte{1}, "a", "b")
		}
		b := AppendHello(nil, &hh)
		got, err := DecodeHello(b, withMAC)
		if err != nil {
			t.Fatal(err)
		}
		if got.Farm != hh.Farm || got.Node != hh.Node || got.Addr != hh.Addr || got.Nonce != hh.Nonce ||
			got.MaxData != hh.MaxData || got.ControlWindow != hh.ControlWindow || !bytes.Equal(got.MAC, hh.MAC) {
			t.Fatalf("round trip: got %+v, want %+v", got, hh)
		}
		// Every cut fails with an error inside the input.
		for n := 0; n < len(b); n++ {
			if _, err := DecodeHello(b[:n], withMAC); err == nil {
				t.Fatalf("hello cut to %d of %d bytes decoded", n, len(b))
			} else {
				decodetest.Check(t, err, n)
			}
		}
	}
}

func TestHelloErrors(t *testing.T) {
	good := AppendHello(nil, &Hello{Version: Version, MaxData: 10, ControlWindow: 1, Node: "n"})
	other := bytes.Clone(good)
	other[0] = Version + 1
	_, err := DecodeHello(other, false)
	decodetest.Want(t, err, schemas.ErrBadVersion, 0)
	flags := bytes.Clone(good)
	flags[2] = 1
	_, err = DecodeHello(flags, false)
	decodetest.Want(t, err, schemas.ErrBadHeader, 2)
	_, err = DecodeHello(append(bytes.Clone(good), 0), false)
	decodetest.Want(t, err, schemas.ErrInconsistent, int64(len(good)))
	noNode := AppendHello(nil, &Hello{Version: Version, MaxData: 10, ControlWindow: 1})
	_, err = DecodeHello(noNode, false)
	decodetest.Want(t, err, schemas.ErrBadHeader, 29)
	zero := AppendHello(nil, &Hello{Version: Version, ControlWindow: 1, Node: "n"})
	_, err = DecodeHello(zero, false)
	decodetest.Want(t, err, schemas.ErrBadHeader, 4)
}

func TestParseHeader(t *testing.T) {
	ok := []Header{
		{Kind: KindControl, Type: 9, Length: 64 << 10},
		{Kind: KindCredit, Length: 4},
		{Kind: KindHeartbeat},
		{Kind: KindBye, Length: CountSize},
		{Kind: KindByeAck, Length: CountSize},
		{Kind: KindData, Type: 4 << 10, Length: 64 << 20},
		{Kind: KindJoin, Length: CookieSize},
		{Kind: KindProof, Length: MACSize},
	}
	for _, h := range ok {
		got, err := ParseHeader(AppendHeader(nil, h), lim)
		if err != nil || got != h {
			t.Fatalf("%+v: got %+v, %v", h, got, err)
		}
	}
	bad := []struct {
		h        Header
		sentinel error
		off      int64
	}{
		{Header{Kind: 99}, schemas.ErrUnsupported, 0},
		{Header{Kind: KindBye, Flags: 1}, schemas.ErrBadHeader, 1},
		{Header{Kind: KindBye, Type: 1}, schemas.ErrBadHeader, 2},
		{Header{Kind: KindBye, Length: 9}, schemas.ErrSizeOverflow, 4},
		{Header{Kind: KindBye, Length: 0}, schemas.ErrInconsistent, 4},
		{Header{Kind: KindByeAck, Length: 4}, schemas.ErrInconsistent, 4},
		{Header{Kind: KindControl, Length: 64<<10 + 1}, schemas.ErrSizeOverflow, 4},
		{Header{Kind: KindCredit, Length: 3}, schemas.ErrInconsistent, 4},
		{Header{Kind: KindData, Type: 4<<10 + 1}, schemas.ErrSizeOverflow, 2},
		{Header{Kind: KindData, Length: 64<<20 + 1}, schemas.ErrSizeOverflow, 4},
	}
	for _, c := range bad {
		_, err := ParseHeader(AppendHeader(nil, c.h), lim)
		decodetest.Want(t, err, c.sentinel, c.off)
	}
	_, err := ParseHeader([]byte{16, 0, 0}, lim)
	decodetest.Want(t, err, schemas.ErrTruncated, 3)
}

func TestParseFrame(t *testing.T) {
	f := AppendFrame(nil, KindControl, 7, []byte("hello"))
	h, body, err := ParseFrame(f, lim)
	if err != nil || h.Type != 7 || string(body) != "hello" {
		t.Fatalf("got %+v %q %v", h, body, err)
	}
	_, _, err = ParseFrame(f[:len(f)-1], lim)
	decodetest.Want(t, err, schemas.ErrTruncated, int64(len(f)-1))
	_, _, err = ParseFrame(append(f, 0), lim)
	decodetest.Want(t, err, schemas.ErrInconsistent, int64(len(f)))
	_, _, err = ParseFrame(AppendHeader(nil, Header{Kind: KindData}), lim)
	decodetest.Want(t, err, schemas.ErrInconsistent, 0)
	c := AppendCredit(nil, 12345)
	h, body, err = ParseFrame(c, lim)
	if err != nil || h.Kind != KindCredit || Credit(body) != 12345 {
		t.Fatalf("credit: %+v %v", h, err)
	}
}

func TestRefuse(t *testing.T) {
	for code, name := range RefuseReasons {
		if name == "" {
			continue
		}
		if RefuseCode(name) != uint8(code) {
			t.Fatalf("RefuseCode(%q) = %d, want %d", name, RefuseCode(name), code)
		}
		f := AppendRefuse(nil, uint8(code), "because")
		h, body, err := ParseFrame(f, lim)
		if err != nil || h.Kind != KindRefuse {
			t.Fatal(h, err)
		}
		r, text, err := DecodeRefuse(body)
		if err != nil || r != name || text != "because" {
			t.Fatalf("got %q %q %v", r, text, err)
		}
	}
	if r, _, _ := DecodeRefuse([]byte{200}); r != "unknown" {
		t.Fatalf("code 200: %q", r)
	}
	_, _, err := DecodeRefuse(nil)
	decodetest.Want(t, err, schemas.ErrTruncated, 0)
	long := AppendRefuse(nil, 1, string(make([]byte, 5000)))
	if _, _, err := ParseFrame(long, lim); err != nil {
		t.Fatalf("a long refuse text is cut to fit: %v", err)
	}
}

func TestMACBindsEverything(t *testing.T) {
	n1, n2 := [NonceSize]byte{1}, [NonceSize]byte{2}
	base := MAC("t", RoleAcceptor, n1, n2, "a", "b")
	for _, other := range [][]byte{
		MAC("u", RoleAcceptor, n1, n2, "a", "b"),
		MAC("t", RoleConnector, n1, n2, "a", "b"),
		MAC("t", RoleAcceptor, n2, n1, "a", "b"),
		MAC("t", RoleAcceptor, n1, n2, "ab", ""),
	} {
		if bytes.Equal(base, other) {
			t.Fatal("MAC does not depend on all its inputs")
		}
	}
}

func TestNextFrame(t *testing.T) {
	seq := AppendFrame(nil, KindControl, 3, []byte("abc"))
	seq = AppendCredit(seq, 4)
	h, body, rest, err := NextFrame(seq, lim)
	if err != nil || h.Kind != KindControl || string(body) != "abc" {
		t.Fatal(h, body, err)
	}
	h, body, rest, err = NextFrame(rest, lim)
	if err != nil || h.Kind != KindCredit || Credit(body) != 4 || len(rest) != 0 {
		t.Fatal(h, err, len(rest))
	}
	_, _, _, err = NextFrame(seq[:len(seq)-1], lim)
	if err != nil {
		t.Fatalf("first frame of a cut sequence: %v", err)
	}
	_, _, _, err = NextFrame(seq[11:len(seq)-1], lim)
	decodetest.Want(t, err, schemas.ErrTruncated, 11)
}
