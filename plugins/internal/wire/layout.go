package wire

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
)

// SchemaBytes encodes a schema alone as an Arrow IPC stream.
func SchemaBytes(s *arrow.Schema) ([]byte, error) {
	var b bytes.Buffer
	w := ipc.NewWriter(&b, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("wire: encoding schema: %w", err)
	}
	return b.Bytes(), nil
}

// Layout describes rec by the places of its buffers in a's region, and
// returns false if any buffer lies elsewhere (then rec must be copied).
// schema is SchemaBytes(rec.Schema()), which the caller caches.
func (a *Arena) Layout(rec arrow.RecordBatch, schema []byte) (*pluginpb.SharedLayout, bool) {
	l := &pluginpb.SharedLayout{Region: a.Path, RegionSize: uint64(len(a.Data)), Schema: schema, NumRows: rec.NumRows()}
	for _, col := range rec.Columns() {
		c, ok := a.arrayLayout(col.Data())
		if !ok {
			return nil, false
		}
		l.Columns = append(l.Columns, c)
	}
	return l, true
}

func (a *Arena) arrayLayout(d arrow.ArrayData) (*pluginpb.ArrayLayout, bool) {
	out := &pluginpb.ArrayLayout{Length: int64(d.Len()), NullCount: int64(d.NullN()), Offset: int64(d.Offset())}
	for _, b := range d.Buffers() {
		if b == nil || b.Len() == 0 {
			out.Buffers = append(out.Buffers, &pluginpb.BufferRef{Absent: b == nil})
			continue
		}
		off, ok := a.Offset(b.Bytes())
		if !ok {
			return nil, false
		}
		out.Buffers = append(out.Buffers, &pluginpb.BufferRef{Offset: uint64(off), Length: uint64(b.Len())})
	}
	for _, c := range d.Children() {
		cl, ok := a.arrayLayout(c)
		if !ok {
			return nil, false
		}
		out.Children = append(out.Children, cl)
	}
	return out, true
}

// LayoutReader rebuilds record batches from SharedLayouts over a mapped
// region, keeping the last decoded schema.
type LayoutReader struct {
	schemaBytes []byte
	schema      *arrow.Schema
}

// Read returns the batch l describes, whose buffers are views of region
// (the mapping of l.Region). The caller releases it. Errors name what does
// not fit; a malformed layout never panics.
func (r *LayoutReader) Read(l *pluginpb.SharedLayout, region []byte) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("wire: malformed batch layout: %v", p)
		}
	}()
	if !bytes.Equal(l.GetSchema(), r.schemaBytes) {
		ir, err := ipc.NewReader(bytes.NewReader(l.GetSchema()))
		if err != nil {
			return nil, fmt.Errorf("wire: batch layout schema: %w", err)
		}
		r.schema = ir.Schema()
		ir.Release()
		r.schemaBytes = bytes.Clone(l.GetSchema())
	}
	fields := r.schema.Fields()
	if len(l.GetColumns()) != len(fields) {
		return nil, fmt.Errorf("wire: batch layout has %d columns, schema %d", len(l.GetColumns()), len(fields))
	}
	cols := make([]arrow.Array, len(fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range fields {
		d, err := buildData(f.Type, l.GetColumns()[i], region)
		if err != nil {
			return nil, fmt.Errorf("wire: column %s: %w", f.Name, err)
		}
		if d.Len() != int(l.GetNumRows()) {
			d.Release()
			return nil, fmt.Errorf("wire: column %s has %d rows, batch %d", f.Name, d.Len(), l.GetNumRows())
		}
		cols[i] = array.MakeFromData(d)
		d.Release()
		if err := validate(cols[i]); err != nil {
			return nil, fmt.Errorf("wire: column %s: %w", f.Name, err)
		}
	}
	return array.NewRecordBatch(r.schema, cols, l.GetNumRows()), nil
}

func buildData(dt arrow.DataType, l *pluginpb.ArrayLayout, region []byte) (arrow.ArrayData, error) {
	bufs := make([]*memory.Buffer, len(l.GetBuffers()))
	for i, b := range l.GetBuffers() {
		if b.GetAbsent() {
			continue
		}
		if b.GetOffset() > uint64(len(region)) || b.GetLength() > uint64(len(region))-b.GetOffset() {
			return nil, fmt.Errorf("buffer %d [%d, +%d) outside the %d-byte region", i, b.GetOffset(), b.GetLength(), len(region))
		}
		bufs[i] = memory.NewBufferBytes(region[b.GetOffset() : b.GetOffset()+b.GetLength()])
	}
	var childTypes []arrow.DataType
	if nt, ok := dt.(arrow.NestedType); ok {
		for _, f := range nt.Fields() {
			childTypes = append(childTypes, f.Type)
		}
	}
	if len(childTypes) != len(l.GetChildren()) {
		return nil, fmt.Errorf("%s has %d children, layout %d", dt, len(childTypes), len(l.GetChildren()))
	}
	children := make([]arrow.ArrayData, len(childTypes))
	for i, ct := range childTypes {
		c, err := buildData(ct, l.GetChildren()[i], region)
		if err != nil {
			for _, c := range children[:i] {
				c.Release()
			}
			return nil, err
		}
		children[i] = c
	}
	if err := checkSizes(dt, l, bufs); err != nil {
		for _, c := range children {
			c.Release()
		}
		return nil, err
	}
	d := array.NewData(dt, int(l.GetLength()), bufs, children, int(l.GetNullCount()), int(l.GetOffset()))
	for _, c := range children {
		c.Release()
	}
	return d, nil
}

// checkSizes checks that the validity bitmap and, for fixed-width types,
// the values buffer cover the array's slots.
func checkSizes(dt arrow.DataType, l *pluginpb.ArrayLayout, bufs []*memory.Buffer) error {
	if l.GetLength() < 0 || l.GetOffset() < 0 || l.GetNullCount() < 0 || l.GetLength() > 1<<40 || l.GetOffset() > 1<<40 {
		return fmt.Errorf("%s: length %d, offset %d, null count %d", dt, l.GetLength(), l.GetOffset(), l.GetNullCount())
	}
	slots := int(l.GetLength() + l.GetOffset())
	if len(bufs) > 0 && bufs[0] != nil && bufs[0].Len() < (slots+7)/8 {
		return fmt.Errorf("%s: validity bitmap of %d bytes for %d slots", dt, bufs[0].Len(), slots)
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 {
		need := slots * fw.BitWidth() / 8
		if len(bufs) < 2 || (need > 0 && (bufs[1] == nil || bufs[1].Len() < need)) {
			return fmt.Errorf("%s: values buffer too short for %d slots", dt, slots)
		}
	}
	return nil
}

// validate checks an array's offsets and sizes against its buffers, so that
// reading it cannot run past them.
func validate(a arrow.Array) error {
	if v, ok := a.(interface{ ValidateFull() error }); ok {
		return v.ValidateFull()
	}
	return nil
}
