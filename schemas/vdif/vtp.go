package vdif

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
)

// VTPHeaderSize is the size of the VDIF Transport Protocol prefix: one
// little-endian uint64 packet sequence number before the VDIF frame (VTP
// 0.9.7; byte order as implemented by JakeEBrooks/rustvdif src/net/vtp.rs).
const VTPHeaderSize = 8

const formatVTP = "vtp"

// AppendVTP appends one VTP datagram to dst: seq as a little-endian uint64,
// then the complete VDIF frame.
func AppendVTP(dst []byte, seq uint64, frame []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	return append(dst, frame...)
}

// DecodeVTP decodes one VTP datagram: the sequence number and the VDIF
// frame, which must fill the rest of the datagram exactly (VTP carries one
// frame per datagram). The frame's Bytes alias datagram. Errors
// (*schemas.DecodeError with Format "vtp", offsets from the start of the
// datagram): ErrTruncated (the datagram or the frame is cut short),
// ErrInconsistent (bytes after the frame, at their offset), and the errors
// of DecodeHeader moved by 8 bytes.
func DecodeVTP(datagram []byte) (uint64, Frame, error) {
	if len(datagram) < VTPHeaderSize {
		return 0, Frame{}, schemas.Errorf(formatVTP, "sequence number", 0, schemas.ErrTruncated, "need %d bytes, have %d", VTPHeaderSize, len(datagram))
	}
	seq := binary.LittleEndian.Uint64(datagram)
	f, err := DecodeFrame(datagram[VTPHeaderSize:])
	if err != nil {
		if de, ok := err.(*schemas.DecodeError); ok {
			c := *de
			c.Format, c.Offset = formatVTP, c.Offset+VTPHeaderSize
			return 0, Frame{}, &c
		}
		return 0, Frame{}, err
	}
	if end := VTPHeaderSize + len(f.Bytes); end != len(datagram) {
		return 0, Frame{}, schemas.Errorf(formatVTP, "datagram", int64(end), schemas.ErrInconsistent, "frame ends at byte %d of a %d-byte datagram", end, len(datagram))
	}
	f.Offset = VTPHeaderSize
	return seq, f, nil
}
