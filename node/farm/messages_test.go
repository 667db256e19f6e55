package farm

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func sampleHello() Hello {
	return Hello{Farm: "f1", Token: "secret", Node: "node-a", Address: "tcp://10.0.0.1:7000",
		Roles: RoleRU | RoleBU | RoleEM, Incarnation: 0x694d8a1b2c3d, Sources: []uint32{0, 1, 2, 7, 100, 101}}
}

func sampleAssign() Assign {
	return Assign{Epoch: 42, ID: 1001, Supersedes: 999, Incarnation: 77, BU: "bu-3",
		Unit: Unit{Run: 300, Resync: 2, Kind: UnitEvents, Ranges: []Range{{First: 10, N: 5}, {First: 20, N: 1}, {First: math.MaxUint64 - 3, N: 4}}}}
}

func sampleInventory() Inventory {
	a := sampleAssign()
	return Inventory{Epoch: 50, Incarnation: 77, Node: "bu-3", Entries: []InventoryEntry{
		{ID: a.ID, Supersedes: a.Supersedes, Epoch: a.Epoch, Incarnation: 77, BU: "bu-3", Reached: OutcomeReceived, Unit: a.Unit},
		{ID: 2000, Epoch: 49, Incarnation: 5, BU: "x", Unit: Unit{Run: 300, Kind: UnitPackets, Ranges: []Range{{First: 7, N: 1}}}},
	}}
}

func sampleRelease() Release {
	return Release{Incarnation: 9, BU: "bu-1", Entries: []ReleaseEntry{
		{Assignment: 5, Outcome: OutcomeDecided, Events: 100, Bytes: 1 << 20},
		{Assignment: 6, Outcome: OutcomeReturned},
	}}
}

