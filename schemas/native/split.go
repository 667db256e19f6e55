package native

import (
	"bufio"
	"encoding/binary"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

var _ format.Splitter = stream{}

// Sources reads every fragment and packet and returns their source ids,
// ascending, as one group "native" (a native stream does not say how its
// sources group).
func (stream) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	seen := map[uint32]bool{}
	err := eachRecord(r, func(_ int64, frags []schemas.Fragment) error {
		for i := range frags {
			seen[frags[i].SourceID] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []schemas.SourceGroup{{Name: "native", Sources: summary.SortedKeys(seen)}}, nil
}

// Split hands on the fragments of each record as they are: a fragment
// alone, a packet's fragments with their event ids, the packet's flags and
// its stored CRCs (a fragment whose payload fails its CRC stays so, for
// the builder to mark its event corrupt). Errors: the decoders',
// offsets in the stream.
func (stream) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	return eachRecord(r, func(_ int64, frags []schemas.Fragment) error {
		return emit(format.Piece{Fragments: frags})
	})
}

// eachRecord decodes the fragments and packets of r in turn and calls fn
// with each record's offset and fragments (valid until fn returns). A
// record cut short by the end of the stream is ErrTruncated at its offset.
func eachRecord(r io.Reader, fn func(off int64, frags []schemas.Fragment) error) error {
	br := bufio.NewReader(r)
	var (
		buf   []byte
		off   int64
		frags []schemas.Fragment
	)
	for {
		head, perr := br.Peek(32)
		if len(head) == 0 && perr == io.EOF {
			return nil
		}
		kind, total, err := recordSize(head, off)
		if err != nil {
			return err
		}
		if buf, err = summary.ReadRecord(br, buf, total, off, kind); err != nil {
			return err
		}
		frags = frags[:0]
		if kind == "mfp" {
			p, _, err := schemas.DecodeMFP(buf)
			if err != nil {
				return schemas.WithOffset(err, off)
			}
			p.Fragments(func(_ int, id uint64, crc uint32, payload []byte) bool {
				frags = append(frags, schemas.Fragment{SourceID: p.SourceID, EventID: id, Flags: p.Flags, CRC: crc, Payload: payload})
				return true
			})
		} else {
			f, _, err := schemas.DecodeFragment(buf)
			if err != nil {
				return schemas.WithOffset(err, off)
			}
			frags = append(frags, f)
		}
		if err := fn(off, frags); err != nil {
			return err
		}
		off += int64(len(buf))
	}
}

// recordSize says, from the first 32 bytes of a record at stream offset
// off (fewer at the stream's end), whether it is a packet ("mfp") or a
// fragment ("fragment") and how many bytes it takes (at least 32, so that
// the decoder names a bad size field). A record shorter than its header
// is ErrTruncated.
func recordSize(head []byte, off int64) (kind string, total uint64, err error) {
	kind = "fragment"
	if len(head) >= 4 && binary.LittleEndian.Uint32(head) == schemas.MFPMagic {
		kind = "mfp"
	}
	if len(head) < 32 {
		return kind, 0, schemas.Errorf(kind, "header", off, schemas.ErrTruncated, "need a 32-byte header, the file ends after %d bytes", len(head))
	}
	if kind == "mfp" {
		total = uint64(binary.LittleEndian.Uint32(head[24:]))
	} else {
		total = uint64(head[5]) + uint64(binary.LittleEndian.Uint32(head[12:]))
	}
	return kind, max(total, 32), nil
}

var _ format.Framer = stream{}

// Framing is "mfp": a transport packet carries one multi-fragment packet.
func (stream) Framing() string { return "mfp" }

// Frames hands on each packet of the stream as it lies there, and each
// lone fragment as a packet of one fragment with its flags and stored CRC
// (schemas.AppendMFP, payloads 8-byte aligned). Errors: the decoders',
// offsets in data.
func (stream) Frames(data []byte, emit func(format.Frame) error) error {
	for off := 0; off < len(data); {
		b := data[off:]
		kind, _, err := recordSize(b[:min(32, len(b))], int64(off))
		if err != nil {
			return err
		}
		var fr format.Frame
		var n int
		if kind == "mfp" {
			var p schemas.MFP
			if p, n, err = schemas.DecodeMFP(b); err != nil {
				return schemas.WithOffset(err, int64(off))
			}
			fr = format.Frame{Bytes: b[:n:n], Source: p.SourceID, Event: p.FirstEventID, Fragments: p.N}
		} else {
			var f schemas.Fragment
			if f, n, err = schemas.DecodeFragment(b); err != nil {
				return schemas.WithOffset(err, int64(off))
			}
			fr = format.Frame{Bytes: schemas.AppendMFP(nil, f.SourceID, f.EventID, f.Flags, 3, [][]byte{f.Payload}, []uint32{f.CRC}),
				Source: f.SourceID, Event: f.EventID, Fragments: 1}
		}
		if err := emit(fr); err != nil {
			return err
		}
		off += n
	}
	return nil
}
