package cms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// FRD file header (IOPool/Streamer/interface/FRDFileHeader.h): 8 bytes of
// identifier "RAW_0001" or "RAW_0002", then
//
//	v1: u16 headerSize (24), u16 eventCount, u32 lumi, u64 fileSize
//	v2: u16 headerSize (32), u16 dataType, u32 eventCount, u32 run,
//	    u32 lumi, u64 fileSize
//
// fileSize counts every byte of the file, this header included.
const (
	FRDFileMagic  = "RAW_"
	frdFileFormat = "cms-frd-file"
	// MaxFRDEventSize bounds what FileReader accepts as eventSize, so that a
	// corrupt header cannot make it read gigabytes; real CMS events are a
	// few MB.
	MaxFRDEventSize = 1 << 30
)

// FRDFileHeader is the optional header of an FRD file.
type FRDFileHeader struct {
	Version    int    `json:"version"`             // 1 or 2
	DataType   uint16 `json:"data_type,omitempty"` // v2 only
	EventCount uint32 `json:"event_count"`         // 16 bits in v1
	Run        uint32 `json:"run,omitempty"`       // v2 only
	Lumi       uint32 `json:"lumi"`
	FileSize   uint64 `json:"file_size"` // bytes of the whole file, header included
}

// Size is the header's size in bytes (24 for v1, 32 for v2, 0 otherwise).
func (h *FRDFileHeader) Size() int {
	switch h.Version {
	case 1:
		return 24
	case 2:
		return 32
	}
	return 0
}

// AppendFRDFileHeader appends h to dst. Errors: a version other than 1 or 2,
// or a v1 event count over 16 bits, or v1 fields v1 does not have.
func AppendFRDFileHeader(dst []byte, h *FRDFileHeader) ([]byte, error) {
	le := binary.LittleEndian
	switch h.Version {
	case 1:
		if h.EventCount > math.MaxUint16 || h.Run != 0 || h.DataType != 0 {
			return dst, fmt.Errorf("cms: FRD file header v1 holds a 16-bit event count and no run or data type (count %d, run %d, type %d)", h.EventCount, h.Run, h.DataType)
		}
		dst = append(dst, FRDFileMagic+"0001"...)
		dst = le.AppendUint16(dst, 24)
		dst = le.AppendUint16(dst, uint16(h.EventCount))
		dst = le.AppendUint32(dst, h.Lumi)
	case 2:
		dst = append(dst, FRDFileMagic+"0002"...)
		dst = le.AppendUint16(dst, 32)
		dst = le.AppendUint16(dst, h.DataType)
		dst = le.AppendUint32(dst, h.EventCount)
		dst = le.AppendUint32(dst, h.Run)
		dst = le.AppendUint32(dst, h.Lumi)
	default:
		return dst, fmt.Errorf("cms: FRD file header version %d, want 1 or 2", h.Version)
	}
	return le.AppendUint64(dst, h.FileSize), nil
}

// DecodeFRDFileHeader decodes the file header at the start of b and returns
// it with its size. Errors: *schemas.DecodeError wrapping ErrTruncated,
// ErrBadMagic (no "RAW_"), ErrBadVersion (not "0001"/"0002") or ErrBadHeader
// (headerSize not the version's).
func DecodeFRDFileHeader(b []byte) (FRDFileHeader, int, error) {
	if len(b) < 8 {
		return FRDFileHeader{}, 0, schemas.Errorf(frdFileFormat, "id", 0, schemas.ErrTruncated, "need 8 bytes, have %d", len(b))
	}
	if string(b[:4]) != FRDFileMagic {
		return FRDFileHeader{}, 0, schemas.Errorf(frdFileFormat, "id", 0, schemas.ErrBadMagic, "want %q, have %q", FRDFileMagic, b[:4])
	}
	var h FRDFileHeader
	switch string(b[4:8]) {
	case "0001":
		h.Version = 1
	case "0002":
		h.Version = 2
	default:
		return FRDFileHeader{}, 0, schemas.Errorf(frdFileFormat, "id", 4, schemas.ErrBadVersion, "want \"0001\" or \"0002\", have %q", b[4:8])
	}
	n := h.Size()
	if len(b) < n {
		return FRDFileHeader{}, 0, schemas.Errorf(frdFileFormat, "header", 0, schemas.ErrTruncated, "v%d header needs %d bytes, have %d", h.Version, n, len(b))
	}
	le := binary.LittleEndian
	if hs := le.Uint16(b[8:]); int(hs) != n {
		return FRDFileHeader{}, 0, schemas.Errorf(frdFileFormat, "headerSize", 8, schemas.ErrBadHeader, "v%d header is %d bytes, field says %d", h.Version, n, hs)
	}
	if h.Version == 1 {
		h.EventCount = uint32(le.Uint16(b[10:]))
		h.Lumi = le.Uint32(b[12:])
		h.FileSize = le.Uint64(b[16:])
	} else {
		h.DataType = le.Uint16(b[10:])
		h.EventCount = le.Uint32(b[12:])
		h.Run = le.Uint32(b[16:])
		h.Lumi = le.Uint32(b[20:])
		h.FileSize = le.Uint64(b[24:])
	}
	return h, n, nil
}

