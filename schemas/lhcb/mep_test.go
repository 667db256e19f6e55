package lhcb

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

// mepBody returns the sample's only record and its MEP body.
func mepBody(t testing.TB) ([]byte, []byte) {
	data := readFile(t, mepSample)
	rec, n, err := DecodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(data) || rec.Header.BodyType() != DataTypeMEP {
		t.Fatalf("record of %d bytes, data type %d", n, rec.Header.DataType)
	}
	return data, rec.Body
}

// TestMEPSample checks the sample against what the package doc and an
// independent Python parse say: 1238 blocks (1025 of them non-retina
// banks), packing factor 10, offsets counted
// from the end of the MEP header.
func TestMEPSample(t *testing.T) {
	_, body := mepBody(t)
	m, err := DecodeMEP(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Blocks) != 1238 || m.PackingFactor != 10 {
		t.Fatalf("%d blocks, packing factor %d", len(m.Blocks), m.PackingFactor)
	}
	if hl := mepHeaderLen(len(m.Blocks)); hl != 9920 {
		t.Fatalf("MEP header %d bytes, want 9920", hl)
	}
	b0 := m.Blocks[0]
	if b0.SourceID != 1000 || b0.Types[0] != 9 || len(b0.Fragments[0]) != 68 || len(b0.Fragments[9]) != 236 {
		t.Fatalf("block 0: source %d type %d sizes %d..%d", b0.SourceID, b0.Types[0], len(b0.Fragments[0]), len(b0.Fragments[9]))
	}
	// Re-encoding gives the sample's body byte for byte.
	re, err := AppendMEP(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(re, body) {
		t.Fatal("AppendMEP does not reproduce the sample MEP")
	}
}

// TestMEPTranspose is the MEP proof: the events transposed from the
// sample have exactly one bank per source block, and per block the
// fragment sizes sum to the block size.
func TestMEPTranspose(t *testing.T) {
	_, body := mepBody(t)
	m, err := DecodeMEP(body)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	n := len(m.Blocks)
	base := mepHeaderLen(n)
	perBlock := make([]int, n)
	var odinNumbers []uint64
	for k := 0; k < m.PackingFactor; k++ {
		ev := m.Event(k, nil)
		if len(ev) != n {
			t.Fatalf("event %d has %d banks for %d blocks", k, len(ev), n)
		}
		for i, b := range ev {
			if b.SourceID != m.Blocks[i].SourceID || b.Type != m.Blocks[i].Types[k] {
				t.Fatalf("event %d bank %d: source %d type %d", k, i, b.SourceID, b.Type)
			}
			perBlock[i] += len(b.Data)
			if b.Type == BankTypeODIN {
				o, err := DecodeODIN(b.Version, b.Data)
				if err != nil {
					t.Fatal(err)
				}
				odinNumbers = append(odinNumbers, o.EventNumber)
			}
		}
	}
	for i := range m.Blocks {
		// block_size read straight from the bytes, not from the decoder.
		at := base + int(le.Uint32(body[16+2*pad4(2*n)+4*i:]))
		if want := int(le.Uint32(body[at+12:])); perBlock[i] != want {
			t.Fatalf("block %d: fragments sum to %d, block_size %d", i, perBlock[i], want)
		}
	}
	// Where a source has no bank in an event, the sample's fragment has
	// size 0 and type 0 (blocks 398..400, sources 1..3 of type 32).
	placeholders := 0
	for i := range m.Blocks {
		for k, typ := range m.Blocks[i].Types {
			if typ == 0 {
				if len(m.Blocks[i].Fragments[k]) != 0 || m.Blocks[i].Types[0] != 32 {
					t.Fatalf("block %d fragment %d: type 0 with %d bytes", i, k, len(m.Blocks[i].Fragments[k]))
				}
				placeholders++
			}
		}
	}
	if placeholders != 16 {
		t.Fatalf("%d type-0 fragments, want 16", placeholders)
	}
	if len(odinNumbers) != m.PackingFactor {
		t.Fatalf("%d ODIN fragments, want one per event", len(odinNumbers))
	}
	// ForEachEvent yields the same 10 events as MDF bodies.
	count := 0
	data := readFile(t, mepSample)
	if err := ForEachEvent(bytes.NewReader(data), func(ev *Event) error {
		banks, err := AppendBanks(nil, ev.Body)
		if err != nil {
			return err
		}
		if len(banks) != n {
			t.Errorf("event %d: %d banks", ev.Index, len(banks))
		}
		count++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if count != 10 {
		t.Fatalf("ForEachEvent gave %d events", count)
	}
}

func TestMEPErrors(t *testing.T) {
	_, body := mepBody(t)
	le := binary.LittleEndian
	n := 1238
	offAt := 16 + 2*pad4(2*n)
	base := mepHeaderLen(n)
	block1 := base + int(le.Uint32(body[offAt+4:]))
	for _, tc := range []struct {
		name     string
		edit     func(b []byte) []byte
		sentinel error
		off      int64
	}{
		{"short header", func(b []byte) []byte { return b[:10] }, schemas.ErrTruncated, 0},
		{"short arrays", func(b []byte) []byte { return b[:100] }, schemas.ErrTruncated, 16},
		{"no blocks", func(b []byte) []byte { le.PutUint16(b, 0); return b }, schemas.ErrBadHeader, 0},
		{"packing factor 0", func(b []byte) []byte { le.PutUint16(b[2:], 0); return b }, schemas.ErrBadHeader, 2},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, schemas.ErrTruncated, 8},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0, 0, 0, 0) }, schemas.ErrInconsistent, 8},
		{"offset out of range", func(b []byte) []byte { le.PutUint32(b[offAt+4:], 0xFFFFFFF0); return b }, schemas.ErrSizeOverflow, int64(offAt + 4)},
		{"version beyond 8 bits", func(b []byte) []byte { le.PutUint16(b[16+pad4(2*n)+2:], 256); return b }, schemas.ErrBadHeader, int64(16 + pad4(2*n) + 2)},
		{"n_frag disagrees", func(b []byte) []byte { le.PutUint16(b[block1+8:], 9); return b }, schemas.ErrInconsistent, int64(block1 + 8)},
		{"block_size too large", func(b []byte) []byte { le.PutUint32(b[block1+12:], 1<<30); return b }, schemas.ErrSizeOverflow, int64(block1 + 12)},
		{"block_size disagrees", func(b []byte) []byte { le.PutUint32(b[block1+12:], le.Uint32(b[block1+12:])+4); return b }, schemas.ErrInconsistent, int64(block1 + 12)},
		{"fragment sizes exceed block", func(b []byte) []byte { le.PutUint16(b[block1+16+12:], 0xFFFF); return b }, schemas.ErrInconsistent, int64(block1 + 16 + 12)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMEP(tc.edit(bytes.Clone(body)))
			decodetest.Want(t, err, tc.sentinel, tc.off)
		})
	}
	// In a stream, the offsets are from the start of the file.
	data := readFile(t, mepSample)
	bad := bytes.Clone(data)
	le.PutUint16(bad[48+block1+8:], 9)
	le.PutUint32(bad[12:], Checksum(bad[16:]))
	err := ForEachEvent(bytes.NewReader(bad), func(*Event) error { return nil })
	decodetest.Want(t, err, schemas.ErrInconsistent, int64(48+block1+8))
}

func TestAppendMEPRejects(t *testing.T) {
	for _, m := range []*MEP{
		{PackingFactor: 2},
		{PackingFactor: 2, Blocks: []MEPBlock{{Types: []uint8{1}, Fragments: [][]byte{nil}}}},
		{PackingFactor: 1, Blocks: []MEPBlock{{Types: []uint8{1}, Fragments: [][]byte{make([]byte, 70000)}}}},
	} {
		if _, err := AppendMEP(nil, m); err == nil {
			t.Errorf("AppendMEP(%d blocks, pf %d) succeeded", len(m.Blocks), m.PackingFactor)
		}
	}
}
