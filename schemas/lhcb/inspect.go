package lhcb

import (
	"encoding/binary"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// Format names, as Report.Format and the formats' Name give them.
const (
	FormatMDF = "lhcb-mdf"
	FormatMEP = "lhcb-mep"
)

// DetectMDF reports whether head, the first bytes of a stream (48 are
// enough), starts with an MDF record of raw banks: a valid MDF header
// (known version, equal size words, matching subheader length) whose body,
// when uncompressed and present in head, starts with a raw bank magic.
func DetectMDF(head []byte) bool {
	h, ok := detectHeader(head)
	if !ok || h.BodyType() != DataTypeBanks {
		return false
	}
	at := h.Len()
	return h.Compressed() || h.Size == uint32(at) || len(head) < at+2 ||
		binary.LittleEndian.Uint16(head[at:]) == BankMagic
}

// DetectMEP reports whether head starts with an MDF record holding a MEP
// (header version 3, data type 2).
func DetectMEP(head []byte) bool {
	h, ok := detectHeader(head)
	return ok && h.BodyType() == DataTypeMEP
}

func detectHeader(head []byte) (Header, bool) {
	h, err := DecodeHeader(head)
	return h, err == nil
}

// Report summarizes an LHCb file for `sluice inspect`.
type Report struct {
	Format         string           `json:"format"` // FormatMDF or FormatMEP (from the first record)
	Bytes          int64            `json:"bytes"`
	Records        int              `json:"records"`
	Events         int              `json:"events"`
	Sources        int              `json:"readout_sources"`     // distinct (bank type, source id) readout sources
	SourceIDs      int              `json:"distinct_source_ids"` // distinct LHCb source ids, any bank type
	Banks          int              `json:"banks"`
	BanksByType    map[uint8]int    `json:"banks_by_type"`
	HeaderVersions map[uint8]int    `json:"header_versions"`
	Compressed     int              `json:"compressed_records"`
	RecordBytes    format.SizeStats `json:"record_bytes"`
	Checksums      ChecksumCounts   `json:"checksums"`
	Runs           []uint32         `json:"runs"`                      // ascending; from ODIN, else the MDF header
	EventNumbers   [2]uint64        `json:"event_number_range"`        // first and last ODIN event number seen (0 without ODIN)
	PackingFactors []int            `json:"packing_factors,omitempty"` // MEP files: distinct packing factors
	Detail         []EventDetail    `json:"detail,omitempty"`
}

// ChecksumCounts counts records by checksum status.
type ChecksumCounts struct {
	Valid  int `json:"valid"`
	Bad    int `json:"bad"`
	Absent int `json:"absent"` // stored checksum 0: not computed by the writer
}

// EventDetail describes one event. Run, orbit and bunch come from the ODIN
// bank when there is one, else from the MDF header. Sizes are in bytes:
// RecordBytes is the whole MDF record holding the event (header included;
// for an event from a MEP, the MEP record shared by its events), BankBytes
// the event's raw banks (for a MEP event, rebuilt with bank headers).
type EventDetail struct {
	Index       uint64 `json:"index"`
	Offset      int64  `json:"offset"`          // of the record holding the event
	InRecord    int    `json:"index_in_record"` // 0 for MDF; the event's position in its MEP, from 0
	RecordBytes int    `json:"record_bytes"`
	HasODIN     bool   `json:"odin"`
	EventNumber uint64 `json:"event_number"`
	Run         uint32 `json:"run"`
	Orbit       uint32 `json:"orbit"`
	Bunch       uint32 `json:"bunch"`
	GPSTime     uint64 `json:"gps_time_us,omitempty"`
	Banks       int    `json:"banks"`
	BankBytes   int    `json:"bank_bytes"`
}

// Inspect reads the MDF or MEP stream r and summarizes it, with per-event
// detail for the first maxEvents events. Checksum mismatches are counted,
// not fatal. On a decode error it returns the report of what was read so
// far together with the error (*schemas.DecodeError with the stream offset).
func Inspect(r io.Reader, maxEvents int) (*Report, error) {
	rep := &Report{BanksByType: map[uint8]int{}, HeaderVersions: map[uint8]int{}}
	sources, ids, runs := map[uint32]bool{}, map[uint16]bool{}, map[uint32]bool{}
	var (
		sizes   []int
		banks   []Bank
		lastRec = int64(-1)
		inRec   int // events of the current record so far
		pfs     = map[int]bool{}
	)
	err := forEachEvent(r, ChecksumReport, func(ev *Event) error {
		rec := ev.Record
		if rec.Offset != lastRec {
			lastRec, inRec = rec.Offset, 0
			if rep.Records == 0 {
				rep.Format = FormatMDF
				if rec.Header.BodyType() == DataTypeMEP {
					rep.Format = FormatMEP
				}
			}
			rep.Records++
			rep.Bytes += int64(rec.Header.Size)
			sizes = append(sizes, int(rec.Header.Size))
			rep.HeaderVersions[rec.Header.Version]++
			if rec.Header.Compressed() {
				rep.Compressed++
			}
			switch rec.Checksum {
			case ChecksumValid:
				rep.Checksums.Valid++
			case ChecksumBad:
				rep.Checksums.Bad++
			case ChecksumAbsent:
				rep.Checksums.Absent++
			}
			if rec.Header.BodyType() == DataTypeMEP && len(rec.Body) >= 4 {
				pfs[int(binary.LittleEndian.Uint16(rec.Body[2:]))] = true
			}
		}
		var err error
		if banks, err = AppendBanks(banks[:0], ev.Body); err != nil {
			return schemas.WithOffset(err, ev.Offset+int64(ev.Header.Len()))
		}
		d := EventDetail{Index: ev.Index, Offset: ev.Offset, InRecord: inRec, RecordBytes: int(rec.Header.Size),
			Run: ev.Header.Run, Orbit: ev.Header.Orbit, Bunch: ev.Header.Bunch, Banks: len(banks), BankBytes: len(ev.Body)}
		inRec++
		for i := range banks {
			b := &banks[i]
			rep.BanksByType[b.Type]++
			sources[b.Key()] = true
			ids[b.SourceID] = true
			if b.Type == BankTypeODIN && !d.HasODIN {
				if o, err := DecodeODIN(b.Version, b.Data); err == nil {
					d.HasODIN, d.EventNumber, d.Run, d.Orbit, d.Bunch, d.GPSTime = true, o.EventNumber, o.Run, o.Orbit, uint32(o.BunchID), o.GPSTime
				}
			}
		}
		if d.HasODIN {
			if rep.EventNumbers == [2]uint64{} {
				rep.EventNumbers[0] = d.EventNumber
			}
			rep.EventNumbers[1] = d.EventNumber
		}
		if ev.Header.Version == 1 || ev.Header.Version == 3 || d.HasODIN {
			runs[d.Run] = true
		}
		rep.Banks += len(banks)
		rep.Events++
		if len(rep.Detail) < maxEvents {
			rep.Detail = append(rep.Detail, d)
		}
		return nil
	})
	rep.Sources, rep.SourceIDs = len(sources), len(ids)
	for run := range runs {
		rep.Runs = append(rep.Runs, run)
	}
	slices.Sort(rep.Runs)
	for pf := range pfs {
		rep.PackingFactors = append(rep.PackingFactors, pf)
	}
	slices.Sort(rep.PackingFactors)
	rep.RecordBytes = summary.SizeStatsOf(sizes)
	return rep, err
}