// AppendFRDFile appends a whole FRD file to dst: the file header h (none
// when h is nil; its EventCount and FileSize are filled in) followed by
// events. Errors are those of AppendFRDFileHeader and AppendFRD.
func AppendFRDFile(dst []byte, h *FRDFileHeader, events []FRDEvent) ([]byte, error) {
	start := len(dst)
	var hdr FRDFileHeader
	if h != nil {
		hdr = *h
		hdr.EventCount = uint32(len(events))
		hdr.FileSize = uint64(hdr.Size())
		for i := range events {
			hdr.FileSize += uint64(events[i].EncodedLen())
		}
		var err error
		if dst, err = AppendFRDFileHeader(dst, &hdr); err != nil {
			return dst[:start], err
		}
	}
	for i := range events {
		var err error
		if dst, err = AppendFRD(dst, &events[i]); err != nil {
			return dst[:start], fmt.Errorf("event %d: %w", i, err)
		}
	}
	return dst, nil
}

// FileReader reads FRD events one by one from a stream: an optional file
// header, then events back to back. Offsets in its errors count from the
// start of the stream.
type FileReader struct {
	r      io.Reader
	off    int64 // stream offset of the next unread byte
	header *FRDFileHeader
	head   [32]byte
	nhead  int // bytes of head read ahead but not consumed yet
	buf    []byte
	events uint32
}

// NewFileReader reads the optional "RAW_" file header from r. Errors: those
// of DecodeFRDFileHeader, or the reader's.
func NewFileReader(r io.Reader) (*FileReader, error) {
	fr := &FileReader{r: r}
	n, err := io.ReadFull(r, fr.head[:4])
	fr.nhead = n
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && err != io.EOF {
		return nil, err
	}
	if n == 4 && string(fr.head[:4]) == FRDFileMagic {
		if _, err := io.ReadFull(r, fr.head[4:8]); err != nil {
			return nil, schemas.Errorf(frdFileFormat, "id", 4, schemas.ErrTruncated, "file ends inside the 8-byte id")
		}
		fr.nhead = 8
		var tmp FRDFileHeader
		switch string(fr.head[4:8]) {
		case "0001":
			tmp.Version = 1
		case "0002":
			tmp.Version = 2
		}
		if want := tmp.Size(); want > 8 {
			if _, err := io.ReadFull(r, fr.head[8:want]); err != nil {
				return nil, schemas.Errorf(frdFileFormat, "header", 0, schemas.ErrTruncated, "v%d header needs %d bytes, file is shorter", tmp.Version, want)
			}
			fr.nhead = want
		}
		h, n, err := DecodeFRDFileHeader(fr.head[:fr.nhead])
		if err != nil {
			return nil, err
		}
		fr.header, fr.nhead, fr.off = &h, 0, int64(n)
	}
	return fr, nil
}

// Header returns the file header, or nil when the file has none.
func (fr *FileReader) Header() *FRDFileHeader { return fr.header }

// Offset is the stream offset of the next event.
func (fr *FileReader) Offset() int64 { return fr.off }

