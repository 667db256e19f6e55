package native

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// inspect reads a stream of native fragments and multi-fragment packets
// (either may follow the other) and checks every fragment's CRC-32C.
func inspect(br *format.Stream, name string, maxEvents int) (*format.Report, error) {
	rep := &format.Report{Format: name, Checksums: format.Checksums{What: "CRC-32C of each fragment payload"}}
	sources, events := map[uint32]bool{}, map[uint64]bool{}
	rows := summary.Records{Max: maxEvents}
	var (
		sizes []int
		buf   []byte
		off   int64
		err   error
	)
	for {
		head, perr := br.Peek(32)
		if len(head) == 0 && perr == io.EOF {
			break
		}
		var (
			kind  string
			total uint64
		)
		if kind, total, err = recordSize(head, off); err != nil {
			break
		}
		if buf, err = summary.ReadRecord(br, buf, total, off, kind); err != nil {
			break
		}
		d := summary.Record{Kind: "fragment", Index: rep.Records, Offset: off, Bytes: len(buf), ChecksumOK: true}
		if kind == "mfp" {
			var p schemas.MFP
			if p, _, err = schemas.DecodeMFP(buf); err != nil {
				err = schemas.WithOffset(err, off)
				break
			}
			sources[p.SourceID] = true
			d.Kind, d.EventID, d.N, d.Sources = "packet", p.FirstEventID, int(p.N), []uint32{p.SourceID}
			bad := 0
			p.Fragments(func(_ int, id uint64, crc uint32, payload []byte) bool {
				events[id] = true
				if schemas.Checksum(payload) == crc {
					rep.Checksums.Valid++
				} else {
					rep.Checksums.Bad++
					bad++
				}
				return true
			})
			d.ChecksumOK = bad == 0
			// A packet of N fragments holds events FirstEventID .. +N-1.
			if p.N > 0 {
				d.Note = fmt.Sprintf("event ids %d..%d", p.FirstEventID, p.FirstEventID+uint64(p.N)-1)
			}
			d.Note = strings.TrimPrefix(d.Note+flagNote(p.Flags), ", ")
			if bad > 0 {
				d.Note += fmt.Sprintf(", %s with a bad CRC-32C", format.Plural(bad, "fragment"))
			}
		} else {
			var fr schemas.Fragment
			if fr, _, err = schemas.DecodeFragment(buf); err != nil {
				err = schemas.WithOffset(err, off)
				break
			}
			sources[fr.SourceID], events[fr.EventID] = true, true
			d.EventID, d.N, d.Sources, d.ChecksumOK = fr.EventID, 1, []uint32{fr.SourceID}, fr.CRCValid()
			if d.ChecksumOK {
				rep.Checksums.Valid++
			} else {
				rep.Checksums.Bad++
			}
			d.Note = strings.TrimPrefix(flagNote(fr.Flags), ", ")
		}
		rep.Records++
		rep.Bytes += int64(len(buf))
		sizes = append(sizes, len(buf))
		rows.Add(d)
		off += int64(len(buf))
	}
	rep.Events = len(events)
	rep.Sources = summary.SortedKeys(sources)
	rep.NumSources = len(rep.Sources)
	rep.RecordBytes = summary.SizeStatsOf(sizes)
	rep.Detail = rows.Detail(table)
	return rep, err
}

// table writes native fragment and packet rows as text.
func table(rows []summary.Record, row func(cells ...any)) {
	row("#", "kind", "offset", "record bytes", "source", "(first) event id", "n", "CRC-32C", "note")
	for _, e := range rows {
		row(e.Index, e.Kind, e.Offset, e.Bytes, schemas.FormatSourceList(e.Sources), e.EventID, e.N, e.Checksum(), e.Note)
	}
}

// flagNote names the fragment flags that are set, as ", flags a|b".
func flagNote(f schemas.FragmentFlag) string {
	var names []string
	for _, n := range []struct {
		bit  schemas.FragmentFlag
		name string
	}{{schemas.FlagSourceError, "source-error"}, {schemas.FlagTruncated, "truncated"}, {schemas.FlagEmpty, "empty"}} {
		if f&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", flags " + strings.Join(names, "|")
}