// sampleReleaseUnbuilt has an entry naming ids no event was built for.
func sampleReleaseUnbuilt() Release {
	return Release{Incarnation: 9, BU: "bu-1", Entries: []ReleaseEntry{
		{Assignment: 7, Outcome: OutcomeDecided, Events: 8, Bytes: 800, Unbuilt: []Range{{First: 3, N: 1}, {First: 9, N: 2}}},
	}}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enc    func() ([]byte, error)
		dec    func([]byte) (any, error)
		want   any
		kind   Kind
		fixLen int // fixed size, 0 when variable
	}{
		{"hello", func() ([]byte, error) { return AppendHello(nil, sampleHello()) },
			func(b []byte) (any, error) { return DecodeHello(b) }, sampleHello(), KindHello, 0},
		{"hello-empty", func() ([]byte, error) { return AppendHello(nil, Hello{Node: "n"}) },
			func(b []byte) (any, error) { return DecodeHello(b) }, Hello{Node: "n"}, KindHello, 28 + 5},
		{"bye", func() ([]byte, error) { return AppendBye(nil, Bye{Farm: "f", Token: "t", Node: "n", Incarnation: 3}) },
			func(b []byte) (any, error) { return DecodeBye(b) }, Bye{Farm: "f", Token: "t", Node: "n", Incarnation: 3}, KindBye, 0},
		{"heartbeat", func() ([]byte, error) {
			return AppendHeartbeat(nil, Heartbeat{Incarnation: 1, Seq: 2, UnixNano: -3}), nil
		}, func(b []byte) (any, error) { return DecodeHeartbeat(b) }, Heartbeat{Incarnation: 1, Seq: 2, UnixNano: -3}, KindHeartbeat, 36},
		{"credit", func() ([]byte, error) {
			return AppendCredit(nil, Credit{Epoch: 4, Incarnation: 5, BU: "b", Events: 6, Bytes: 7})
		}, func(b []byte) (any, error) { return DecodeCredit(b) }, Credit{Epoch: 4, Incarnation: 5, BU: "b", Events: 6, Bytes: 7}, KindCredit, 42},
		{"assign", func() ([]byte, error) { return AppendAssign(nil, sampleAssign()) },
			func(b []byte) (any, error) { return DecodeAssign(b) }, sampleAssign(), KindAssign, 64 + 5 + 36},
		{"request", func() ([]byte, error) { return AppendRequest(nil, Request(sampleAssign())) },
			func(b []byte) (any, error) { return DecodeRequest(b) }, Request(sampleAssign()), KindRequest, 64 + 5 + 36},
		{"data", func() ([]byte, error) {
			return AppendData(nil, DataHeader{Assignment: 8, Incarnation: 9, PayloadBytes: 1 << 33, Group: GroupMixed, Packets: 3, Flags: DataFinal | DataMissing})
		}, func(b []byte) (any, error) { return DecodeData(b) },
			DataHeader{Assignment: 8, Incarnation: 9, PayloadBytes: 1 << 33, Group: GroupMixed, Packets: 3, Flags: DataFinal | DataMissing}, KindData, 48},
		{"announce", func() ([]byte, error) { return AppendAnnounce(nil, Announce{Unit: sampleAssign().Unit}) },
			func(b []byte) (any, error) { return DecodeAnnounce(b) }, Announce{Unit: sampleAssign().Unit}, KindAnnounce, 32 + 36},
		{"inventory", func() ([]byte, error) { return AppendInventory(nil, sampleInventory()) },
			func(b []byte) (any, error) { return DecodeInventory(b) }, sampleInventory(), KindInventory, 32 + 5 + 2*56 + 5 + 2 + 4*12},
		{"inventory-empty", func() ([]byte, error) { return AppendInventory(nil, Inventory{Epoch: 1, Incarnation: 2, Node: "ru"}) },
			func(b []byte) (any, error) { return DecodeInventory(b) }, Inventory{Epoch: 1, Incarnation: 2, Node: "ru"}, KindInventory, 35},
		{"duplicate", func() ([]byte, error) { return AppendDuplicate(nil, sampleDuplicate()) },
			func(b []byte) (any, error) { return DecodeDuplicate(b) }, sampleDuplicate(), KindDuplicate, 48 + 5 + 36},
		{"end", func() ([]byte, error) { return AppendEnd(nil, sampleEnd()) },
			func(b []byte) (any, error) { return DecodeEnd(b) }, sampleEnd(), KindEnd, 28 + 3*16},
		{"end-empty", func() ([]byte, error) { return AppendEnd(nil, End{Key: UnitKey{Run: 3, Kind: UnitPackets}}) },
			func(b []byte) (any, error) { return DecodeEnd(b) }, End{Key: UnitKey{Run: 3, Kind: UnitPackets}}, KindEnd, 28},
		{"release", func() ([]byte, error) { return AppendRelease(nil, sampleRelease()) },
			func(b []byte) (any, error) { return DecodeRelease(b) }, sampleRelease(), KindRelease, 24 + 5 + 48},
		{"release-unbuilt", func() ([]byte, error) { return AppendRelease(nil, sampleReleaseUnbuilt()) },
			func(b []byte) (any, error) { return DecodeRelease(b) }, sampleReleaseUnbuilt(), KindRelease, 24 + 5 + 24 + 4 + 2*12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := seed(tc.enc())
			if tc.fixLen != 0 && len(b) != tc.fixLen {
				t.Errorf("encoded %d bytes, want %d", len(b), tc.fixLen)
			}
			k, n, err := Peek(b)
			if err != nil || k != tc.kind || n != len(b) {
				t.Fatalf("Peek = %v, %d, %v; want %v, %d", k, n, err, tc.kind, len(b))
			}
			got, err := tc.dec(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAppendToPrefix(t *testing.T) {
	b := seed(AppendAssign([]byte("xyz"), sampleAssign()))
	if string(b[:3]) != "xyz" {
		t.Fatal("prefix overwritten")
	}
	a, err := DecodeAssign(b[3:])
	if err != nil || !reflect.DeepEqual(a, sampleAssign()) {
		t.Fatalf("decoded %+v, %v", a, err)
	}
}

// TestHelloSourceRanges pins the range encoding of the source list: 6 ids
// in 3 ranges.
func TestHelloSourceRanges(t *testing.T) {
	b := seed(AppendHello(nil, sampleHello()))
	if n := le.Uint32(b[24:]); n != 3 {
		t.Fatalf("n_ranges %d, want 3 ([0,2] [7,7] [100,101])", n)
	}
	tail := b[len(b)-24:]
	want := []uint32{0, 2, 7, 7, 100, 101}
	for i, w := range want {
		if g := le.Uint32(tail[4*i:]); g != w {
			t.Fatalf("range word %d = %d, want %d", i, g, w)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	assign := seed(AppendAssign(nil, sampleAssign()))
	mod := func(b []byte, f func(b []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"short", assign[:5], schemas.ErrTruncated, 0},
		{"magic", mod(assign, func(b []byte) { b[0] = 'X' }), schemas.ErrBadMagic, 0},
		{"version", mod(assign, func(b []byte) { b[4] = 2 }), schemas.ErrBadVersion, 4},
		{"kind", mod(assign, func(b []byte) { b[5] = byte(KindCredit) }), schemas.ErrBadHeader, 5},
		{"reserved", mod(assign, func(b []byte) { b[7] = 1 }), schemas.ErrBadHeader, 7},
		{"size-big", mod(assign, func(b []byte) { le.PutUint32(b[8:], uint32(len(b)+1)) }), schemas.ErrTruncated, 8},
		{"size-small", mod(assign, func(b []byte) { le.PutUint32(b[8:], uint32(len(b)-1)) }), schemas.ErrInconsistent, 8},
		{"cut", mod(assign[:70], func(b []byte) { le.PutUint32(b[8:], 70) }), schemas.ErrSizeOverflow, 60},
		{"id0", mod(assign, func(b []byte) { le.PutUint64(b[20:], 0) }), schemas.ErrBadHeader, 20},
		{"unit", mod(assign, func(b []byte) { b[52] = 9 }), schemas.ErrBadHeader, 52},
		{"unit-reserved", mod(assign, func(b []byte) { b[54] = 1 }), schemas.ErrBadHeader, 54},
		{"count", mod(assign, func(b []byte) { le.PutUint32(b[56:], 11) }), schemas.ErrInconsistent, 56},
		{"no-ranges", mod(assign, func(b []byte) { le.PutUint32(b[60:], 0) }), schemas.ErrBadHeader, 60},
		{"empty-bu", mod(assign, func(b []byte) { b[64] = 0 }), schemas.ErrBadHeader, 64},
		// Ranges start at 64+5 = 69; range 1 at 81, its n at 89.
		{"empty-range", mod(assign, func(b []byte) { le.PutUint32(b[89:], 0) }), schemas.ErrBadHeader, 89},
		{"overlap", mod(assign, func(b []byte) { le.PutUint64(b[81:], 14) }), schemas.ErrInconsistent, 81},
		{"adjacent", mod(assign, func(b []byte) { le.PutUint64(b[81:], 15) }), schemas.ErrInconsistent, 81},
		{"wrap", mod(assign, func(b []byte) { le.PutUint64(b[93:], math.MaxUint64-2) }), schemas.ErrSizeOverflow, 93},
		{"trailing", append(bytes.Clone(assign[:len(assign):len(assign)]), 0), schemas.ErrInconsistent, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			if tc.name == "trailing" {
				le.PutUint32(b[8:], uint32(len(b)))
			}
			_, err := DecodeAssign(b)
			decodetest.Want(t, err, tc.sentinel, tc.off)
		})
	}

	hello := seed(AppendHello(nil, sampleHello()))
	t.Run("hello-roles", func(t *testing.T) {
		_, err := DecodeHello(mod(hello, func(b []byte) { b[20] = 0x80 }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 20)
	})
	t.Run("hello-ranges-count", func(t *testing.T) {
		_, err := DecodeHello(mod(hello, func(b []byte) { le.PutUint32(b[24:], 1000) }))
		decodetest.Want(t, err, schemas.ErrSizeOverflow, 24)
	})
	t.Run("hello-range-order", func(t *testing.T) {
		// Last range (100,101) becomes (3,4): before the previous range's end.
		_, err := DecodeHello(mod(hello, func(b []byte) { le.PutUint32(b[len(b)-8:], 3); le.PutUint32(b[len(b)-4:], 4) }))
		decodetest.Want(t, err, schemas.ErrInconsistent, int64(len(hello)-8))
	})
	t.Run("hello-range-reversed", func(t *testing.T) {
		_, err := DecodeHello(mod(hello, func(b []byte) { le.PutUint32(b[len(b)-4:], 99) }))
		decodetest.Want(t, err, schemas.ErrInconsistent, int64(len(hello)-8))
	})
	t.Run("hello-too-many-sources", func(t *testing.T) {
		_, err := DecodeHello(mod(hello, func(b []byte) { le.PutUint32(b[len(b)-4:], 1<<21) }))
		decodetest.Want(t, err, schemas.ErrSizeOverflow, int64(len(hello)-8))
	})
	rel := seed(AppendRelease(nil, sampleRelease()))
	t.Run("release-outcome", func(t *testing.T) {
		// Entries start at 24+5 = 29; entry 1's outcome at 29+24+8.
		_, err := DecodeRelease(mod(rel, func(b []byte) { b[61] = 5 }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 61)
	})
	t.Run("release-none", func(t *testing.T) {
		_, err := DecodeRelease(mod(rel, func(b []byte) { le.PutUint32(b[20:], 0) }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 20)
	})
	t.Run("release-too-many", func(t *testing.T) {
		_, err := DecodeRelease(mod(rel, func(b []byte) { le.PutUint32(b[20:], 3) }))
		decodetest.Want(t, err, schemas.ErrSizeOverflow, 20)
	})
	un := seed(AppendRelease(nil, sampleReleaseUnbuilt()))
	t.Run("release-flags", func(t *testing.T) {
		// The entry at 29: its flags at 29+9.
		_, err := DecodeRelease(mod(un, func(b []byte) { b[38] = 3 }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 38)
	})
	t.Run("release-unbuilt-none", func(t *testing.T) {
		_, err := DecodeRelease(mod(un, func(b []byte) { le.PutUint32(b[53:], 0) }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 53)
	})
	t.Run("release-unbuilt-too-many", func(t *testing.T) {
		_, err := DecodeRelease(mod(un, func(b []byte) { le.PutUint32(b[53:], 3) }))
		decodetest.Want(t, err, schemas.ErrSizeOverflow, 53)
	})
	t.Run("release-unbuilt-order", func(t *testing.T) {
		// The second range starts where the first one is.
		_, err := DecodeRelease(mod(un, func(b []byte) { le.PutUint64(b[69:], 3) }))
		decodetest.Want(t, err, schemas.ErrInconsistent, 69)
	})
	t.Run("release-unbuilt-empty", func(t *testing.T) {
		_, err := DecodeRelease(mod(un, func(b []byte) { le.PutUint32(b[65:], 0) }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 65)
	})
	data := seed(AppendData(nil, DataHeader{Assignment: 1}))
	t.Run("data-flags", func(t *testing.T) {
		_, err := DecodeData(mod(data, func(b []byte) { b[44] = 4 }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 44)
	})
	t.Run("peek-kind", func(t *testing.T) {
		_, _, err := Peek(mod(data, func(b []byte) { b[5] = 0 }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 5)
	})
	t.Run("peek-size", func(t *testing.T) {
		_, _, err := Peek(mod(data, func(b []byte) { le.PutUint32(b[8:], 11) }))
		decodetest.Want(t, err, schemas.ErrBadHeader, 8)
	})
}

func TestEncodeErrors(t *testing.T) {
	long := string(make([]byte, 256))
	a := sampleAssign()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"hello-node-empty", second(AppendHello(nil, Hello{}))},
		{"hello-token-long", second(AppendHello(nil, Hello{Node: "n", Token: long}))},
		{"hello-roles", second(AppendHello(nil, Hello{Node: "n", Roles: 8}))},
		{"hello-unsorted", second(AppendHello(nil, Hello{Node: "n", Sources: []uint32{2, 1}}))},
		{"bye-node", second(AppendBye(nil, Bye{}))},
		{"credit-bu", second(AppendCredit(nil, Credit{}))},
		{"assign-id0", second(AppendAssign(nil, func() Assign { x := a; x.ID = 0; return x }()))},
		{"assign-kind", second(AppendAssign(nil, func() Assign { x := a; x.Unit.Kind = 0; return x }()))},
		{"assign-no-range", second(AppendAssign(nil, func() Assign { x := a; x.Unit.Ranges = nil; return x }()))},
		{"assign-adjacent", second(AppendAssign(nil, func() Assign {
			x := a
			x.Unit.Ranges = []Range{{1, 2}, {3, 1}}
			return x
		}()))},
		{"assign-wrap", second(AppendAssign(nil, func() Assign {
			x := a
			x.Unit.Ranges = []Range{{math.MaxUint64, 2}}
			return x
		}()))},
		{"data-flags", second(AppendData(nil, DataHeader{Flags: 8}))},
		{"release-empty", second(AppendRelease(nil, Release{BU: "b"}))},
		{"release-outcome", second(AppendRelease(nil, Release{BU: "b", Entries: []ReleaseEntry{{Assignment: 1}}}))},
		{"announce-empty", second(AppendAnnounce(nil, Announce{Unit: Unit{Kind: UnitEvents}}))},
		{"end-kind", second(AppendEnd(nil, End{Key: UnitKey{Kind: 9}}))},
		{"end-touching", second(AppendEnd(nil, End{Key: key1, Named: []Span{{5, 5}, {6, 9}}}))},
		{"end-backwards", second(AppendEnd(nil, End{Key: key1, Named: []Span{{5, 4}}}))},
		{"end-after-max", second(AppendEnd(nil, End{Key: key1, Named: []Span{{5, ^uint64(0)}, {1, 2}}}))},
		{"duplicate-no-bu", second(AppendDuplicate(nil, Duplicate{Unit: sampleAssign().Unit}))},
		{"duplicate-empty", second(AppendDuplicate(nil, Duplicate{BU: "b", Unit: Unit{Kind: UnitEvents}}))},
	} {
		if !errors.Is(tc.err, ErrEncode) {
			t.Errorf("%s: error %v, want ErrEncode", tc.name, tc.err)
		}
	}
}

func second(_ []byte, err error) error { return err }

func TestRolesString(t *testing.T) {
	if s := (RoleRU | RoleEM).String(); s != "ru,em" {
		t.Fatalf("%q", s)
	}
}

// roundTrip is every decoder's fuzz property: no panic; an error is a
// DecodeError within the input; a decoded message encodes to the same
// bytes (the encoding is canonical).
func roundTrip[T any](dec func([]byte) (T, error), enc func(T) ([]byte, error)) func(*testing.T, []byte) {
	return func(t *testing.T, b []byte) {
		m, err := dec(b)
		decodetest.Check(t, err, len(b))
		if err != nil {
			return
		}
		again, err := enc(m)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded bytes differ:\n in  %x\n out %x", b, again)
		}
	}
}

// codecs is the round trip of every message kind.
var codecs = map[Kind]func(*testing.T, []byte){
	KindHello:     roundTrip(DecodeHello, func(h Hello) ([]byte, error) { return AppendHello(nil, h) }),
	KindBye:       roundTrip(DecodeBye, func(y Bye) ([]byte, error) { return AppendBye(nil, y) }),
	KindHeartbeat: roundTrip(DecodeHeartbeat, func(h Heartbeat) ([]byte, error) { return AppendHeartbeat(nil, h), nil }),
	KindCredit:    roundTrip(DecodeCredit, func(c Credit) ([]byte, error) { return AppendCredit(nil, c) }),
	KindAssign:    roundTrip(DecodeAssign, func(a Assign) ([]byte, error) { return AppendAssign(nil, a) }),
	KindRequest:   roundTrip(DecodeRequest, func(q Request) ([]byte, error) { return AppendRequest(nil, q) }),
	KindData:      roundTrip(DecodeData, func(d DataHeader) ([]byte, error) { return AppendData(nil, d) }),
	KindRelease:   roundTrip(DecodeRelease, func(r Release) ([]byte, error) { return AppendRelease(nil, r) }),
	KindAnnounce:  roundTrip(DecodeAnnounce, func(a Announce) ([]byte, error) { return AppendAnnounce(nil, a) }),
	KindInventory: roundTrip(DecodeInventory, func(inv Inventory) ([]byte, error) { return AppendInventory(nil, inv) }),
	KindDuplicate: roundTrip(DecodeDuplicate, func(d Duplicate) ([]byte, error) { return AppendDuplicate(nil, d) }),
	KindEnd:       roundTrip(DecodeEnd, func(e End) ([]byte, error) { return AppendEnd(nil, e) }),
}

// fuzzSeeds is the seed corpus of every message kind.
func fuzzSeeds() map[Kind][][]byte {
	return map[Kind][][]byte{
		KindHello:     {seed(AppendHello(nil, sampleHello())), seed(AppendHello(nil, Hello{Node: "x"}))},
		KindBye:       {seed(AppendBye(nil, Bye{Farm: "f", Token: "t", Node: "n", Incarnation: 1}))},
		KindHeartbeat: {AppendHeartbeat(nil, Heartbeat{1, 2, 3})},
		KindCredit:    {seed(AppendCredit(nil, Credit{Epoch: 1, Incarnation: 2, BU: "b", Events: 3, Bytes: 4}))},
		KindAssign:    {seed(AppendAssign(nil, sampleAssign()))},
		KindRequest:   {seed(AppendRequest(nil, Request(sampleAssign())))},
		KindData:      {seed(AppendData(nil, DataHeader{Assignment: 1, Incarnation: 2, PayloadBytes: 3, Group: 4, Packets: 5, Flags: DataFinal}))},
		KindRelease:   {seed(AppendRelease(nil, sampleRelease())), seed(AppendRelease(nil, sampleReleaseUnbuilt()))},
		KindAnnounce:  {seed(AppendAnnounce(nil, Announce{Unit: sampleAssign().Unit}))},
		KindInventory: {seed(AppendInventory(nil, sampleInventory()))},
		KindDuplicate: {seed(AppendDuplicate(nil, sampleDuplicate()))},
		KindEnd:       {seed(AppendEnd(nil, sampleEnd())), seed(AppendEnd(nil, End{Key: key1}))},
	}
}

// fuzzKind fuzzes the decoder of one message kind alone.
func fuzzKind(f *testing.F, k Kind) {
	for _, s := range fuzzSeeds()[k] {
		f.Add(s)
	}
	f.Fuzz(codecs[k])
}

func seed(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzDecodeHello(f *testing.F)     { fuzzKind(f, KindHello) }
func FuzzDecodeBye(f *testing.F)       { fuzzKind(f, KindBye) }
func FuzzDecodeHeartbeat(f *testing.F) { fuzzKind(f, KindHeartbeat) }
func FuzzDecodeCredit(f *testing.F)    { fuzzKind(f, KindCredit) }
func FuzzDecodeAssign(f *testing.F)    { fuzzKind(f, KindAssign) }
func FuzzDecodeRequest(f *testing.F)   { fuzzKind(f, KindRequest) }
func FuzzDecodeData(f *testing.F)      { fuzzKind(f, KindData) }
func FuzzDecodeRelease(f *testing.F)   { fuzzKind(f, KindRelease) }
func FuzzDecodeAnnounce(f *testing.F)  { fuzzKind(f, KindAnnounce) }
func FuzzDecodeInventory(f *testing.F) { fuzzKind(f, KindInventory) }
func FuzzDecodeDuplicate(f *testing.F) { fuzzKind(f, KindDuplicate) }
func FuzzDecodeEnd(f *testing.F)       { fuzzKind(f, KindEnd) }

// FuzzMessage is what the network faces: a farm message of any kind as a
// peer sends it. The kind is read from the header (Peek), that kind's
// decoder decodes the message, and a decoded message re-encodes to the same
// bytes. It is the network-facing farm target of `make fuzz-long`; the
// per-kind targets above run in the shorter class.
func FuzzMessage(f *testing.F) {
	seeds := fuzzSeeds()
	for k := KindHello; k <= kindLast; k++ {
		if codecs[k] == nil {
			f.Fatalf("kind %v has no round trip", k)
		}
		for _, s := range seeds[k] {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, _, err := Peek(b)
		decodetest.Check(t, err, len(b))
		if err != nil {
			return
		}
		codecs[k](t, b)
	})
}

func sampleEnd() End {
	return End{Key: UnitKey{Run: 300, Resync: 2, Kind: UnitEvents}, Named: []Span{{0, 1 << 40}, {1<<40 + 2, 1<<40 + 2}, {1 << 63, ^uint64(0)}}}
}

func sampleDuplicate() Duplicate {
	return Duplicate{Incarnation: 12, Dead: 11, BU: "bu-3", Unit: sampleAssign().Unit}
}

func FuzzPeek(f *testing.F) {
	f.Add(seed(AppendRelease(nil, sampleRelease())))
	f.Add(AppendHeartbeat(nil, Heartbeat{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, n, err := Peek(b)
		decodetest.Check(t, err, len(b))
		if err == nil && (k < KindHello || k > kindLast || n < HeaderSize) {
			t.Fatalf("Peek accepted kind %d size %d", k, n)
		}
	})
}
