package besiii

import (
	"bufio"
	"encoding/binary"
	"io"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// Markers of the BESIII file records (RawFileUtil.h).
const (
	MarkerFileStart uint32 = 0x1234aaaa
	MarkerFileName  uint32 = 0x1234aabb
	MarkerRunParams uint32 = 0x1234bbbb
	MarkerSeparator uint32 = 0x1234cccc
	MarkerFileEnd   uint32 = 0x1234dddd
	MarkerEndOfFile uint32 = 0x1234eeee
)

// Record sizes in words.
const (
	fileStartWords = 8
	runParamsWords = 9
	separatorWords = 4
	fileEndWords   = 10
)

const fmtFile = "besiii-raw"

// Head is a file's start records: FILE_START, FILE_NAME and RUN_PARAMS,
// as decoded and as the words they were read from.
type Head struct {
	Words []uint32 `json:"-"` // the three records' words, as in the file

	FileVersion     uint32 `json:"version"`
	FileNumber      uint32 `json:"file_number"`
	Date            uint32 `json:"date"` // decimal DMMYYYY
	Time            uint32 `json:"time"` // decimal HHMMSS
	SizeLimitBlocks uint32 `json:"size_limit_data_blocks"`
	SizeLimitMB     uint32 `json:"size_limit_mb"`
	AppName         string `json:"app_name"`
	UserTag         string `json:"user_tag"`
	Run             uint32 `json:"run"`
	MaxEvents       uint32 `json:"max_events"`
	RecEnable       uint32 `json:"rec_enable"`
	TriggerType     uint32 `json:"trigger_type"`
	DetectorMask    uint32 `json:"detector_mask"`
	BeamType        uint32 `json:"beam_type"`
	BeamEnergy      uint32 `json:"beam_energy"`
}

// DecodeHead decodes the file start records from the little-endian words
// w (their exact words, as a Head's Words).
func DecodeHead(w []uint32) (Head, error) {
	h := Head{Words: w}
	at := func(i int) int64 { return 4 * int64(i) }
	if len(w) < fileStartWords || w[0] != MarkerFileStart || w[1] != fileStartWords {
		return h, schemas.Errorf(fmtFile, "FILE_START", 0, schemas.ErrBadHeader, "want 0x%08x and record size %d", MarkerFileStart, fileStartWords)
	}
	h.FileVersion, h.FileNumber, h.Date, h.Time, h.SizeLimitBlocks, h.SizeLimitMB = w[2], w[3], w[4], w[5], w[6], w[7]
	p := fileStartWords
	if p+2 > len(w) || w[p] != MarkerFileName {
		return h, schemas.Errorf(fmtFile, "FILE_NAME", at(p), schemas.ErrBadMagic, "want 0x%08x after FILE_START", MarkerFileName)
	}
	p++
	for _, s := range []*string{&h.AppName, &h.UserTag} {
		if p >= len(w) {
			return h, schemas.Errorf(fmtFile, "FILE_NAME", at(p), schemas.ErrTruncated, "the head ends in FILE_NAME")
		}
		n := uint64(w[p])
		words := (n + 3) / 4
		if uint64(p)+1+words > uint64(len(w)) {
			return h, schemas.Errorf(fmtFile, "FILE_NAME", at(p), schemas.ErrSizeOverflow, "a string of %d bytes reaches past the head", n)
		}
		b := appendWords(nil, w[p+1:p+1+int(words)])
		*s = strings.TrimRight(string(b[:n]), "\x00")
		p += 1 + int(words)
	}
	if p+runParamsWords != len(w) || w[p] != MarkerRunParams || w[p+1] != runParamsWords {
		return h, schemas.Errorf(fmtFile, "RUN_PARAMS", at(p), schemas.ErrBadHeader, "want 0x%08x and record size %d ending the head", MarkerRunParams, runParamsWords)
	}
	r := w[p:]
	h.Run, h.MaxEvents, h.RecEnable, h.TriggerType, h.DetectorMask, h.BeamType, h.BeamEnergy = r[2], r[3], r[4], r[5], r[6], r[7], r[8]
	return h, nil
}

// FileEnd is a file's FILE_END record.
type FileEnd struct {
	Date         uint32 `json:"date"` // decimal DMMYYYY
	Time         uint32 `json:"time"` // decimal HHMMSS
	EventsInFile uint32 `json:"events_in_file"`
	DataInFileMB uint32 `json:"data_in_file_mb"`
	EventsInRun  uint32 `json:"events_in_run"`
	DataInRunMB  uint32 `json:"data_in_run_mb"`
	Status       uint32 `json:"status"` // non-zero: the run's last file
}

// appendFileEnd appends e as a FILE_END record.
func appendFileEnd(dst []byte, e FileEnd) []byte {
	return appendWords(dst, []uint32{MarkerFileEnd, fileEndWords, e.Date, e.Time, e.EventsInFile, e.DataInFileMB, e.EventsInRun, e.DataInRunMB, e.Status, MarkerEndOfFile})
}

// appendSeparator appends the data separator of an event of n bytes with
// data block number block.
func appendSeparator(dst []byte, block uint32, n int) []byte {
	return appendWords(dst, []uint32{MarkerSeparator, separatorWords, block, uint32(n)})
}

// reader reads a BESIII raw stream record by record.
type reader struct {
	br   *bufio.Reader
	off  int64
	buf  []byte
	head *Head
	end  *FileEnd
}

// item is one event of the stream: its data block number, its bytes and
// where they start.
type item struct {
	Block uint32
	Off   int64 // of the event (after its separator)
	Bytes []byte
	Bare  bool // no data separator before it (Block is NoSeparator)
}

func newReader(r io.Reader) *reader { return &reader{br: bufio.NewReaderSize(r, 1<<16)} }

// words reads n words at the stream's offset.
func (r *reader) words(n uint64, field string) ([]uint32, error) {
	var err error
	if r.buf, err = summary.ReadRecord(r.br, r.buf, 4*n, r.off, fmtFile); err != nil {
		return nil, schemas.Errorf(fmtFile, field, r.off, schemas.ErrTruncated, "need %d bytes, the stream ends first", 4*n)
	}
	w := make([]uint32, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(r.buf[4*i:])
	}
	r.off += int64(4 * n)
	return w, nil
}

// bare reads an event that no data separator announces (a bare stream of
// eformat v3.0 events, as ATLAS-derived DAQs write them without BESIII's
// file records): its size is its own size word.
func (r *reader) bare() (item, error) {
	b, _ := r.br.Peek(8)
	if len(b) < 8 {
		return item{}, schemas.Errorf(fmtEvent, "full event size", r.off, schemas.ErrTruncated, "%d bytes left, less than a marker and a size", len(b))
	}
	n := 4 * uint64(binary.LittleEndian.Uint32(b[4:]))
	if n < 8 {
		return item{}, schemas.Errorf(fmtEvent, "full event size", r.off+4, schemas.ErrInconsistent, "%d bytes is no eformat event", n)
	}
	it := item{Block: NoSeparator, Off: r.off, Bare: true}
	var err error
	if r.buf, err = summary.ReadRecord(r.br, r.buf, n, r.off, fmtFile); err != nil {
		return item{}, err
	}
	it.Bytes = r.buf
	r.off += int64(n)
	return it, nil
}

// readHead reads the file start records when the stream starts with them.
func (r *reader) readHead() error {
	b, _ := r.br.Peek(4)
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != MarkerFileStart {
		return nil
	}
	start := r.off
	w, err := r.words(fileStartWords, "FILE_START")
	if err != nil {
		return err
	}
	if w[1] != fileStartWords {
		return schemas.Errorf(fmtFile, "FILE_START record_size", start+4, schemas.ErrInconsistent, "want %d words, have %d", fileStartWords, w[1])
	}
	nameAt := r.off
	fn, err := r.words(2, "FILE_NAME")
	if err != nil {
		return err
	}
	if fn[0] != MarkerFileName {
		return schemas.Errorf(fmtFile, "FILE_NAME marker", nameAt, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", MarkerFileName, fn[0])
	}
	w = append(w, fn...)
	for i := range 2 {
		n := uint64(w[len(w)-1])
		if n > 1<<16 {
			return schemas.Errorf(fmtFile, "FILE_NAME length", r.off-4, schemas.ErrSizeOverflow, "a name of %d bytes", n)
		}
		s, err := r.words((n+3)/4, "FILE_NAME")
		if err != nil {
			return err
		}
		w = append(w, s...)
		if i == 0 {
			l, err := r.words(1, "FILE_NAME length2")
			if err != nil {
				return err
			}
			w = append(w, l...)
		}
	}
	rpAt := r.off
	rp, err := r.words(runParamsWords, "RUN_PARAMS")
	if err != nil {
		return err
	}
	if rp[0] != MarkerRunParams || rp[1] != runParamsWords {
		return schemas.Errorf(fmtFile, "RUN_PARAMS", rpAt, schemas.ErrBadMagic, "want 0x%08x with record size %d, have 0x%08x, %d", MarkerRunParams, runParamsWords, rp[0], rp[1])
	}
	h, err := DecodeHead(append(w, rp...))
	if err != nil {
		return schemas.WithOffset(err, start)
	}
	r.head = &h
	return nil
}

// next reads the next event; io.EOF at the stream's end (after a FILE_END
// record or without one).
func (r *reader) next() (item, error) {
	b, _ := r.br.Peek(4)
	if len(b) == 0 {
		return item{}, io.EOF
	}
	if r.end != nil {
		return item{}, schemas.Errorf(fmtFile, "after FILE_END", r.off, schemas.ErrInconsistent, "bytes after the FILE_END record")
	}
	if len(b) < 4 {
		return item{}, schemas.Errorf(fmtFile, "record", r.off, schemas.ErrTruncated, "%d bytes left, less than a word", len(b))
	}
	at := r.off
	switch m := binary.LittleEndian.Uint32(b); m {
	case MarkerFullEvent:
		return r.bare()
	case MarkerSeparator:
	case MarkerFileEnd:
		w, err := r.words(fileEndWords, "FILE_END")
		if err != nil {
			return item{}, err
		}
		if w[1] != fileEndWords || w[9] != MarkerEndOfFile {
			return item{}, schemas.Errorf(fmtFile, "FILE_END", at, schemas.ErrBadHeader, "want record size %d and 0x%08x last, have %d and 0x%08x", fileEndWords, MarkerEndOfFile, w[1], w[9])
		}
		r.end = &FileEnd{Date: w[2], Time: w[3], EventsInFile: w[4], DataInFileMB: w[5], EventsInRun: w[6], DataInRunMB: w[7], Status: w[8]}
		return r.next()
	case swap(MarkerSeparator), swap(MarkerFileStart):
		return item{}, schemas.Errorf(fmtFile, "record marker", at, schemas.ErrUnsupported, "a byte-swapped (big-endian) file; BESIII writes little-endian")
	default:
		return item{}, schemas.Errorf(fmtFile, "record marker", at, schemas.ErrBadMagic, "want a data separator 0x%08x, FILE_END 0x%08x or an eformat v3.0 full event 0x%08x, have 0x%08x", MarkerSeparator, MarkerFileEnd, MarkerFullEvent, m)
	}
	sep, err := r.words(separatorWords, "DATA_SEPARATOR")
	if err != nil {
		return item{}, err
	}
	if sep[1] != separatorWords {
		return item{}, schemas.Errorf(fmtFile, "DATA_SEPARATOR record_size", at+4, schemas.ErrInconsistent, "want %d words, have %d", separatorWords, sep[1])
	}
	n := uint64(sep[3])
	if n%4 != 0 || n < 8 {
		return item{}, schemas.Errorf(fmtFile, "DATA_SEPARATOR data_block_size", at+12, schemas.ErrInconsistent, "%d bytes is no eformat event", n)
	}
	it := item{Block: sep[2], Off: r.off}
	if r.buf, err = summary.ReadRecord(r.br, r.buf, n, r.off, fmtFile); err != nil {
		return item{}, err
	}
	if size := 4 * uint64(binary.LittleEndian.Uint32(r.buf[4:])); binary.LittleEndian.Uint32(r.buf) == MarkerFullEvent && size != n {
		return item{}, schemas.Errorf(fmtFile, "DATA_SEPARATOR data_block_size", at+12, schemas.ErrInconsistent, "%d bytes, the event that follows has %d", n, size)
	}
	it.Bytes = r.buf
	r.off += int64(n)
	return it, nil
}
