package lhcb

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

// TestPCIe40MFPTable checks the PROVISIONAL Run 3 PCIe40 MFP codec against
// the table on PCIe40MFP only — no real packet or
// LHCb Online header was available. The expected bytes are written out by
// hand from that table.
func TestPCIe40MFPTable(t *testing.T) {
	p := PCIe40MFP{EventID: 0x0102030405060708, SourceID: 0x1234, Align: 2, Version: 7,
		Types: []uint8{16, 9, 9}, Fragments: [][]byte{{0xAA, 0xBB, 0xCC, 0xDD, 0xEE}, {}, {0x11, 0x22}}}
	got, err := AppendPCIe40MFP(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0xCE, 0x40, // magic 0x40CE
		3, 0, // n_banks
		44, 0, 0, 0, // packet_size: 20 + 4 (types) + 8 (sizes) + 8 + 0 + 4
		8, 7, 6, 5, 4, 3, 2, 1, // ev_id
		0x34, 0x12, // src_id
		2, 7, // align, version
		16, 9, 9, 0, // types padded to 4
		5, 0, 0, 0, 2, 0, 0, 0, // sizes padded to 4
		0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0, 0, 0, // fragment 0 padded to 2^2
		0x11, 0x22, 0, 0, // fragment 2
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n% x\nwant\n% x", got, want)
	}
	d, n, err := DecodePCIe40MFP(append(bytes.Clone(got), 0xFF)) // a following byte is not part of it
	if err != nil || n != 44 {
		t.Fatalf("decode: %d bytes, %v", n, err)
	}
	if d.EventID != p.EventID || d.SourceID != p.SourceID || d.Align != 2 || d.Version != 7 || !bytes.Equal(d.Types, p.Types) {
		t.Fatalf("decoded %+v", d)
	}
	for i := range p.Fragments {
		if !bytes.Equal(d.Fragments[i], p.Fragments[i]) {
			t.Fatalf("fragment %d = % x", i, d.Fragments[i])
		}
	}
}

func TestPCIe40MFPErrors(t *testing.T) {
	p := PCIe40MFP{Align: 3, Types: []uint8{1, 2}, Fragments: [][]byte{make([]byte, 10), make([]byte, 3)}}
	good, err := AppendPCIe40MFP(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for _, tc := range []struct {
		name     string
		edit     func(b []byte) []byte
		sentinel error
		off      int64
	}{
		{"short header", func(b []byte) []byte { return b[:19] }, schemas.ErrTruncated, 0},
		{"magic", func(b []byte) []byte { b[1] = 0x41; return b }, schemas.ErrBadMagic, 0},
		{"no fragments", func(b []byte) []byte { le.PutUint16(b[2:], 0); return b }, schemas.ErrBadHeader, 2},
		{"align", func(b []byte) []byte { b[18] = 40; return b }, schemas.ErrBadHeader, 18},
		{"packet_size below arrays", func(b []byte) []byte { le.PutUint32(b[4:], 20); return b }, schemas.ErrInconsistent, 4},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, schemas.ErrTruncated, 0},
		{"fragment past packet", func(b []byte) []byte { le.PutUint16(b[24:], 1000); return b }, schemas.ErrSizeOverflow, 24},
		{"packet_size beyond fragments", func(b []byte) []byte {
			b = append(b, make([]byte, 8)...)
			le.PutUint32(b[4:], uint32(len(b)))
			return b
		}, schemas.ErrInconsistent, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodePCIe40MFP(tc.edit(bytes.Clone(good)))
			decodetest.Want(t, err, tc.sentinel, tc.off)
		})
	}
}
