package plugins

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/compute/exec"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// selectRows returns a new batch holding rows (ascending indices) of rec, for
// a stage that sees only the events still undecided. The payloads of those
// rows are copied once; the caller releases the result.
func selectRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.Resize(int(rec.NumRows()))
	k := 0
	for i := 0; i < int(rec.NumRows()); i++ {
		sel := k < len(rows) && rows[k] == i
		if sel {
			k++
		}
		b.UnsafeAppend(sel)
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(exec.WithAllocator(ctx, mem), rec, mask, compute.DefaultFilterOptions())
}

// positions returns where each element of keep (a subsequence of all)
// stands in all.
func positions(all, keep []int) []int {
	out := make([]int, 0, len(keep))
	k := 0
	for i, v := range all {
		if k < len(keep) && keep[k] == v {
			out = append(out, i)
			k++
		}
	}
	return out
}
