package lhcb

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// BankMagic opens every raw bank (LHCb Event/RawBank.h).
const BankMagic uint16 = 0xCBCB

// Raw bank sizes (untyped, so they combine with int lengths) and format name.
const (
	BankHeaderSize = 8
	// MaxBankPayload is the largest payload a 16-bit length can describe.
	MaxBankPayload = 0xFFFF - BankHeaderSize

	formatBank = "rawbank"
)

// Bank types this package interprets.
const (
	BankTypeODIN uint8 = 16
)

// Bank is one raw bank. Data is the payload (without the 8-byte header and
// without padding) and aliases the buffer the bank was decoded from.
type Bank struct {
	Type     uint8
	Version  uint8
	SourceID uint16
	Data     []byte
}

// Key returns the bank's sluice source id (see SourceID).
func (b *Bank) Key() uint32 { return SourceID(b.Type, b.SourceID) }

// PaddedLen is the bytes the bank occupies in a body: header and payload
// rounded up to a multiple of 4.
func (b *Bank) PaddedLen() int { return (BankHeaderSize + len(b.Data) + 3) &^ 3 }

// DecodeBank decodes the raw bank at the start of b and returns it with the
// bytes it occupies including its padding to 4 bytes. Errors:
// *schemas.DecodeError (offsets from the start of b) wrapping ErrTruncated,
// ErrBadMagic (magic not 0xCBCB) or ErrBadHeader (length below 8).
func DecodeBank(b []byte) (Bank, int, error) {
	if len(b) < BankHeaderSize {
		return Bank{}, 0, schemas.Errorf(formatBank, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", BankHeaderSize, len(b))
	}
	le := binary.LittleEndian
	if m := le.Uint16(b); m != BankMagic {
		return Bank{}, 0, schemas.Errorf(formatBank, "magic", 0, schemas.ErrBadMagic, "want %#04x, have %#04x", BankMagic, m)
	}
	n := int(le.Uint16(b[2:]))
	if n < BankHeaderSize {
		return Bank{}, 0, schemas.Errorf(formatBank, "length", 2, schemas.ErrBadHeader, "length %d is below the %d-byte header", n, BankHeaderSize)
	}
	padded := (n + 3) &^ 3
	if padded > len(b) {
		return Bank{}, 0, schemas.Errorf(formatBank, "payload", BankHeaderSize, schemas.ErrTruncated, "length %d (padded %d) needs %d bytes, have %d", n, padded, padded, len(b))
	}
	return Bank{Type: b[4], Version: b[5], SourceID: le.Uint16(b[6:]), Data: b[BankHeaderSize:n:n]}, padded, nil
}

// AppendBanks appends the raw banks of an MDF body (or of one bank-holding
// fragment) to dst. Errors are DecodeBank's, with the offset from the start
// of body.
func AppendBanks(dst []Bank, body []byte) ([]Bank, error) {
	for off := 0; off < len(body); {
		// Invariant: off is a multiple of 4 and every byte before it belongs to a decoded bank.
		bk, n, err := DecodeBank(body[off:])
		if err != nil {
			return dst, schemas.WithOffset(err, int64(off))
		}
		dst = append(dst, bk)
		off += n
	}
	return dst, nil
}

// AppendBank appends b as a raw bank (header, payload, zero padding to 4
// bytes) to dst. It fails only when the payload exceeds MaxBankPayload.
func AppendBank(dst []byte, b Bank) ([]byte, error) {
	if len(b.Data) > MaxBankPayload {
		return dst, fmt.Errorf("rawbank: payload of %d bytes exceeds %d", len(b.Data), MaxBankPayload)
	}
	n := BankHeaderSize + len(b.Data)
	dst = binary.LittleEndian.AppendUint16(dst, BankMagic)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(n))
	dst = append(dst, b.Type, b.Version)
	dst = binary.LittleEndian.AppendUint16(dst, b.SourceID)
	dst = append(dst, b.Data...)
	var pad [3]byte
	return append(dst, pad[:(4-n%4)%4]...), nil
}
