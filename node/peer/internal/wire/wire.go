// Package wire encodes and decodes the frames of the peer protocol, version
// 2, whose byte tables are in package peer's doc. Decoders never panic: bad
// input gives a *schemas.DecodeError saying which field at which offset.
package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/schemas"
)

// Version is the peer protocol version this package speaks.
const Version = 2

// Frame kinds (peer's doc: "Frame kinds").
const (
	KindHello      uint8 = 1
	KindHelloReply uint8 = 2
	KindProof      uint8 = 3
	KindWelcome    uint8 = 4
	KindRefuse     uint8 = 5
	KindJoin       uint8 = 6
	KindControl    uint8 = 16
	KindCredit     uint8 = 17
	KindHeartbeat  uint8 = 18
	KindBye        uint8 = 19
	KindByeAck     uint8 = 20
	KindData       uint8 = 32
)

// Sizes.
const (
	HeaderSize = 8
	NonceSize  = 16
	MACSize    = sha256.Size
	CookieSize = 16
	// CountSize is the body of bye and bye_ack frames: a u64 count of
	// data messages.
	CountSize = 8
	// MaxHandshake bounds a handshake frame's body (hello: 28 fixed bytes,
	// three strings of up to 255 bytes each and a MAC; refuse: a reason).
	MaxHandshake = 1024
)

const format = "peer frame"

// Header is a frame's first 8 bytes.
type Header struct {
	Kind  uint8
	Flags uint8
	// Type: control: the message type; data: header length H.
	Type uint16
	// Length: control/handshake body bytes; data: payload bytes N.
	Length uint32
}

// AppendHeader appends h's 8 bytes to dst.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, h.Kind, h.Flags)
	dst = binary.LittleEndian.AppendUint16(dst, h.Type)
	return binary.LittleEndian.AppendUint32(dst, h.Length)
}

// PutHeader writes h into b[:8].
func PutHeader(b []byte, h Header) {
	b[0], b[1] = h.Kind, h.Flags
	binary.LittleEndian.PutUint16(b[2:], h.Type)
	binary.LittleEndian.PutUint32(b[4:], h.Length)
}

// AppendFrame appends a whole non-data frame (header and body) to dst.
func AppendFrame(dst []byte, kind uint8, typ uint16, body []byte) []byte {
	dst = AppendHeader(dst, Header{Kind: kind, Type: typ, Length: uint32(len(body))})
	return append(dst, body...)
}

// Limits say how large a frame's parts may be, per kind.
type Limits struct {
	MaxControl int // control body
	MaxHeader  int // data header H
	MaxData    int // data payload N
}

// ParseHeader decodes a frame header and checks it against lim: a known
// kind, flags 0, a type of 0 where the kind has none, and a length within
// the kind's limit. Errors are *schemas.DecodeError (offset within b).
func ParseHeader(b []byte, lim Limits) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, schemas.Errorf(format, "header", int64(len(b)), schemas.ErrTruncated, "%d of %d header bytes", len(b), HeaderSize)
	}
	h := Header{Kind: b[0], Flags: b[1], Type: binary.LittleEndian.Uint16(b[2:]), Length: binary.LittleEndian.Uint32(b[4:])}
	if h.Flags != 0 {
		return Header{}, schemas.Errorf(format, "flags", 1, schemas.ErrBadHeader, "flags 0x%02x, want 0", h.Flags)
	}
	var max int
	switch h.Kind {
	case KindHello, KindHelloReply, KindRefuse:
		max = MaxHandshake
	case KindProof:
		max = MACSize
	case KindWelcome, KindJoin:
		max = CookieSize
	case KindControl:
		max = lim.MaxControl
	case KindCredit:
		max = 4
	case KindHeartbeat:
		max = 0
	case KindBye, KindByeAck:
		max = CountSize
	case KindData:
		if int(h.Type) > lim.MaxHeader {
			return Header{}, schemas.Errorf(format, "type", 2, schemas.ErrSizeOverflow, "data header of %d bytes, limit %d", h.Type, lim.MaxHeader)
		}
		if uint64(h.Length) > uint64(lim.MaxData) {
			return Header{}, schemas.Errorf(format, "length", 4, schemas.ErrSizeOverflow, "data payload of %d bytes, limit %d", h.Length, lim.MaxData)
		}
		return h, nil
	default:
		return Header{}, schemas.Errorf(format, "kind", 0, schemas.ErrUnsupported, "unknown frame kind %d", h.Kind)
	}
	if h.Type != 0 && h.Kind != KindControl {
		return Header{}, schemas.Errorf(format, "type", 2, schemas.ErrBadHeader, "type %d in a frame of kind %d, want 0", h.Type, h.Kind)
	}
	if uint64(h.Length) > uint64(max) {
		return Header{}, schemas.Errorf(format, "length", 4, schemas.ErrSizeOverflow, "body of %d bytes in a frame of kind %d, limit %d", h.Length, h.Kind, max)
	}
	if (h.Kind == KindProof || h.Kind == KindWelcome || h.Kind == KindJoin || h.Kind == KindCredit || h.Kind == KindBye || h.Kind == KindByeAck) && int(h.Length) != max {
		return Header{}, schemas.Errorf(format, "length", 4, schemas.ErrInconsistent, "body of %d bytes in a frame of kind %d, want %d", h.Length, h.Kind, max)
	}
	return h, nil
}

