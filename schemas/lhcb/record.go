package lhcb

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// ChecksumStatus says what is known of a record's checksum.
type ChecksumStatus uint8

const (
	ChecksumAbsent     ChecksumStatus = iota // the stored checksum is 0: not computed by the writer
	ChecksumValid                            // recomputed and equal
	ChecksumBad                              // recomputed and different (only seen with ChecksumReport)
	ChecksumNotChecked                       // not recomputed (ChecksumSkip)
)

func (s ChecksumStatus) String() string {
	return [...]string{"absent", "valid", "bad", "not checked"}[s]
}

// ChecksumMode says what a decoder does with record checksums.
type ChecksumMode uint8

const (
	// ChecksumVerify recomputes every non-zero checksum; a mismatch is an
	// error wrapping schemas.ErrCRCMismatch. The default.
	ChecksumVerify ChecksumMode = iota
	// ChecksumReport recomputes and records the result in Record.Checksum
	// without failing (for inspection).
	ChecksumReport
	// ChecksumSkip does not recompute (the hash costs ~1 ns per byte).
	ChecksumSkip
)

// Record is one decoded MDF record.
type Record struct {
	Header   Header
	Offset   int64  // byte offset of the record in its stream (0 for DecodeRecord)
	Stored   []byte // the record as stored: header and the body as stored (maybe compressed); len = Header.Size
	Body     []byte // the uncompressed body: raw banks or one MEP (see Header.BodyType)
	Checksum ChecksumStatus
}

// DecodeRecord decodes the MDF record at the start of b and returns it with
// the bytes it occupies. An uncompressed body aliases b (zero copy); a
// compressed one is inflated into a new buffer. The checksum is verified
// (ChecksumVerify). Errors: *schemas.DecodeError with the offset from the
// start of b (see DecodeHeader; also ErrTruncated for a short body,
// ErrCRCMismatch, and for compressed bodies ErrUnsupported naming an
// algorithm other than zlib).
func DecodeRecord(b []byte) (Record, int, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return Record{}, 0, err
	}
	if uint64(h.Size) > uint64(len(b)) {
		return Record{}, 0, schemas.Errorf(formatMDF, "body", int64(h.Len()), schemas.ErrTruncated, "record size %d, have %d bytes", h.Size, len(b))
	}
	var f inflater
	rec, err := finishRecord(h, b[:h.Size:h.Size], 0, ChecksumVerify, &f, nil)
	return rec, int(h.Size), err
}

// finishRecord checks the checksum of the stored record and produces its
// body: aliasing stored when uncompressed, else inflated into scratch[:0].
// base is the record's offset in the stream, for errors.
func finishRecord(h Header, stored []byte, base int64, mode ChecksumMode, f *inflater, scratch []byte) (Record, error) {
	rec := Record{Header: h, Offset: base, Stored: stored, Checksum: ChecksumNotChecked}
	switch {
	case h.Checksum == 0:
		rec.Checksum = ChecksumAbsent
	case mode != ChecksumSkip:
		if c := Checksum(stored[16:]); c != h.Checksum {
			if mode == ChecksumVerify {
				return rec, schemas.Errorf(formatMDF, "checksum", base+12, schemas.ErrCRCMismatch, "stored %#08x, computed %#08x over bytes [16,%d)", h.Checksum, c, h.Size)
			}
			rec.Checksum = ChecksumBad
		} else {
			rec.Checksum = ChecksumValid
		}
	}
	hl := h.Len()
	if !h.Compressed() {
		rec.Body = stored[hl:]
		return rec, nil
	}
	body, err := f.inflate(scratch[:0], stored[hl:], base+int64(hl))
	if err != nil {
		return rec, err
	}
	rec.Body = body
	return rec, nil
}

// AppendRecord appends an MDF record with header h and body to dst and
// returns the extended slice. Size, checksum and compression are computed:
// h.Size, h.Checksum and h.Compression are ignored. level 0 stores the body
// uncompressed; 1..9 compresses it as zlib ROOT blocks at that level (the
// compression byte then holds the level in its low nibble and the expansion
// factor - 1, capped at 15, in its high nibble, as LHCb writers do). The
// checksum is the one-at-a-time hash of the stored bytes [16, size).
func AppendRecord(dst []byte, h Header, body []byte, level int) ([]byte, error) {
	if HeaderLen(h.Version) == 0 {
		return dst, fmt.Errorf("mdf: cannot write header version %d (know 0..3)", h.Version)
	}
	if level < 0 || level > 9 {
		return dst, fmt.Errorf("mdf: zlib level %d outside 0..9", level)
	}
	start := len(dst)
	h.Checksum, h.Compression = 0, 0
	dst = appendHeader(dst, &h)
	if level == 0 {
		dst = append(dst, body...)
	} else {
		var err error
		if dst, err = deflate(dst, body, level); err != nil {
			return dst[:start], err
		}
		stored := len(dst) - start - h.Len()
		expand := 0
		if stored > 0 {
			expand = min((len(body)+stored-1)/stored-1, 15)
		}
		dst[start+16] = byte(level) | byte(expand)<<4
	}
	size := len(dst) - start
	if size > MaxRecordSize {
		return dst[:start], fmt.Errorf("mdf: record of %d bytes exceeds %d", size, MaxRecordSize)
	}
	rec := dst[start:]
	for i := 0; i < 12; i += 4 {
		binary.LittleEndian.PutUint32(rec[i:], uint32(size))
	}
	binary.LittleEndian.PutUint32(rec[12:], Checksum(rec[16:]))
	return dst, nil
}
