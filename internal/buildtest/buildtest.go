// Package buildtest runs the event builder for the tests of the format
// packages (schemas/lhcb, vdif, cms, atlas) and of the export: fragments
// in, built rows or batches out, on a leak-checking Arrow allocator. It
// exists so that each format's split → build → join round trip is written
// once.
package buildtest

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/schemas"
)

// Run starts a builder with cfg (its Allocator replaced by a checked one,
// Timeout 1 minute when unset, so events complete by their sources), lets
// feed add fragments, closes the builder and calls row for every built row
// in emission order. row runs on the consumer goroutine: report with
// t.Error, not t.Fatal. Run fails t on a builder error, an event batch that
// does not have the event schema, or Arrow memory left allocated, and
// returns the builder's final ledger.
func Run(t testing.TB, cfg builder.Config, feed func(ctx context.Context, b *builder.Builder), row func(eb *schemas.EventBatch, i int)) builder.Ledger {
	t.Helper()
	return RunBatches(t, cfg, feed, func(eb *schemas.EventBatch) {
		for i := range eb.Len() {
			row(eb, i)
		}
	})
}

// RunBatches is Run calling batch once for every built batch instead of
// once per row, e.g. to store it; the batch is released when batch
// returns.
func RunBatches(t testing.TB, cfg builder.Config, feed func(ctx context.Context, b *builder.Builder), batch func(eb *schemas.EventBatch)) builder.Ledger {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg.Allocator = mem
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	b, err := builder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rec := range b.Batches() {
			if eb, err := schemas.NewEventBatch(rec); err != nil {
				t.Error(err)
			} else {
				batch(eb)
			}
			rec.Release()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	feed(ctx, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	mem.AssertSize(t, 0)
	return b.Ledger()
}

// Fragments returns a feed that decodes native fragments (schemas
// AppendFragment encoding) and adds them in the order given.
func Fragments(t testing.TB, wire [][]byte) func(ctx context.Context, b *builder.Builder) {
	return func(ctx context.Context, b *builder.Builder) {
		t.Helper()
		for _, w := range wire {
			f, _, err := schemas.DecodeFragment(w)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddFragment(ctx, f, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// OneRow builds a one-event batch with one source group holding
// payloads[k] for sources[k] (an empty payload: the source sent nothing),
// for joiners' error cases. The caller releases the batch.
func OneRow(t testing.TB, mem memory.Allocator, group string, run uint32, event uint64, sources []uint32, payloads [][]byte) arrow.RecordBatch {
	t.Helper()
	schema, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: group, Sources: sources}})
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	rb.Field(0).(*array.Uint64Builder).Append(event)
	rb.Field(1).(*array.Uint32Builder).Append(run)
	rb.Field(2).(*array.Uint64Builder).Append(0)
	rb.Field(3).(*array.Uint32Builder).Append(0)
	rb.Field(4).(*array.Uint32Builder).Append(uint32(len(sources)))
	rb.Field(5).(*array.ListBuilder).Append(true)
	rb.Field(6).(*array.ListBuilder).Append(true)
	sizes := rb.Field(8).(*array.ListBuilder)
	sizes.Append(true)
	var all []byte
	for _, p := range payloads {
		all = append(all, p...)
		sizes.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
	}
	rb.Field(7).(*array.BinaryBuilder).Append(all)
	return rb.NewRecordBatch()
}
