package inspect

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
)

// readRecord reads the n-byte record starting at stream offset off into
// buf (reused), growing it as bytes arrive so that a corrupt size on a
// short file costs no more memory than the file. A stream that ends early
// is ErrTruncated at off.
func readRecord(r io.Reader, buf []byte, n uint64, off int64, format string) ([]byte, error) {
	buf = buf[:0]
	for uint64(len(buf)) < n {
		chunk := int(min(n-uint64(len(buf)), 1<<20))
		l := len(buf)
		buf = slices.Grow(buf, chunk)[:l+chunk]
		if m, err := io.ReadFull(r, buf[l:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return buf, schemas.Errorf(format, "record", off, schemas.ErrTruncated, "record of %d bytes, the file ends after %d", n, l+m)
			}
			return buf, err
		}
	}
	return buf, nil
}

// inspectNative reads a stream of native fragments and multi-fragment
// packets (either may follow the other).
func inspectNative(br *bufio.Reader, f Format, maxEvents int) (*Report, error) {
	rep := &Report{Format: f, Checksums: Checksums{What: "CRC-32C of each fragment payload"}}
	sources, events := map[uint32]bool{}, map[uint64]bool{}
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
		var total uint64
		format := "fragment"
		if len(head) >= 4 && binary.LittleEndian.Uint32(head) == schemas.MFPMagic {
			format = "mfp"
		}
		if len(head) < 32 {
			err = schemas.Errorf(format, "header", off, schemas.ErrTruncated, "need a 32-byte header, the file ends after %d bytes", len(head))
			break
		}
		if format == "mfp" {
			total = uint64(binary.LittleEndian.Uint32(head[24:]))
		} else {
			total = uint64(head[5]) + uint64(binary.LittleEndian.Uint32(head[12:]))
		}
		if total < 32 {
			total = 32 // let the decoder name the bad field
		}
		if buf, err = readRecord(br, buf, total, off, format); err != nil {
			break
		}
		d := EventDetail{Kind: "fragment", Index: rep.Records, Offset: off, Bytes: len(buf), ChecksumOK: true}
		if format == "mfp" {
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
				d.Note += fmt.Sprintf(", %s with a bad CRC-32C", plural(bad, "fragment"))
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
		rep.addRow(d, maxEvents)
		off += int64(len(buf))
	}
	rep.Events = len(events)
	rep.Sources = sortedKeys(sources)
	rep.NumSources = len(rep.Sources)
	rep.RecordBytes = sizeStats(sizes)
	return rep, err
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
