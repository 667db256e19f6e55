package farm

// Duplicate is a BU telling the EM which events an earlier incarnation of
// it (Dead) had stored for assignments the EM gave to other BUs after
// declaring that incarnation dead: voided in the BU's store now, counted
// duplicate_after_failover in the farm ledger.
type Duplicate struct {
	Incarnation uint64 // the sender's
	Dead        uint64 // the incarnation that stored them
	BU          string
	Unit        Unit
}

// AppendDuplicate appends d encoded. Errors (ErrEncode): an empty or too
// long bu, or a bad unit (as AppendAnnounce's).
func AppendDuplicate(dst []byte, d Duplicate) ([]byte, error) {
	if err := checkStr(KindDuplicate, "bu", d.BU, true); err != nil {
		return dst, err
	}
	if err := checkUnit(KindDuplicate, d.Unit); err != nil {
		return dst, err
	}
	dst, start := appendHeader(dst, KindDuplicate)
	dst = le.AppendUint64(dst, d.Incarnation)
	dst = le.AppendUint64(dst, d.Dead)
	dst = le.AppendUint32(dst, d.Unit.Run)
	dst = le.AppendUint32(dst, d.Unit.Resync)
	dst = append(dst, byte(d.Unit.Kind), 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(d.Unit.Len()))
	dst = le.AppendUint32(dst, uint32(len(d.Unit.Ranges)))
	dst = appendStr(dst, d.BU)
	for _, r := range d.Unit.Ranges {
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.N)
	}
	return finish(dst, start), nil
}

// DecodeDuplicate decodes one duplicate message filling all of b.
func DecodeDuplicate(b []byte) (Duplicate, error) {
	r := header(b, KindDuplicate)
	var d Duplicate
	d.Incarnation = r.u64("incarnation")
	d.Dead = r.u64("dead")
	d.Unit = r.unitWith(func() { d.BU = r.str("bu", true) })
	r.end()
	if r.err != nil {
		return Duplicate{}, r.err
	}
	return d, nil
}
