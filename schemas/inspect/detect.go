// Package inspect recognises every data format sluice reads from its bytes
// alone (never from a file name) and summarises a file of it for
// `sluice inspect`: what it is, how many records and events, which sources,
// the size distribution, checksum validity, time range, and per-event
// detail. The decoding itself is done by the format packages (schemas,
// schemas/cms, schemas/atlas, schemas/lhcb, schemas/vdif); this package
// only reads through them and counts.
package inspect

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
	"github.com/sluice-daq/sluice/schemas/cms"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// Format names a recognised data format; it is what Report.Format holds.
type Format string

const (
	Unknown        Format = ""
	NativeFragment Format = "sluice-fragment"  // schemas.DecodeFragment records
	NativeMFP      Format = "sluice-mfp"       // schemas.DecodeMFP packets
	LHCbMDF        Format = lhcb.FormatMDF     // LHCb MDF records of raw banks
	LHCbMEP        Format = lhcb.FormatMEP     // LHCb MDF records holding MEPs
	VDIF           Format = vdif.FormatVDIF    // VDIF frames
	Mark5B         Format = vdif.FormatMark5B  // Mark 5B frames
	CMSFRD         Format = "cms-frd"          // FRD events, with or without a "RAW_" file header
	ATLASFullEvent Format = "atlas-full-event" // eformat full events, either byte order
	ATLASROB       Format = "atlas-rob"        // a stream of bare eformat ROB fragments
	ArrowIPC       Format = "arrow-ipc"        // an Arrow IPC file, e.g. from `sluice store export --format arrow`
	Parquet        Format = "parquet"          // a Parquet file, e.g. from `sluice store export --format parquet`
)

// HeadBytes is how many leading bytes Detect wants to decide well: VDIF
// needs a whole frame and the next header.
const HeadBytes = vdif.DetectBytes

// Detect says which format the stream starting with head is in, or
// Unknown. The checks go from the most specific sign to the weakest:
// the table files' leading magics ("ARROW1" and its two bytes of padding,
// "PAR1"; their closing magics are checked when the file is read), native
// magics ("SLFG", "SLMP" with their version), the FRD file id
// "RAW_", eformat markers (in either byte order), an LHCb MDF header, a
// plausible FRD event (version 3..6 and, when head holds its data, a FED
// block that walks back cleanly; else a FED header marker where the data
// starts), then VDIF and Mark 5B (vdif.Detect).
func Detect(head []byte) Format {
	if len(head) >= 8 && string(head[:8]) == arrowMagic+"\x00\x00" {
		return ArrowIPC
	}
	if len(head) >= 4 && string(head[:4]) == parquetMagic {
		return Parquet
	}
	if len(head) >= 5 {
		switch binary.LittleEndian.Uint32(head) {
		case schemas.FragmentMagic:
			if head[4] == schemas.FragmentVersion {
				return NativeFragment
			}
		case schemas.MFPMagic:
			if head[4] == schemas.MFPVersion {
				return NativeMFP
			}
		}
	}
	if len(head) >= 8 && string(head[:7]) == cms.FRDFileMagic+"000" {
		// "RAW_000n": an FRD file id, even with a header the reader will
		// refuse; Inspect then says what is wrong with it, and where.
		return CMSFRD
	}
	if atlas.DetectOrder(head, atlas.MarkerFullEvent) != nil {
		return ATLASFullEvent
	}
	if atlas.DetectOrder(head, atlas.MarkerROB) != nil {
		return ATLASROB
	}
	if lhcb.DetectMEP(head) {
		return LHCbMEP
	}
	if lhcb.DetectMDF(head) {
		return LHCbMDF
	}
	if plausibleFRD(head) {
		return CMSFRD
	}
	return Format(vdif.Detect(head))
}

// plausibleFRD reports whether head starts with an FRD event (no file
// header): a known version and a data size that is a whole number of
// 64-bit words; when head holds the data, its checksum must match or, for
// a non-empty event, it must walk back cleanly as FED fragments; otherwise
// the data's first word must carry the FED header marker.
func plausibleFRD(head []byte) bool {
	e, hs, size, err := cms.DecodeFRDHeader(head)
	if err != nil || size%cms.FEDWordSize != 0 || size > cms.MaxFRDEventSize {
		return false
	}
	if e.Version == 6 && e.Flags&^cms.FRDFlagGenData != 0 {
		return false // undefined v6 flags: more likely another format
	}
	if end := hs + int(size); end <= len(head) {
		data := head[hs:end]
		return cms.FRDChecksum(e.Version, data) == e.Checksum ||
			size > 0 && cms.WalkFEDs(data, func(int, cms.FED) bool { return true }) == nil
	}
	return len(head) >= hs+8 && head[hs+7]>>4 == cms.FEDHeaderMarker
}
