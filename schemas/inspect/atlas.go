package inspect

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/atlas"
)

// inspectATLAS reads a stream of eformat full events (or of bare ROBs),
// each in whichever byte order its marker shows.
func inspectATLAS(br *bufio.Reader, f Format, maxEvents int) (*Report, error) {
	rep := &Report{Format: f, Checksums: Checksums{What: "eformat payload checksums of full events and ROBs"},
		ATLAS: &ATLASReport{ChecksumTypes: map[string]int{}}}
	marker, format := atlas.MarkerFullEvent, "atlas-full-event"
	if f == ATLASROB {
		marker, format = atlas.MarkerROB, "atlas-rob"
	}
	sources, runs := map[uint32]bool{}, map[uint32]bool{}
	var (
		sizes      []int
		buf        []byte
		off        int64
		err        error
		start, end time.Time
	)
	count := func(ck atlas.ChecksumType, ok bool) {
		rep.ATLAS.ChecksumTypes[ck.String()]++
		switch {
		case ck == atlas.ChecksumNone:
			rep.Checksums.Absent++
		case ok:
			rep.Checksums.Valid++
		default:
			rep.Checksums.Bad++
		}
	}
	for {
		head, perr := br.Peek(8)
		if len(head) == 0 && perr == io.EOF {
			break
		}
		o := atlas.DetectOrder(head, marker)
		if o == nil {
			err = schemas.Errorf(format, "marker", off, schemas.ErrBadMagic, "want 0x%08x in either byte order, have % x", marker, head[:min(4, len(head))])
			break
		}
		if len(head) < 8 {
			err = schemas.Errorf(format, "fragment_size", off+4, schemas.ErrTruncated, "need 8 bytes, the file ends after %d", len(head))
			break
		}
		if rep.Records == 0 {
			rep.ATLAS.ByteOrder = orderName(o)
		}
		// Read at least the 8 bytes peeked, so that a size word too small
		// for a header is reported as such by the decoder.
		if buf, err = readRecord(br, buf, max(4*uint64(o.Uint32(head[4:])), 8), off, format); err != nil {
			break
		}
		d := EventDetail{Kind: "event", Index: rep.Records, Offset: off, Bytes: len(buf)}
		var robs []atlas.ROB
		if f == ATLASROB {
			var r atlas.ROB
			r, _, _, err = atlas.DecodeROB(buf)
			robs, d.Kind = []atlas.ROB{r}, "ROB fragment"
			d.ChecksumOK = err == nil
			if rod, rerr := r.ROD(); rerr == nil {
				d.EventID, d.Run = uint64(rod.L1ID), rod.Run
			}
		} else {
			var e atlas.FullEvent
			e, _, _, err = atlas.DecodeFullEvent(buf)
			robs = e.ROBs
			if err == nil || errors.Is(err, schemas.ErrCRCMismatch) {
				count(e.ChecksumType, e.ChecksumOK)
				d.EventID, d.Run, d.ChecksumOK = uint64(e.GlobalID), e.RunNumber, err == nil
				d.Note = fmt.Sprintf("lvl1_id 0x%08x bcid %d lumi block %d, %s", e.L1ID, e.BCID, e.LumiBlock, plural(len(e.ROBs), "ROB"))
				runs[e.RunNumber] = true
				t := time.Unix(int64(e.BCTimeSeconds), int64(e.BCTimeNanoseconds)).UTC()
				if rep.Events == 0 || t.Before(start) {
					start = t
				}
				if rep.Events == 0 || t.After(end) {
					end = t
				}
				if rep.Events == 0 {
					rep.ATLAS.GlobalIDRange[0] = e.GlobalID
				}
				rep.ATLAS.GlobalIDRange[1] = e.GlobalID
				if len(e.Status) > 0 && e.Status[0]&0xFFFF != 0 {
					rep.ATLAS.StatusSet++
				}
			}
		}
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			err = schemas.WithOffset(err, off)
			break
		}
		err = nil
		var bad []uint32
		for i := range robs {
			r := &robs[i]
			count(r.ChecksumType, r.ChecksumOK)
			sources[r.SourceID] = true
			d.Sources = append(d.Sources, r.SourceID)
			if !r.ChecksumOK {
				bad = append(bad, r.SourceID)
			}
			if r.GenericStatus() != 0 {
				rep.ATLAS.StatusSet++
			}
		}
		if len(bad) > 0 {
			d.Note += fmt.Sprintf(", bad checksum in ROBs %#x", bad)
		}
		rep.ATLAS.ROBs += len(robs)
		rep.Records++
		rep.Events++
		rep.Bytes += int64(len(buf))
		sizes = append(sizes, len(buf))
		rep.addRow(d, maxEvents)
		off += int64(len(buf))
	}
	if f == ATLASFullEvent && rep.Events > 0 {
		rep.Start, rep.End = &start, &end
	}
	rep.Sources = sortedKeys(sources)
	rep.NumSources = len(rep.Sources)
	rep.ATLAS.Runs = sortedKeys(runs)
	rep.RecordBytes = sizeStats(sizes)
	return rep, err
}

func orderName(o binary.ByteOrder) string {
	if o == binary.ByteOrder(binary.BigEndian) {
		return "big-endian"
	}
	return "little-endian"
}