// ParseFrame decodes one whole non-data frame that must fill b exactly
// (UCX: one control active message). It returns the header and the body (a
// sub-slice of b).
func ParseFrame(b []byte, lim Limits) (Header, []byte, error) {
	h, err := ParseHeader(b, lim)
	if err != nil {
		return Header{}, nil, err
	}
	if h.Kind == KindData {
		return Header{}, nil, schemas.Errorf(format, "kind", 0, schemas.ErrInconsistent, "a data frame where a control-path frame belongs")
	}
	if want := HeaderSize + int(h.Length); len(b) != want {
		sentinel := schemas.ErrTruncated
		if len(b) > want {
			sentinel = schemas.ErrInconsistent
		}
		return Header{}, nil, schemas.Errorf(format, "body", int64(min(len(b), want)), sentinel, "frame of %d bytes, header says %d", len(b), want)
	}
	return h, b[HeaderSize:], nil
}

// NextFrame decodes the first of a sequence of whole non-data frames in b
// (UCX: an active message may carry several) and returns it and what
// follows. Errors as ParseFrame's, offsets within b.
func NextFrame(b []byte, lim Limits) (h Header, body, rest []byte, err error) {
	h, err = ParseHeader(b, lim)
	if err != nil {
		return Header{}, nil, nil, err
	}
	if h.Kind == KindData {
		return Header{}, nil, nil, schemas.Errorf(format, "kind", 0, schemas.ErrInconsistent, "a data frame where a control-path frame belongs")
	}
	end := HeaderSize + int(h.Length)
	if len(b) < end {
		return Header{}, nil, nil, schemas.Errorf(format, "body", int64(len(b)), schemas.ErrTruncated, "frame of %d bytes, %d left", end, len(b))
	}
	return h, b[HeaderSize:end], b[end:], nil
}

// Credit decodes a credit body (4 bytes, checked by ParseHeader).
func Credit(body []byte) uint32 { return binary.LittleEndian.Uint32(body) }

// Count decodes a bye or bye_ack body (8 bytes, checked by ParseHeader):
// data messages sent (bye) or received (bye_ack) on the Conn.
func Count(body []byte) uint64 { return binary.LittleEndian.Uint64(body) }

// AppendCount appends a whole bye or bye_ack frame (kind) counting n data
// messages.
func AppendCount(dst []byte, kind uint8, n uint64) []byte {
	dst = AppendHeader(dst, Header{Kind: kind, Length: CountSize})
	return binary.LittleEndian.AppendUint64(dst, n)
}

// AppendCredit appends a whole credit frame for n messages.
func AppendCredit(dst []byte, n uint32) []byte {
	dst = AppendHeader(dst, Header{Kind: KindCredit, Length: 4})
	return binary.LittleEndian.AppendUint32(dst, n)
}

// Hello is the body of a hello or hello_reply frame.
type Hello struct {
	Version       uint16
	MaxData       uint32
	ControlWindow uint32
	Nonce         [NonceSize]byte
	Farm          string
	Node          string
	Addr          string
	// MAC: hello_reply only (the acceptor's proof).
	MAC []byte
}

