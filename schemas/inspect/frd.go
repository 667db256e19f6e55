package inspect

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// inspectFRD reads an FRD file (with or without its "RAW_" header) and
// checks every event checksum and every FED's CRC-16.
func inspectFRD(r io.Reader, maxEvents int) (*Report, error) {
	rep := &Report{Format: CMSFRD, Checksums: Checksums{What: "FRD event adler32/crc32c and FED CRC-16"},
		CMS: &CMSReport{Versions: map[int]int{}}}
	fr, err := cms.NewFileReader(r)
	if err != nil {
		return rep, err
	}
	if h := fr.Header(); h != nil {
		rep.CMS.FileHeader = &FRDFileHeader{Version: h.Version, DataType: h.DataType, EventCount: h.EventCount, Run: h.Run, Lumi: h.Lumi, FileSize: h.FileSize}
	}
	feds, runs, lumis := map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
	var sizes []int
	for {
		off := fr.Offset()
		e, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return finishFRD(rep, feds, runs, lumis, sizes), err
		}
		d := EventDetail{Kind: "event", Index: rep.Events, Offset: off, Bytes: int(fr.Offset() - off), EventID: e.Event, Run: e.Run, ChecksumOK: err == nil}
		if err == nil {
			rep.Checksums.Valid++
		} else {
			rep.Checksums.Bad++
		}
		var badFEDs, errFEDs []uint16
		werr := cms.WalkFEDs(e.Data, func(_ int, f cms.FED) bool {
			feds[uint32(f.SourceID)] = true
			d.Sources = append(d.Sources, uint32(f.SourceID))
			rep.CMS.FEDs++
			if f.CRCValid() {
				rep.Checksums.Valid++
			} else {
				rep.Checksums.Bad++
				rep.CMS.FEDCRCBad++
				badFEDs = append(badFEDs, f.SourceID)
			}
			if f.WrongFEDID || f.SlinkError {
				rep.CMS.FEDErrorBits++
				errFEDs = append(errFEDs, f.SourceID)
			}
			return true
		})
		if werr != nil {
			// Offsets in the FED data are relative to the data, which
			// starts after the event's header.
			return finishFRD(rep, feds, runs, lumis, sizes), schemas.WithOffset(werr, off+int64(cms.FRDHeaderSize(e.Version)))
		}
		slices.Reverse(d.Sources) // the walk went last to first; list them in data order
		d.Note = fmt.Sprintf("v%d lumi %d, %s", e.Version, e.Lumi, plural(len(d.Sources), "FED"))
		if len(badFEDs) > 0 {
			d.Note += fmt.Sprintf(", bad CRC-16 in FEDs %v", badFEDs)
		}
		if len(errFEDs) > 0 {
			d.Note += fmt.Sprintf(", R/F error bits in FEDs %v", errFEDs)
		}
		if !d.ChecksumOK {
			d.Note += ", bad event checksum"
		}
		if rep.Events == 0 {
			rep.CMS.EventRange[0] = e.Event
		}
		rep.CMS.EventRange[1] = e.Event
		rep.CMS.Versions[int(e.Version)]++
		runs[e.Run], lumis[e.Lumi] = true, true
		rep.Events++
		rep.Records++
		rep.Bytes += int64(d.Bytes)
		sizes = append(sizes, d.Bytes)
		rep.addRow(d, maxEvents)
	}
	return finishFRD(rep, feds, runs, lumis, sizes), nil
}

func finishFRD(rep *Report, feds, runs, lumis map[uint32]bool, sizes []int) *Report {
	rep.Sources = sortedKeys(feds)
	rep.NumSources = len(rep.Sources)
	rep.CMS.Runs, rep.CMS.Lumis = sortedKeys(runs), sortedKeys(lumis)
	rep.RecordBytes = sizeStats(sizes)
	return rep
}
