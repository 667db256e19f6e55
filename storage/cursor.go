package storage

import (
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// Selection picks events by run and event id (both inclusive). A Max of 0
// means no upper bound; the zero Selection selects every event. The event
// range applies within every selected run.
type Selection struct {
	MinRun, MaxRun     uint32
	MinEvent, MaxEvent uint64
}

func (sel Selection) maxRun() uint32 {
	if sel.MaxRun == 0 {
		return math.MaxUint32
	}
	return sel.MaxRun
}

func (sel Selection) maxEvent() uint64 {
	if sel.MaxEvent == 0 {
		return math.MaxUint64
	}
	return sel.MaxEvent
}

// CursorOptions configure a Cursor. Zero fields take the values of
// DefaultCursorOptions.
type CursorOptions struct {
	Selection
	BatchSize int // events per batch at most
	// Provenance: also read each event's provenance record
	// (Batch.Provenance); a replay does not need it.
	Provenance    bool
	MaxBatchBytes int64            // value bytes per batch at most (at least one event per batch)
	Mem           memory.Allocator // allocates the Arrow batches; default: the store's recycling allocator
}

// DefaultCursorOptions are the defaults of zero CursorOptions fields (the
// node's replay.batch_events default is BatchSize).
func DefaultCursorOptions() CursorOptions {
	return CursorOptions{BatchSize: 256, MaxBatchBytes: 64 << 20}
}

// Cursor reads one stream in key order, (run, event id) ascending, as Arrow
// record batches with the builder's schema. Each Next reads in a fresh
// badger read transaction starting after the last event returned, so
// events written meanwhile (behind the cursor's position) are seen and a
// long replay does not pin old versions against GC. A Cursor is used by
// one goroutine.
type Cursor struct {
	s      *Store
	stream Stream
	opts   CursorOptions
	next   []byte // first key of the next batch
	done   bool
	schema *arrow.Schema
	groups []schemas.SourceGroup
	rows   *rowBuilder
	keys   []Key
	rec    record
	rbuf   []byte // the value read last (segment files)
}

// Batch is one batch of stored events.
type Batch struct {
	Stream Stream
	Rec    arrow.RecordBatch   // schemas.EventSchema of the store's groups
	Events *schemas.EventBatch // typed view of Rec
	// Verdicts are the stored verdicts of the rows (decision, lines, stage,
	// reason text).
	Verdicts []schemas.Verdict
	// Provenance are the rows' provenance records (CursorOptions.Provenance;
	// nil otherwise; an empty one for an event without a record).
	Provenance []schemas.Provenance
	Bytes      int64 // encoded value bytes of the rows
}

// Release releases the Arrow record, through its view (so that a shadow
// trigger plugin still reading it in a replay is cut off first, see
// schemas.EventBatch.Release).
func (b *Batch) Release() {
	if b.Events != nil {
		b.Events.Release()
		return
	}
	b.Rec.Release()
}

// cursorPoolMin is the smallest buffer the cursors' default allocator
// recycles. A replay allocates the same few-megabyte payload buffers batch
// after batch, and recycling them makes replay reads run at the speed of
// warm memory; smaller buffers (offsets and metadata columns) go to the
// garbage collector. What it keeps is the memory plan's CursorPool.
const cursorPoolMin = 64 << 10

// NewCursor opens a cursor on stream. Release the batches it returns.
func (s *Store) NewCursor(stream Stream, opts CursorOptions) (*Cursor, error) {
	if !stream.valid() {
		return nil, fmt.Errorf("store cursor: invalid stream %d", stream)
	}
	d := DefaultCursorOptions()
	if opts.BatchSize <= 0 {
		opts.BatchSize = d.BatchSize
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = d.MaxBatchBytes
	}
	if opts.Mem == nil {
		opts.Mem = s.pool
	}
	c := &Cursor{s: s, stream: stream, opts: opts}
	c.next = appendKey(nil, stream, Key{Run: opts.MinRun, EventID: opts.MinEvent})
	return c, c.bindSchema()
}

// bindSchema picks up the store's schema once it has one (an empty store
// gets it with its first Put).
func (c *Cursor) bindSchema() error {
	if c.schema != nil {
		return nil
	}
	ss := c.s.schema.Load()
	if ss == nil {
		return nil
	}
	schema, groups, err := ss.arrowSchema()
	if err != nil {
		return err
	}
	c.schema, c.groups = schema, groups
	c.rows = newRowBuilder(c.opts.Mem, schema, len(groups))
	return nil
}

// Schema is the Arrow schema of the batches, nil while the store is empty.
func (c *Cursor) Schema() *arrow.Schema { return c.schema }

// Close releases the cursor's builders.
func (c *Cursor) Close() {
	if c.rows != nil {
		c.rows.release()
		c.rows = nil
	}
	c.done = true
}

// Next returns the next batch, or io.EOF when the selection is exhausted.
// Decoding errors name the event's run and event id.
func (c *Cursor) Next() (*Batch, error) {
	if c.done {
		return nil, io.EOF
	}
	if c.s.closed.Load() {
		return nil, ErrClosed
	}
	if err := c.bindSchema(); err != nil {
		return nil, err
	}
	if c.schema == nil {
		return nil, io.EOF
	}
	defer c.s.segs.endRead(c.s.segs.beginRead())
	txn := c.s.db.NewTransaction(false)
	defer txn.Discard()
	total, err := c.scanKeys(txn)
	if err != nil {
		return nil, fmt.Errorf("store %s: %s: %w", c.s.opts.Dir, c.stream, err)
	}
	if len(c.keys) == 0 {
		return nil, io.EOF
	}
	last := c.keys[len(c.keys)-1]
	// The smallest key after last: keys are fixed width, so last plus
	// one trailing byte sorts right after it and before any other key.
	c.next = append(appendKey(c.next[:0], c.stream, last), 0)

	b := &Batch{Stream: c.stream, Verdicts: make([]schemas.Verdict, 0, len(c.keys))}
	var kb [KeySize]byte
	for i, k := range c.keys {
		item, err := txn.Get(appendKey(kb[:0], c.stream, k))
		if err != nil {
			c.rows.release()
			c.rows = newRowBuilder(c.opts.Mem, c.schema, len(c.groups))
			return nil, fmt.Errorf("store %s: %s run %d event %d: %w", c.s.opts.Dir, c.stream, k.Run, k.EventID, err)
		}
		err = c.s.eventValue(item, &c.rbuf, func(v []byte) error {
			if err := decodeValue(v, &c.rec); err != nil {
				return err
			}
			if err := c.rec.checkKey(k); err != nil {
				return err
			}
			if len(c.rec.groups) != len(c.groups) {
				return schemas.Errorf("store value", "header", 2, schemas.ErrInconsistent,
					"%d source groups, the store's schema has %d", len(c.rec.groups), len(c.groups))
			}
			if i == 0 {
				c.rows.reserve(len(c.keys), total, &c.rec, len(v))
			}
			c.rows.appendRecord(&c.rec)
			b.Bytes += int64(len(v))
			return nil
		})
		if err != nil {
			// Drop the partial batch; the builders start afresh.
			c.rows.release()
			c.rows = newRowBuilder(c.opts.Mem, c.schema, len(c.groups))
			return nil, fmt.Errorf("store %s: %s run %d event %d: %w", c.s.opts.Dir, c.stream, k.Run, k.EventID, err)
		}
		b.Verdicts = append(b.Verdicts, c.rec.verdict())
		if c.opts.Provenance {
			p, _, err := c.s.provenanceOf(txn, k)
			if err != nil {
				c.rows.release()
				c.rows = newRowBuilder(c.opts.Mem, c.schema, len(c.groups))
				return nil, fmt.Errorf("store %s: %s run %d event %d: %w", c.s.opts.Dir, c.stream, k.Run, k.EventID, err)
			}
			b.Provenance = append(b.Provenance, p)
		}
	}
	b.Rec = c.rows.finish()
	ev, err := schemas.NewEventBatch(b.Rec)
	if err != nil {
		b.Rec.Release()
		return nil, err
	}
	b.Events = ev
	return b, nil
}

// scanKeys collects into c.keys the keys of the next batch (key-only
// iteration: the index, not the values) and returns the sum of their
// value sizes. It marks the cursor done when the selection is exhausted.
func (c *Cursor) scanKeys(txn *badger.Txn) (int64, error) {
	c.keys = c.keys[:0]
	var total int64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(c.stream)}})
	defer it.Close()
	for it.Seek(c.next); ; it.Next() {
		k, found, beyond := c.opts.advance(it, c.stream)
		if beyond {
			c.done = true
		}
		if !found {
			return total, nil
		}
		vs, err := valueSize(it.Item())
		if err != nil {
			return total, err
		}
		if len(c.keys) > 0 && (len(c.keys) >= c.opts.BatchSize || total+vs > c.opts.MaxBatchBytes) {
			return total, nil
		}
		c.keys = append(c.keys, k)
		total += vs
	}
}

// advance moves it (positioned on stream's keys) to the first key at or
// after its position that the selection holds. found is false when there
// is none; beyond is true if the iterator passed the selection's last run
// (no later write can add events to it, as opposed to running out of keys).
func (sel Selection) advance(it *badger.Iterator, stream Stream) (k Key, found, beyond bool) {
	maxRun, maxEvent := sel.maxRun(), sel.maxEvent()
	var seek [KeySize]byte
	for it.Valid() {
		_, k, ok := parseKey(it.Item().Key())
		switch {
		case !ok:
			it.Next() // not an event key; none are written under a stream prefix
		case k.Run > maxRun:
			return k, false, true
		case k.EventID < sel.MinEvent:
			it.Seek(appendKey(seek[:0], stream, Key{Run: k.Run, EventID: sel.MinEvent}))
		case k.EventID > maxEvent:
			if k.Run == math.MaxUint32 {
				return k, false, true
			}
			it.Seek(appendKey(seek[:0], stream, Key{Run: k.Run + 1, EventID: sel.MinEvent}))
		default:
			return k, true, false
		}
	}
	return Key{}, false, false
}
