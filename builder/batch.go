package builder

import (
	"cmp"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// assembler turns a list of emitted events into one record batch. It
// builds the Arrow buffers itself (offsets, values, payload bytes) from
// exact sizes known before copying, so every payload byte is copied once,
// straight from the caller's buffer into its final place, and no builder
// reallocates. Only the emitter goroutine uses it.
type assembler struct {
	b      *Builder
	mem    memory.Allocator
	fields []arrow.Field
	// per group scratch, reused across batches
	poff []int64 // next payload byte offset
	pay  [][]byte
	po   [][]int64
	sv   [][]uint32
}

func newAssembler(b *Builder) *assembler {
	ng := len(b.cfg.Groups)
	return &assembler{
		b: b, mem: b.cfg.Allocator, fields: b.schema.Fields(),
		poff: make([]int64, ng), pay: make([][]byte, ng), po: make([][]int64, ng), sv: make([][]uint32, ng),
	}
}

// alloc returns a buffer of exactly size bytes from the allocator, or nil
// for size 0 (Arrow accepts a missing buffer for an empty one).
func (a *assembler) alloc(size int) *memory.Buffer {
	if size == 0 {
		return nil
	}
	buf := memory.NewResizableBuffer(a.mem)
	buf.Resize(size)
	return buf
}

func bytesOf(buf *memory.Buffer) []byte {
	if buf == nil {
		return nil
	}
	return buf.Bytes()
}

// assemble copies the events' payloads into a new batch, drops every
// fragment reference (calling the callers' release when the last one
// goes) and clears the per-source slots for reuse.
func (a *assembler) assemble(evs []*event) arrow.RecordBatch {
	b := a.b
	n := len(evs)
	ng := len(b.cfg.Groups)
	nMissing, nCorrupt := 0, 0
	for _, ev := range evs {
		if b.isTS {
			dedupeSlice(b, ev)
		}
		if ev.present < b.nsrc {
			ev.status |= schemas.StatusIncomplete
		}
		nMissing += b.nsrc - ev.present
		nCorrupt += ev.nCorrupt
	}

	eidB, runB, tsB, stB, nfB := a.alloc(8*n), a.alloc(4*n), a.alloc(8*n), a.alloc(4*n), a.alloc(4*n)
	moB, mvB, coB, cvB := a.alloc(4*(n+1)), a.alloc(4*nMissing), a.alloc(4*(n+1)), a.alloc(4*nCorrupt)
	eid, run, ts := arrow.Uint64Traits.CastFromBytes(eidB.Bytes()), arrow.Uint32Traits.CastFromBytes(runB.Bytes()), arrow.Uint64Traits.CastFromBytes(tsB.Bytes())
	st, nf := arrow.Uint32Traits.CastFromBytes(stB.Bytes()), arrow.Uint32Traits.CastFromBytes(nfB.Bytes())
	mo, mv := arrow.Int32Traits.CastFromBytes(moB.Bytes()), arrow.Uint32Traits.CastFromBytes(bytesOf(mvB))
	co, cv := arrow.Int32Traits.CastFromBytes(coB.Bytes()), arrow.Uint32Traits.CastFromBytes(bytesOf(cvB))

	poB, pdB, soB, svB := make([]*memory.Buffer, ng), make([]*memory.Buffer, ng), make([]*memory.Buffer, ng), make([]*memory.Buffer, ng)
	for g := range ng {
		var total int64
		for _, ev := range evs {
			total += ev.gbytes[g]
		}
		gsize := b.gstart[g+1] - b.gstart[g]
		poB[g], pdB[g], soB[g], svB[g] = a.alloc(8*(n+1)), a.alloc(int(total)), a.alloc(4*(n+1)), a.alloc(4*n*gsize)
		a.po[g] = arrow.Int64Traits.CastFromBytes(poB[g].Bytes())
		a.pay[g] = bytesOf(pdB[g])
		a.sv[g] = arrow.Uint32Traits.CastFromBytes(bytesOf(svB[g]))
		a.poff[g] = 0
		so := arrow.Int32Traits.CastFromBytes(soB[g].Bytes())
		for i := range n + 1 {
			so[i] = int32(i * gsize)
		}
	}

	mc, cc := 0, 0
	for i, ev := range evs {
		eid[i] = ev.key
		run[i] = b.cfg.Run
		if b.isTS {
			ts[i] = ev.key * b.slice
		} else {
			ts[i] = uint64(ev.first.UnixNano())
		}
		st[i] = uint32(ev.status)
		mo[i], co[i] = int32(mc), int32(cc)
		for g := range ng {
			a.po[g][i] = a.poff[g]
		}
		if b.isTS {
			nf[i] = uint32(a.copySlice(ev, i, mv, cv, &mc, &cc))
		} else {
			nf[i] = uint32(ev.present)
			a.copyEvent(ev, i, mv, cv, &mc, &cc)
		}
	}
	mo[n], co[n] = int32(mc), int32(cc)
	dupCol, lateCol, asgCol := a.buildColumns(evs)

	cols := make([]arrow.Array, 0, len(a.fields))
	cols = append(cols,
		a.array(0, n, eidB), a.array(1, n, runB), a.array(2, n, tsB), a.array(3, n, stB), a.array(4, n, nfB),
		a.list(5, n, moB, mvB, mc), a.list(6, n, coB, cvB, cc))
	for g := range ng {
		a.po[g][n] = a.poff[g]
		col := 7 + 2*g
		d := array.NewData(a.fields[col].Type, n, []*memory.Buffer{nil, poB[g], pdB[g]}, nil, 0, 0)
		cols = append(cols, array.MakeFromData(d))
		d.Release()
		release(poB[g], pdB[g])
		gsize := b.gstart[g+1] - b.gstart[g]
		cols = append(cols, a.list(col+1, n, soB[g], svB[g], n*gsize))
	}
	cols = append(cols, dupCol, lateCol, asgCol)
	rec := array.NewRecordBatch(b.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// buildColumns makes the build columns of evs (schemas.BuilderSchema):
// their duplicated and late sources (ids, ascending) and assignments.
func (a *assembler) buildColumns(evs []*event) (dup, late, asg arrow.Array) {
	b := a.b
	n := len(evs)
	first := 7 + 2*len(b.cfg.Groups)
	list := func(col int, of func(*event) []int32) arrow.Array {
		nv := 0
		for _, ev := range evs {
			nv += len(of(ev))
		}
		offB, valB := a.alloc(4*(n+1)), a.alloc(4*nv)
		off, val := arrow.Int32Traits.CastFromBytes(offB.Bytes()), arrow.Uint32Traits.CastFromBytes(bytesOf(valB))
		k := 0
		for i, ev := range evs {
			off[i] = int32(k)
			start := k
			for _, src := range of(ev) {
				val[k] = b.ids[src]
				k++
			}
			if k-start > 1 {
				slices.Sort(val[start:k])
			}
		}
		off[n] = int32(k)
		return a.list(col, n, offB, valB, nv)
	}
	dup = list(first, func(ev *event) []int32 { return ev.dups })
	late = list(first+1, func(ev *event) []int32 { return ev.lates })
	asgB := a.alloc(8 * n)
	ids := arrow.Uint64Traits.CastFromBytes(asgB.Bytes())
	for i, ev := range evs {
		ids[i] = 0
		if ev.asg != nil {
			ids[i] = ev.asg.id
		}
	}
	return dup, late, a.array(first+2, n, asgB)
}

// copyEvent is the event-mode hot loop: for every source, in group order,
// copy its payload (the one copy), record its size, list it as missing or
// corrupt, drop its reference and clear the slot.
// Invariant: a.poff[g] is where the next payload byte of group g goes.
func (a *assembler) copyEvent(ev *event, row int, mv, cv []uint32, mc, cc *int) {
	b := a.b
	for g := range a.pay {
		data, sizes := a.pay[g], a.sv[g]
		gs, ge := b.gstart[g], b.gstart[g+1]
		j := row * (ge - gs)
		off := a.poff[g]
		for k := gs; k < ge; k++ {
			s := &ev.slots[k]
			if s.state == 0 {
				sizes[j] = 0
				mv[*mc] = b.ids[k]
				*mc++
			} else {
				m := copy(data[off:], s.payload())
				sizes[j] = uint32(m)
				off += int64(m)
				if s.state&(slotCorrupt|slotRef) != 0 {
					if s.state&slotCorrupt != 0 {
						cv[*cc] = b.ids[k]
						*cc++
					}
					if s.state&slotRef != 0 {
						ev.refs[k].drop()
						ev.refs[k] = nil
					}
				}
			}
			*s = slot{}
			j++
		}
		a.poff[g] = off
	}
}

// dedupeSlice sorts a timeslice's fragments by (source, timestamp, arrival)
// and marks as duplicates the later arrivals of a (source, timestamp) pair.
// It fixes the counts assembly needs: per-group bytes, distinct corrupt
// sources, and the duplicate and corrupt status bits.
func dedupeSlice(b *Builder, ev *event) {
	slices.SortFunc(ev.tsFrags, func(x, y tsFrag) int {
		if c := cmp.Compare(x.src, y.src); c != 0 {
			return c
		}
		if c := cmp.Compare(x.ts, y.ts); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, y.seq)
	})
	ev.status &^= schemas.StatusCorrupt
	ev.nCorrupt = 0
	lastCorrupt := int32(-1)
	for j := range ev.tsFrags {
		f := &ev.tsFrags[j]
		if j > 0 && ev.tsFrags[j-1].src == f.src && ev.tsFrags[j-1].ts == f.ts {
			f.dup = true
			ev.status |= schemas.StatusDuplicates
			ev.dups = addSource(ev.dups, f.src)
			ev.gbytes[b.grp[f.src]] -= int64(len(f.payload))
			if f.core {
				ev.dupCore++
			}
			continue
		}
		if f.corrupt && f.src != lastCorrupt {
			lastCorrupt = f.src
			ev.nCorrupt++
			ev.status |= schemas.StatusCorrupt
		}
	}
}

// copySlice lays out a timeslice (after dedupeSlice): each source's
// fragments back to back in timestamp order, their total as the source's
// size. It returns the number of fragments kept in the row.
func (a *assembler) copySlice(ev *event, row int, mv, cv []uint32, mc, cc *int) int {
	b := a.b
	kept := 0
	j := 0
	fr := ev.tsFrags
	for g := range a.pay {
		data, sizes := a.pay[g], a.sv[g]
		gs, ge := b.gstart[g], b.gstart[g+1]
		sj := row * (ge - gs)
		off := a.poff[g]
		for k := gs; k < ge; k++ {
			size, corrupt := 0, false
			for ; j < len(fr) && int(fr[j].src) == k; j++ {
				if !fr[j].dup {
					m := copy(data[off:], fr[j].payload)
					off += int64(m)
					size += m
					corrupt = corrupt || fr[j].corrupt
					kept++
				}
				fr[j].ref.drop()
			}
			sizes[sj] = uint32(size)
			sj++
			if ev.coreN[k] == 0 {
				mv[*mc] = b.ids[k]
				*mc++
			}
			if corrupt {
				cv[*cc] = b.ids[k]
				*cc++
			}
		}
		a.poff[g] = off
	}
	return kept
}

// array wraps a fixed-width buffer as column col.
func (a *assembler) array(col, n int, buf *memory.Buffer) arrow.Array {
	d := array.NewData(a.fields[col].Type, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	arr := array.MakeFromData(d)
	d.Release()
	release(buf)
	return arr
}

// list wraps int32 offsets and nv uint32 values as list<uint32> column col.
func (a *assembler) list(col, n int, offs, vals *memory.Buffer, nv int) arrow.Array {
	lt := a.fields[col].Type.(*arrow.ListType)
	vd := array.NewData(lt.Elem(), nv, []*memory.Buffer{nil, vals}, nil, 0, 0)
	d := array.NewData(lt, n, []*memory.Buffer{nil, offs}, []arrow.ArrayData{vd}, 0, 0)
	arr := array.MakeFromData(d)
	vd.Release()
	d.Release()
	release(offs, vals)
	return arr
}

func release(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}