// readFull fills p from the read-ahead bytes, then from the stream.
func (fr *FileReader) readFull(p []byte) (int, error) {
	n := copy(p, fr.head[:fr.nhead])
	copy(fr.head[:], fr.head[n:fr.nhead])
	fr.nhead -= n
	m, err := io.ReadFull(fr.r, p[n:])
	if n > 0 && err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n + m, err
}

// Next returns the next event, its checksum verified. Its Data is valid
// until the next call. At the end of the stream it returns io.EOF, or, when
// a file header announced another event count or file size, a
// *schemas.DecodeError wrapping ErrInconsistent. Other errors: those of
// DecodeFRD with stream offsets, ErrSizeOverflow for an eventSize over
// MaxFRDEventSize; with ErrCRCMismatch the event is returned too and the
// reader may go on.
func (fr *FileReader) Next() (FRDEvent, error) {
	start := fr.off
	var h [32]byte
	n, err := fr.readFull(h[:4])
	if err == io.EOF {
		return FRDEvent{}, fr.atEnd()
	}
	if err != nil {
		return FRDEvent{}, fr.truncated(err, start, "header.version", n, 4)
	}
	version, flags, ok := frdVersion(h[:])
	if !ok {
		return FRDEvent{}, schemas.Errorf(frdFormat, "header.version", start, schemas.ErrBadVersion, "want %d..%d, have 0x%08x", FRDMinVersion, FRDMaxVersion, binary.LittleEndian.Uint32(h[:]))
	}
	hs := FRDHeaderSize(version)
	if n, err := fr.readFull(h[4:hs]); err != nil {
		return FRDEvent{}, fr.truncated(err, start, "header", 4+n, hs)
	}
	e := decodeFRDHeader(h[:], version, flags)
	size := binary.LittleEndian.Uint32(h[frdSizeOffset(version):])
	if size > MaxFRDEventSize || e.Padding > MaxFRDEventSize {
		return FRDEvent{}, schemas.Errorf(frdFormat, "header.eventSize", start+int64(frdSizeOffset(version)), schemas.ErrSizeOverflow, "eventSize %d, paddingSize %d, limit %d", size, e.Padding, MaxFRDEventSize)
	}
	total := int(size) + int(e.Padding)
	// Grow the buffer as bytes arrive rather than trusting eventSize, so a
	// corrupt size on a short stream costs no more memory than the stream.
	fr.buf = fr.buf[:0]
	for len(fr.buf) < total {
		chunk := min(total-len(fr.buf), 1<<20)
		l := len(fr.buf)
		fr.buf = slices.Grow(fr.buf, chunk)[:l+chunk]
		if m, err := fr.readFull(fr.buf[l:]); err != nil {
			return FRDEvent{}, fr.truncated(err, start, "data", hs+l+m, hs+total)
		}
	}
	e.Data = fr.buf[:size:size]
	fr.off = start + int64(hs+total)
	fr.events++
	if got := FRDChecksum(version, e.Data); got != e.Checksum {
		return e, schemas.Errorf(frdFormat, "header.checksum", start+int64(hs-4), schemas.ErrCRCMismatch, "event %d: %s stored 0x%08x, computed 0x%08x", e.Event, checksumName(version), e.Checksum, got)
	}
	return e, nil
}

func (fr *FileReader) truncated(err error, start int64, field string, have, need int) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		return schemas.Errorf(frdFormat, field, start, schemas.ErrTruncated, "event at byte %d needs %d bytes, stream ends after %d", start, need, have)
	}
	return err
}

// atEnd checks the file header's counts once the stream is exhausted.
func (fr *FileReader) atEnd() error {
	if h := fr.header; h != nil {
		if h.EventCount != fr.events {
			return schemas.Errorf(frdFileFormat, "eventCount", fr.off, schemas.ErrInconsistent, "file header announces %d events, file holds %d", h.EventCount, fr.events)
		}
		if h.FileSize != uint64(fr.off) {
			return schemas.Errorf(frdFileFormat, "fileSize", fr.off, schemas.ErrInconsistent, "file header announces %d bytes, file holds %d", h.FileSize, fr.off)
		}
	}
	return io.EOF
}
