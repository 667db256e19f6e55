package farm

import (
	"github.com/sluice-daq/sluice/schemas"
)

// End is the RU holding the trigger source telling every RU that it names
// no more elements of a numbering space (Key: run, resync, kind): its
// readout ended, or the run was stopped (the trigger stopped). Named is
// every element it named (announced) in that space, possibly none; no
// assignment can hold any other, so an RU frees the packets of other
// elements — a readout that read further than the trigger source — at
// once, and any that come later, counted never_announced by source.
type End struct {
	Key   UnitKey
	Named []Span
}

// Span is the elements [First, Last] (inclusive: a run may name more than
// 2^32 of them, and a span may end at 2^64-1).
type Span struct{ First, Last uint64 }

// AppendEnd appends e encoded. Errors (ErrEncode): an unknown unit kind,
// a span ending before it starts, or spans not ascending and separated by
// at least one element not in them.
func AppendEnd(dst []byte, e End) ([]byte, error) {
	if e.Key.Kind != UnitEvents && e.Key.Kind != UnitPackets {
		return dst, encodeErr(KindEnd, "unit", "unknown unit kind %d", uint8(e.Key.Kind))
	}
	for i, s := range e.Named {
		switch {
		case s.Last < s.First:
			return dst, encodeErr(KindEnd, "named", "span %d ends at %d, before its start %d", i, s.Last, s.First)
		case i > 0 && (e.Named[i-1].Last == ^uint64(0) || s.First <= e.Named[i-1].Last+1):
			return dst, encodeErr(KindEnd, "named", "span %d starts at %d, not past the previous span's end %d plus one", i, s.First, e.Named[i-1].Last)
		}
	}
	dst, start := appendHeader(dst, KindEnd)
	dst = le.AppendUint32(dst, e.Key.Run)
	dst = le.AppendUint32(dst, e.Key.Resync)
	dst = append(dst, byte(e.Key.Kind), 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(len(e.Named)))
	for _, s := range e.Named {
		dst = le.AppendUint64(dst, s.First)
		dst = le.AppendUint64(dst, s.Last)
	}
	return finish(dst, start), nil
}

// DecodeEnd decodes one end message filling all of b.
func DecodeEnd(b []byte) (End, error) {
	r := header(b, KindEnd)
	var e End
	e.Key.Run = r.u32("run")
	e.Key.Resync = r.u32("resync")
	kAt := r.off
	e.Key.Kind = UnitKind(r.u8("unit"))
	if r.err == nil && e.Key.Kind != UnitEvents && e.Key.Kind != UnitPackets {
		r.fail("unit", kAt, schemas.ErrBadHeader, "unknown unit kind %d", uint8(e.Key.Kind))
	}
	r.zero("reserved", 3)
	nAt := r.off
	n := r.u32("n_spans")
	if r.err == nil && uint64(n)*16 > uint64(len(r.b)-r.off) {
		r.fail("n_spans", nAt, schemas.ErrSizeOverflow, "%d spans need %d bytes, %d left", n, uint64(n)*16, len(r.b)-r.off)
	}
	if r.err == nil && n > 0 {
		e.Named = make([]Span, 0, n)
	}
	for i := 0; i < int(n) && r.err == nil; i++ {
		at := r.off
		s := Span{First: r.u64("named"), Last: r.u64("named")}
		switch {
		case r.err != nil:
		case s.Last < s.First:
			r.fail("named", at+8, schemas.ErrInconsistent, "span %d ends at %d, before its start %d", i, s.Last, s.First)
		case i > 0 && (e.Named[i-1].Last == ^uint64(0) || s.First <= e.Named[i-1].Last+1):
			r.fail("named", at, schemas.ErrInconsistent, "span %d starts at %d, not past the previous span's end plus one", i, s.First)
		default:
			e.Named = append(e.Named, s)
		}
	}
	r.end()
	if r.err != nil {
		return End{}, r.err
	}
	return e, nil
}
