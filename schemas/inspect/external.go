package inspect

import (
	"slices"

	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// fromLHCb fills the common fields from an LHCb report and keeps it whole
// in the LHCb section.
func fromLHCb(l *lhcb.Report) *Report {
	if l == nil {
		return nil
	}
	rep := &Report{
		Format: Format(l.Format), Bytes: l.Bytes, Records: l.Records, Events: l.Events, NumSources: l.Sources,
		RecordBytes: SizeStats{Min: l.RecordBytes.Min, Median: l.RecordBytes.Median, Max: l.RecordBytes.Max},
		Checksums:   Checksums{What: "MDF record checksums", Valid: l.Checksums.Valid, Bad: l.Checksums.Bad, Absent: l.Checksums.Absent},
		LHCb:        l,
	}
	// The rows move to the common Detail, which every format fills.
	if len(l.Detail) > 0 {
		rep.Detail, l.Detail = &Detail{Of: "events", LHCb: l.Detail}, nil
	}
	return rep
}

// fromVDIF fills the common fields from a VDIF or Mark 5B report (sources
// are the thread ids; frames are both records and events) and keeps it in
// the Baseband section, its frame details moved to Detail.
func fromVDIF(v *vdif.Report) *Report {
	if v == nil {
		return nil
	}
	rep := &Report{Format: Format(v.Format), Bytes: v.Bytes, Records: v.Frames, Events: v.Frames, Start: v.Start, End: v.End, Baseband: v}
	if len(v.Details) > 0 {
		rep.Detail, v.Details = &Detail{Of: "frames", Frames: v.Details}, nil
	}
	for _, t := range v.Threads {
		rep.Sources = append(rep.Sources, uint32(t))
	}
	rep.NumSources = len(rep.Sources)
	if rep.Format == Mark5B {
		rep.NumSources = 1 // one recorder stream
		rep.Checksums = Checksums{What: "Mark 5B time-code CRC16", Valid: v.CRCValid, Bad: v.Frames - v.CRCValid}
	} else {
		rep.Checksums = Checksums{What: "VDIF frames carry no checksum", Absent: v.Frames}
	}
	// Frame sizes come as a histogram; take min, median and max from it.
	sizes := make([]int, 0, len(v.FrameSizes))
	for s := range v.FrameSizes {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	if len(sizes) > 0 {
		rep.RecordBytes.Min, rep.RecordBytes.Max = sizes[0], sizes[len(sizes)-1]
		seen := 0
		for _, s := range sizes {
			seen += v.FrameSizes[s]
			if 2*seen > v.Frames {
				rep.RecordBytes.Median = s
				break
			}
		}
	}
	return rep
}
