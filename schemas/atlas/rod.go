package atlas

import (
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// ROD is a decoded ROD fragment: what one readout driver sends for one
// event. Status and Data are copies in word values, independent of the
// byte order the fragment had.
type ROD struct {
	Version         uint32 // RODVersion (0x0301xxxx)
	SourceID        uint32
	Run             uint32
	L1ID            uint32 // extended L1ID: ECR count << 24 | L1ID
	BCID            uint32
	L1TriggerType   uint32
	DetEventType    uint32
	Status          []uint32
	Data            []uint32
	StatusAfterData bool // status position 1: status words follow the data
}

// Words is the ROD's size in words: 12 + nstatus + ndata.
func (r *ROD) Words() int { return RODHeaderSize + len(r.Status) + len(r.Data) + RODTrailerSize }

// AppendWords appends the ROD's words (header, status and data in the
// order StatusAfterData says, trailer) to dst.
func (r *ROD) AppendWords(dst []uint32) []uint32 {
	dst = append(dst, MarkerROD, RODHeaderSize, r.Version, r.SourceID, r.Run, r.L1ID, r.BCID, r.L1TriggerType, r.DetEventType)
	pos := uint32(0)
	if r.StatusAfterData {
		dst = append(append(dst, r.Data...), r.Status...)
		pos = 1
	} else {
		dst = append(append(dst, r.Status...), r.Data...)
	}
	return append(dst, uint32(len(r.Status)), uint32(len(r.Data)), pos)
}

// AppendROD appends r as a ROD fragment in byte order o to dst.
func AppendROD(dst []byte, r *ROD, o ByteOrder) []byte {
	return appendWords(dst, o, r.AppendWords(nil)...)
}

// DecodeROD decodes b as exactly one ROD fragment (the payload of a ROB), in
// whichever byte order its marker shows. Errors: *schemas.DecodeError
// wrapping ErrTruncated (under 12 words), ErrBadMagic, ErrBadHeader (b not
// whole words, header size not 9, status position not 0 or 1),
// ErrBadVersion, ErrSizeOverflow (nstatus + ndata beyond the fragment) or
// ErrInconsistent (nstatus + ndata short of it).
func DecodeROD(b []byte) (ROD, ByteOrder, error) {
	o, err := order(b, MarkerROD, fmtROD)
	if err != nil {
		return ROD{}, nil, err
	}
	if len(b)%4 != 0 {
		return ROD{}, nil, schemas.Errorf(fmtROD, "fragment", 0, schemas.ErrBadHeader, "%d bytes is not a whole number of 32-bit words", len(b))
	}
	r, err := decodeROD(toWords(b, o), 0)
	return r, o, err
}

// decodeROD decodes the ROD words w found at byte offset base.
func decodeROD(w []uint32, base int64) (ROD, error) {
	at := func(i int) int64 { return base + 4*int64(i) }
	n := len(w)
	if n < RODHeaderSize+RODTrailerSize {
		return ROD{}, schemas.Errorf(fmtROD, "fragment", base, schemas.ErrTruncated, "a ROD needs at least %d words, have %d", RODHeaderSize+RODTrailerSize, n)
	}
	if w[0] != MarkerROD {
		return ROD{}, schemas.Errorf(fmtROD, "marker", base, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", MarkerROD, w[0])
	}
	if w[1] != RODHeaderSize {
		return ROD{}, schemas.Errorf(fmtROD, "header_size", at(1), schemas.ErrBadHeader, "want %d words, have %d", RODHeaderSize, w[1])
	}
	if w[2]>>16 != rodMajor {
		return ROD{}, schemas.Errorf(fmtROD, "version", at(2), schemas.ErrBadVersion, "want major 0x%04x, have 0x%08x", rodMajor, w[2])
	}
	nstatus, ndata, pos := uint64(w[n-3]), uint64(w[n-2]), w[n-1]
	switch sum := RODHeaderSize + RODTrailerSize + nstatus + ndata; {
	case sum > uint64(n):
		return ROD{}, schemas.Errorf(fmtROD, "trailer.nstatus", at(n-3), schemas.ErrSizeOverflow, "nstatus %d + ndata %d need %d words, fragment has %d", nstatus, ndata, sum, n)
	case sum < uint64(n):
		return ROD{}, schemas.Errorf(fmtROD, "trailer.nstatus", at(n-3), schemas.ErrInconsistent, "nstatus %d + ndata %d make %d words, fragment has %d", nstatus, ndata, sum, n)
	}
	if pos > 1 {
		return ROD{}, schemas.Errorf(fmtROD, "trailer.status_position", at(n-1), schemas.ErrBadHeader, "want 0 or 1, have %d", pos)
	}
	body := w[RODHeaderSize : n-RODTrailerSize]
	r := ROD{
		Version: w[2], SourceID: w[3], Run: w[4], L1ID: w[5], BCID: w[6], L1TriggerType: w[7], DetEventType: w[8],
		StatusAfterData: pos == 1,
	}
	if r.StatusAfterData {
		r.Data, r.Status = body[:ndata:ndata], body[ndata:]
	} else {
		r.Status, r.Data = body[:nstatus:nstatus], body[nstatus:]
	}
	return r, nil
}

// String summarises the ROD for logs and inspect output.
func (r *ROD) String() string {
	return fmt.Sprintf("ROD source 0x%08x run %d L1ID 0x%08x BCID %d: %d status, %d data words", r.SourceID, r.Run, r.L1ID, r.BCID, len(r.Status), len(r.Data))
}