// AppendHello appends h's body (and h.MAC when set) to dst. The strings
// must be at most 255 bytes (the caller's config checks guarantee it).
func AppendHello(dst []byte, h *Hello) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, h.Version)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, h.MaxData)
	dst = binary.LittleEndian.AppendUint32(dst, h.ControlWindow)
	dst = append(dst, h.Nonce[:]...)
	for _, s := range []string{h.Farm, h.Node, h.Addr} {
		dst = append(dst, byte(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, h.MAC...)
}

// DecodeHello decodes a hello body; withMAC says a 32-byte MAC follows
// (hello_reply). A version other than Version is reported as
// schemas.ErrBadVersion at offset 0 before anything else is read, so a
// peer of another version can be refused with the right reason.
func DecodeHello(b []byte, withMAC bool) (Hello, error) {
	const f = "peer hello"
	var h Hello
	if len(b) < 2 {
		return h, schemas.Errorf(f, "version", int64(len(b)), schemas.ErrTruncated, "%d bytes", len(b))
	}
	h.Version = binary.LittleEndian.Uint16(b)
	if h.Version != Version {
		return h, schemas.Errorf(f, "version", 0, schemas.ErrBadVersion, "version %d, this node speaks %d", h.Version, Version)
	}
	if len(b) < 28 {
		return h, schemas.Errorf(f, "fixed fields", int64(len(b)), schemas.ErrTruncated, "%d of 28 bytes", len(b))
	}
	if fl := binary.LittleEndian.Uint16(b[2:]); fl != 0 {
		return h, schemas.Errorf(f, "flags", 2, schemas.ErrBadHeader, "flags 0x%04x, want 0", fl)
	}
	h.MaxData = binary.LittleEndian.Uint32(b[4:])
	h.ControlWindow = binary.LittleEndian.Uint32(b[8:])
	if h.MaxData == 0 || h.ControlWindow == 0 {
		return h, schemas.Errorf(f, "max_data", 4, schemas.ErrBadHeader, "max_data %d, control_window %d: want both positive", h.MaxData, h.ControlWindow)
	}
	copy(h.Nonce[:], b[12:28])
	off := 28
	for i, name := range []string{"farm", "node", "addr"} {
		if off >= len(b) {
			return h, schemas.Errorf(f, name+"_len", int64(off), schemas.ErrTruncated, "hello ends before %s", name)
		}
		n := int(b[off])
		if off+1+n > len(b) {
			return h, schemas.Errorf(f, name, int64(off+1), schemas.ErrTruncated, "%s of %d bytes, %d left", name, n, len(b)-off-1)
		}
		s := string(b[off+1 : off+1+n])
		switch i {
		case 0:
			h.Farm = s
		case 1:
			if n == 0 {
				return h, schemas.Errorf(f, "node_len", int64(off), schemas.ErrBadHeader, "empty node id")
			}
			h.Node = s
		case 2:
			h.Addr = s
		}
		off += 1 + n
	}
	rest := len(b) - off
	switch {
	case withMAC && rest == MACSize:
		h.MAC = append([]byte(nil), b[off:]...)
	case withMAC:
		return h, schemas.Errorf(f, "mac", int64(off), schemas.ErrInconsistent, "%d bytes after the address, want a %d-byte MAC", rest, MACSize)
	case rest != 0:
		return h, schemas.Errorf(f, "end", int64(off), schemas.ErrInconsistent, "%d bytes after the address", rest)
	}
	return h, nil
}

// Roles in the MAC.
const (
	RoleAcceptor  = "sluice-peer-1 acceptor"
	RoleConnector = "sluice-peer-1 connector"
)

// MAC is HMAC-SHA256(token) over role, both nonces and both node ids
// (connector's first), as the peer doc says.
func MAC(token, role string, nonceC, nonceA [NonceSize]byte, nodeC, nodeA string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(role))
	m.Write(nonceC[:])
	m.Write(nonceA[:])
	m.Write([]byte{byte(len(nodeC))})
	m.Write([]byte(nodeC))
	m.Write([]byte{byte(len(nodeA))})
	m.Write([]byte(nodeA))
	return m.Sum(nil)
}

// Refuse reason codes (peer's doc), indexed like the Refused* names.
var RefuseReasons = [...]string{1: peer.RefusedFarm, 2: peer.RefusedToken, 3: peer.RefusedVersion, 4: peer.RefusedNode, 5: peer.RefusedAcceptQueue, 6: peer.RefusedMalformed}

// AppendRefuse appends a whole refuse frame: reason code (an index of
// RefuseReasons) and text (cut to fit MaxHandshake).
func AppendRefuse(dst []byte, code uint8, text string) []byte {
	if len(text) > MaxHandshake-1 {
		text = text[:MaxHandshake-1]
	}
	dst = AppendHeader(dst, Header{Kind: KindRefuse, Length: uint32(1 + len(text))})
	dst = append(dst, code)
	return append(dst, text...)
}

// DecodeRefuse decodes a refuse body: the reason's name ("unknown" for a
// code this version does not know) and the text.
func DecodeRefuse(b []byte) (reason, text string, err error) {
	if len(b) < 1 {
		return "", "", schemas.Errorf("peer refuse", "reason", 0, schemas.ErrTruncated, "empty refuse body")
	}
	reason = "unknown"
	if int(b[0]) < len(RefuseReasons) && RefuseReasons[b[0]] != "" {
		reason = RefuseReasons[b[0]]
	}
	return reason, string(b[1:]), nil
}

// RefuseCode is the code of a reason name (0 if none).
func RefuseCode(reason string) uint8 {
	for i, r := range RefuseReasons {
		if r == reason && r != "" {
			return uint8(i)
		}
	}
	return 0
}
