package builder

import (
	"cmp"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// assembler turns a list of emitted events into one record batch. It
// builds the Arrow buffers itself (offsets, values, payload bytes) from
// exact sizes known before copying, so every payload byte is copied once,
// straight from the caller's buffer into its final place, and no builder
// reallocates. The copy is the one pass over the payload bytes, so the
// fragments' CRC-32C is checked there too, on the bytes just copied (still
// in the core's cache). Since every row's place is known before copying,
// the rows are split among up to GOMAXPROCS workers (assemblyWorkers), the
// emitter goroutine being one of them. Only the emitter goroutine calls
// assemble.
type assembler struct {
	b      *Builder
	mem    memory.Allocator
	fields []arrow.Field
	// per group, the current batch's buffers
	pay [][]byte
	po  [][]int64
	sv  [][]uint32
	mo  []int32  // missing_sources offsets: row i's ids start at mv[mo[i]]
	mv  []uint32 // missing_sources values
	// per part: its rows and what it found corrupt, reused across batches
	parts []assemblyPart
	help  *copyHelpers
}

// assemblyPart is a part of a batch a worker takes: rows [lo, hi), and the
// corrupt sources it found there, in row order.
type assemblyPart struct {
	lo, hi  int
	corrupt []corruptSource
}

// corruptSource is a fragment whose bytes do not match the CRC-32C its
// source sent: the row (event) and the source id.
type corruptSource struct {
	row int
	id  uint32
}

// minPartBytes is the least payload a worker is given: below it, handing
// rows to another goroutine costs more than copying them.
const minPartBytes = 256 << 10

// assemblyWorkers is how many workers assemble a batch of total payload
// bytes in n rows: one per P (GOMAXPROCS), fewer for a small batch.
func assemblyWorkers(n int, total int64) int {
	return max(1, min(runtime.GOMAXPROCS(0), n, int(total/minPartBytes)))
}

func newAssembler(b *Builder) *assembler {
	ng := len(b.cfg.Groups)
	return &assembler{
		b: b, mem: b.cfg.Allocator, fields: b.schema.Fields(),
		pay: make([][]byte, ng), po: make([][]int64, ng), sv: make([][]uint32, ng),
		help: startCopyHelpers(runtime.GOMAXPROCS(0) - 1),
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

// assemble copies the events' payloads into a new batch, checks their
// CRCs, drops every fragment reference (calling the callers' release when
// the last one goes) and clears the per-source slots for reuse. Events
// with a CRC mismatch get StatusCorrupt (the ledger counts them after).
func (a *assembler) assemble(evs []*event) arrow.RecordBatch {
	b := a.b
	n := len(evs)
	ng := len(b.cfg.Groups)
	nMissing := 0
	var total int64
	for _, ev := range evs {
		if b.isTS {
			dedupeSlice(b, ev)
		}
		if ev.present < b.nsrc {
			ev.status |= schemas.StatusIncomplete
		}
		nMissing += b.nsrc - ev.present
		for _, gb := range ev.gbytes {
			total += gb
		}
	}

	eidB, runB, tsB, stB, nfB := a.alloc(8*n), a.alloc(4*n), a.alloc(8*n), a.alloc(4*n), a.alloc(4*n)
	moB, mvB, coB := a.alloc(4*(n+1)), a.alloc(4*nMissing), a.alloc(4*(n+1))
	eid, run, ts := arrow.Uint64Traits.CastFromBytes(eidB.Bytes()), arrow.Uint32Traits.CastFromBytes(runB.Bytes()), arrow.Uint64Traits.CastFromBytes(tsB.Bytes())
	st, nf := arrow.Uint32Traits.CastFromBytes(stB.Bytes()), arrow.Uint32Traits.CastFromBytes(nfB.Bytes())
	a.mo, a.mv = arrow.Int32Traits.CastFromBytes(moB.Bytes()), arrow.Uint32Traits.CastFromBytes(bytesOf(mvB))
	co := arrow.Int32Traits.CastFromBytes(coB.Bytes())

	poB, pdB, soB, svB := make([]*memory.Buffer, ng), make([]*memory.Buffer, ng), make([]*memory.Buffer, ng), make([]*memory.Buffer, ng)
	for g := range ng {
		gsize := b.gstart[g+1] - b.gstart[g]
		po := a.alloc(8 * (n + 1))
		a.po[g] = arrow.Int64Traits.CastFromBytes(po.Bytes())
		// Every row's place in the group's payload, before any copy: the
		// workers' rows are then independent.
		var off int64
		for i, ev := range evs {
			a.po[g][i] = off
			off += ev.gbytes[g]
		}
		a.po[g][n] = off
		poB[g], pdB[g], soB[g], svB[g] = po, a.alloc(int(off)), a.alloc(4*(n+1)), a.alloc(4*n*gsize)
		a.pay[g] = bytesOf(pdB[g])
		a.sv[g] = arrow.Uint32Traits.CastFromBytes(bytesOf(svB[g]))
		so := arrow.Int32Traits.CastFromBytes(soB[g].Bytes())
		for i := range n + 1 {
			so[i] = int32(i * gsize)
		}
	}

	mc := 0
	for i, ev := range evs {
		eid[i] = ev.key
		run[i] = b.cfg.Run
		if b.isTS {
			ts[i] = ev.key * b.slice
		} else {
			ts[i] = uint64(ev.first.UnixNano())
			nf[i] = uint32(ev.present)
		}
		a.mo[i] = int32(mc)
		mc += b.nsrc - ev.present
	}
	a.mo[n] = int32(mc)

	a.copyRows(evs, nf, total)

	// The corrupt sources, in row order (the parts are consecutive rows),
	// and the status column, now that the CRCs are checked.
	nCorrupt := 0
	for _, p := range a.parts {
		nCorrupt += len(p.corrupt)
	}
	cvB := a.alloc(4 * nCorrupt)
	cv := arrow.Uint32Traits.CastFromBytes(bytesOf(cvB))
	cc, row := 0, 0
	for _, p := range a.parts {
		for _, c := range p.corrupt {
			for ; row <= c.row; row++ {
				co[row] = int32(cc)
			}
			evs[c.row].status |= schemas.StatusCorrupt
			cv[cc] = c.id
			cc++
		}
	}
	for ; row <= n; row++ {
		co[row] = int32(cc)
	}
	for i, ev := range evs {
		st[i] = uint32(ev.status)
	}
	dupCol, lateCol, asgCol := a.buildColumns(evs)

	cols := make([]arrow.Array, 0, len(a.fields))
	cols = append(cols,
		a.array(0, n, eidB), a.array(1, n, runB), a.array(2, n, tsB), a.array(3, n, stB), a.array(4, n, nfB),
		a.list(5, n, moB, mvB, mc), a.list(6, n, coB, cvB, cc))
	for g := range ng {
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
	clear(a.pay) // the buffers belong to the batch now
	a.mv = nil
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

// copyRows splits the rows into parts of about minPartBytes of payload
// and copies them: this goroutine takes the next part until none is left,
// and so do the assembler's helpers (copyhelp.go) meanwhile. Parts are
// taken, not dealt, so nobody waits for a worker that has not started.
func (a *assembler) copyRows(evs []*event, nf []uint32, total int64) {
	np := 0
	a.parts = a.parts[:cap(a.parts)]
	for lo := 0; lo < len(evs); np++ {
		hi := lo
		var bytes int64
		for hi < len(evs) && (hi == lo || bytes < minPartBytes) {
			bytes += evs[hi].bytes
			hi++
		}
		if np == len(a.parts) {
			a.parts = append(a.parts, assemblyPart{})
			a.parts = a.parts[:cap(a.parts)]
		}
		a.parts[np] = assemblyPart{lo: lo, hi: hi, corrupt: a.parts[np].corrupt[:0]}
		lo = hi
	}
	a.parts = a.parts[:np]
	parts := a.parts
	j := newCopyJob(np, func(k int) { a.copyPart(evs, nf, &parts[k]) })
	if np > 1 && assemblyWorkers(len(evs), total) > 1 {
		a.help.offer(j)
	}
	if !j.work() {
		<-j.done // a helper is finishing the last parts
	}
	a.help.withdraw(j)
}

// copyJob is one batch's parts, taken in turn by the workers.
type copyJob struct {
	n    int           // parts
	copy func(k int)   // copies part k
	next atomic.Int64  // the next part to take
	left atomic.Int64  // parts not yet copied
	done chan struct{} // gets a value when the last part is copied
}

func newCopyJob(n int, copy func(k int)) *copyJob {
	j := &copyJob{n: n, copy: copy, done: make(chan struct{}, 1)}
	j.left.Store(int64(n))
	return j
}

// work copies parts until none is left to take; it reports whether this
// call copied the batch's last part (a helper that does says so on done).
// A job whose parts were all taken is never touched again, so a helper
// holding an old job only finds nothing to take.
func (j *copyJob) work() (last bool) {
	for {
		k := int(j.next.Add(1) - 1)
		if k >= j.n {
			return false
		}
		j.copy(k)
		if j.left.Add(-1) == 0 {
			j.done <- struct{}{}
			return true
		}
	}
}

// copyPart copies the rows of one part.
func (a *assembler) copyPart(evs []*event, nf []uint32, p *assemblyPart) {
	for i := p.lo; i < p.hi; i++ {
		if a.b.isTS {
			nf[i] = uint32(a.copySlice(evs[i], i, p))
			continue
		}
		var next *event
		if i+1 < p.hi {
			next = evs[i+1]
		}
		a.copyEvent(evs[i], next, i, p)
	}
}

// copyEvent is the event-mode hot loop: for every source, in group order,
// copy its payload (the one copy) and check its CRC on the copied bytes,
// record its size, list it as missing or corrupt, drop its reference and
// clear the slot. Rows are independent: this row's bytes, sizes and
// missing ids have their own places.
// The fragment prefetchAhead slots on (of this event, or of next, the
// part's next row) is prefetched while one is copied.
// Invariant: off is where the next payload byte of group g goes, and
// a.po[g][row] <= off <= a.po[g][row+1].
func (a *assembler) copyEvent(ev, next *event, row int, p *assemblyPart) {
	b := a.b
	mv, mc := a.mv, a.mo[row]
	last := len(ev.slots) - 1
	// The copied fragments wait here to be checked three at a time
	// (schemas.Checksum3: three CRC streams for the price of about one),
	// while their bytes are still in the core's cache: three fragments of
	// an event are a few KiB.
	var pend [3]pendingCheck
	np := 0
	for g := range a.pay {
		data, sizes := a.pay[g], a.sv[g]
		gs, ge := b.gstart[g], b.gstart[g+1]
		j := row * (ge - gs)
		off := a.po[g][row]
		for k := gs; k < ge; k++ {
			s := &ev.slots[k]
			if s.state == 0 {
				sizes[j] = 0
				mv[mc] = b.ids[k]
				mc++
			} else {
				if k+prefetchAhead <= last {
					prefetchFragment(&ev.slots[k+prefetchAhead])
				} else if i := k + prefetchAhead - last - 1; next != nil && i < len(next.slots) {
					prefetchFragment(&next.slots[i])
				}
				dst := data[off : off+int64(s.n)]
				copy(dst, s.payload())
				pend[np] = pendingCheck{dst, s.crc, b.ids[k]}
				if np++; np == 3 {
					p.check3(&pend, row)
					np = 0
				}
				sizes[j] = s.n
				off += int64(s.n)
				if s.state&slotRef != 0 {
					s.ref.drop()
				}
			}
			*s = slot{}
			j++
		}
	}
	for _, c := range pend[:np] {
		if schemas.Checksum(c.bytes) != c.crc {
			p.corrupt = append(p.corrupt, corruptSource{row, c.id})
		}
	}
}

// pendingCheck is a copied fragment whose CRC-32C is yet to be checked:
// its bytes in the batch, the CRC its source sent, its source id.
type pendingCheck struct {
	bytes []byte
	crc   uint32
	id    uint32
}

// check3 checks the three fragments of c, listing those whose bytes do not
// match their CRC as corrupt sources of row, in their order.
func (p *assemblyPart) check3(c *[3]pendingCheck, row int) {
	x, y, z := schemas.Checksum3(c[0].bytes, c[1].bytes, c[2].bytes)
	for i, got := range [3]uint32{x, y, z} {
		if got != c[i].crc {
			p.corrupt = append(p.corrupt, corruptSource{row, c[i].id})
		}
	}
}

// dedupeSlice sorts a timeslice's fragments by (source, timestamp, arrival)
// and marks as duplicates the later arrivals of a (source, timestamp) pair.
// It fixes the counts assembly needs: per-group bytes and the duplicate
// status bit.
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
		}
	}
}

// copySlice lays out a timeslice (after dedupeSlice): each source's
// fragments back to back in timestamp order, their total as the source's
// size, each kept fragment's CRC checked on the copied bytes (a source is
// corrupt when one of them is). It returns the number of fragments kept in
// the row.
func (a *assembler) copySlice(ev *event, row int, p *assemblyPart) int {
	b := a.b
	mv, mc := a.mv, a.mo[row]
	kept := 0
	j := 0
	fr := ev.tsFrags
	for g := range a.pay {
		data, sizes := a.pay[g], a.sv[g]
		gs, ge := b.gstart[g], b.gstart[g+1]
		sj := row * (ge - gs)
		off := a.po[g][row]
		for k := gs; k < ge; k++ {
			size, corrupt := 0, false
			for ; j < len(fr) && int(fr[j].src) == k; j++ {
				if !fr[j].dup {
					dst := data[off : off+int64(len(fr[j].payload))]
					copy(dst, fr[j].payload)
					corrupt = corrupt || schemas.Checksum(dst) != fr[j].crc
					off += int64(len(dst))
					size += len(dst)
					kept++
				}
				fr[j].ref.drop()
			}
			sizes[sj] = uint32(size)
			sj++
			if ev.coreN[k] == 0 {
				mv[mc] = b.ids[k]
				mc++
			}
			if corrupt {
				p.corrupt = append(p.corrupt, corruptSource{row, b.ids[k]})
			}
		}
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
