package farm

import (
	"math"

	"github.com/sluice-daq/sluice/schemas"
)

// End is the RU holding the trigger source telling every RU that it names
// no more elements of Unit's numbering space (run, resync, kind): its
// readout ended, or the run was stopped (the trigger stopped). Unit's
// ranges are every element it named (announced) in that space, possibly
// none; no assignment can hold any other, so an RU frees the packets of
// other elements — a readout that read further than the trigger source —
// at once, and any that come later, counted never_announced by source.
type End struct {
	Unit Unit
}

// AppendEnd appends e encoded. Errors (ErrEncode): an unknown unit kind,
// an empty range, or ranges not ascending and separated. Unlike the other
// units an end may have no range, and its count is 64 bits (a run names
// more than 2^32 events).
func AppendEnd(dst []byte, e End) ([]byte, error) {
	u := e.Unit
	if u.Kind != UnitEvents && u.Kind != UnitPackets {
		return dst, encodeErr(KindEnd, "unit", "unknown unit kind %d", uint8(u.Kind))
	}
	var total uint64
	for i, r := range u.Ranges {
		switch {
		case r.N == 0:
			return dst, encodeErr(KindEnd, "ranges", "range %d is empty", i)
		case r.First > math.MaxUint64-uint64(r.N)+1:
			return dst, encodeErr(KindEnd, "ranges", "range %d passes 2^64", i)
		case i > 0 && !separated(u.Ranges[i-1], r):
			return dst, encodeErr(KindEnd, "ranges", "range %d starts at %d, not past the previous range's end %d plus one", i, r.First, u.Ranges[i-1].Last())
		}
		total += uint64(r.N)
	}
	dst, start := appendHeader(dst, KindEnd)
	dst = le.AppendUint32(dst, u.Run)
	dst = le.AppendUint32(dst, u.Resync)
	dst = append(dst, byte(u.Kind), 0, 0, 0)
	dst = le.AppendUint64(dst, total)
	dst = le.AppendUint32(dst, uint32(len(u.Ranges)))
	for _, r := range u.Ranges {
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.N)
	}
	return finish(dst, start), nil
}

// DecodeEnd decodes one end message filling all of b.
func DecodeEnd(b []byte) (End, error) {
	r := header(b, KindEnd)
	var u Unit
	u.Run = r.u32("run")
	u.Resync = r.u32("resync")
	kAt := r.off
	u.Kind = UnitKind(r.u8("unit"))
	if r.err == nil && u.Kind != UnitEvents && u.Kind != UnitPackets {
		r.fail("unit", kAt, schemas.ErrBadHeader, "unknown unit kind %d", uint8(u.Kind))
	}
	r.zero("reserved", 3)
	countAt := r.off
	count := r.u64("count")
	nAt := r.off
	n := r.u32("n_ranges")
	if r.err == nil && uint64(n)*12 > uint64(len(r.b)-r.off) {
		r.fail("n_ranges", nAt, schemas.ErrSizeOverflow, "%d ranges need %d bytes, %d left", n, uint64(n)*12, len(r.b)-r.off)
	}
	if r.err == nil && n > 0 {
		u.Ranges = make([]Range, 0, n)
	}
	var total uint64
	for i := 0; i < int(n) && r.err == nil; i++ {
		at := r.off
		rg := Range{First: r.u64("ranges"), N: r.u32("ranges")}
		switch {
		case r.err != nil:
		case rg.N == 0:
			r.fail("ranges", at+8, schemas.ErrBadHeader, "range %d is empty", i)
		case rg.First > math.MaxUint64-uint64(rg.N)+1:
			r.fail("ranges", at, schemas.ErrSizeOverflow, "range %d passes 2^64", i)
		case i > 0 && !separated(u.Ranges[i-1], rg):
			r.fail("ranges", at, schemas.ErrInconsistent, "range %d starts at %d, not past the previous range's end plus one", i, rg.First)
		default:
			total += uint64(rg.N)
			u.Ranges = append(u.Ranges, rg)
		}
	}
	if r.err == nil && total != count {
		r.fail("count", countAt, schemas.ErrInconsistent, "count %d, ranges hold %d", count, total)
	}
	r.end()
	if r.err != nil {
		return End{}, r.err
	}
	return End{Unit: u}, nil
}
