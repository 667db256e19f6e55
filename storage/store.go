package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/sluice-daq/sluice/internal/recycle"
	"github.com/sluice-daq/sluice/schemas"
)

// badgerOptions maps Options onto badger's. Badger holds the index: event
// values are in segment files (segments.go) and an index entry is 24
// bytes, below ValueThreshold, so it stays in the LSM tree. (Values in
// badger's own value log cost a copy into its mapped files and pages the
// store had to trim; kept in the LSM tree, 100 kB values cost a WAL
// write, L0 flushes and compactions: 6 % of raw disk speed, 6 GiB RSS on
// the 2-core CI machines.) The value log still holds the values of stores
// of format 1. Detector payloads do not compress, so compression is off
// and the block cache (only needed for compressed or encrypted tables) is
// small; two compactors match two cores. A small memtable (an index entry
// is ~60 bytes with its key: 16 MiB hold ~250k events), compaction as soon
// as two L0 tables exist and a compaction of L0 on Close keep the LSM tree
// small.
//
// Memory: the sizes come from the store's share (planMemory).
func badgerOptions(o *Options, p memoryPlan) badger.Options {
	return badger.DefaultOptions(o.Dir).
		WithReadOnly(o.ReadOnly).
		WithLoggingLevel(badger.WARNING).
		WithValueThreshold(o.ValueThreshold).
		WithNumCompactors(2).
		WithCompression(options.None).
		WithBlockCacheSize(p.BlockCache).
		WithIndexCacheSize(p.IndexCache).
		WithMemTableSize(p.MemTableSize).
		WithNumMemtables(p.NumMemtables).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(15).
		WithValueLogFileSize(p.ValueLogFileSz).
		WithNumGoroutines(4).
		WithCompactL0OnClose(true).
		WithSyncWrites(false) // durability is the SyncPolicy's job, per batch
}

// Store is the node's event store: the accepted and deferred streams, their
// values in segment files and their index in one badger database, keyed
// (stream, run, event id). Put and Commit may be
// called from different goroutines; Puts are serialized.
type Store struct {
	// commits counts replay commits begun: the invariants build's check
	// of a Put allows a deferred event gone when one ran since the Put
	// began (a concurrent replay took it).
	commits atomic.Uint64
	opts    Options
	db      *badger.DB
	schema  atomic.Pointer[storeSchema]
	guard   *guard
	m       *metrics
	pool    *recycle.Allocator // default allocator of cursors: recycles batch buffers
	plan    memoryPlan         // the store's memory share, spent
	trim    *trimmer           // keeps the mapped files' resident pages within plan.Mapped

	recovery Recovery // what Open recovered of an unclean shutdown

	plugins *pluginTable // the plugins the provenance records name
	// noProvenance leaves the provenance records out (Put): the store as
	// it was before them, only the same-run baseline of the benchmark
	// that measures their cost.
	noProvenance bool
	bu           atomic.Pointer[buildUnit] // SetBuildUnit; nil: a single node
	built        []byte                    // the current Put's build section, reused

	wmu   sync.Mutex // serializes Put (the arena, the schema record)
	arena []byte     // encoded values, keys and pointers of the current Put, reused
	parts [][]byte   // the pieces of the current Put's values, in order
	ends  []int      // per row: the end of its value, and of its pieces
	segs  *segments  // the segment files holding the event values
	gcmu  sync.Mutex // one RunGC at a time

	cmu    sync.Mutex // serializes Commit (its arena)
	carena []byte     // encoded values and pointers of the current Commit, reused
	cends  []int      // end of each row's value in carena

	seq     atomic.Uint64 // sequence number of the last flushed write
	durable atomic.Uint64 // highest sequence number known durable
	dmu     sync.Mutex
	dcond   *sync.Cond // broadcast when durable advances or the store closes

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
	lock   *dirLock // the directory's lock, released after the database closes
}

// Ack reports what a Put or Commit made durable.
type Ack struct {
	Events   int    // events written
	Replaced int    // of which replaced an event stored under the same (run, event id)
	Bytes    int64  // encoded value bytes written
	Seq      uint64 // sequence number of this write, for WaitDurable
	Durable  bool   // true if durable under the sync policy already
	// TooLarge are the rows not written because their event is larger
	// than MaxEventBytes; counted by the caller, the others are written.
	TooLarge []int
}

// MaxEventBytes is the largest encoded event (value) the store takes: a
// reader holds one whole value in memory, and the memory plan bounds it
// by the segment files' target size, from the store's memory share
// (4..256 MiB). Put leaves larger events out of the write (Ack.TooLarge)
// instead of failing it.
func (s *Store) MaxEventBytes() int64 { return s.plan.ValueLogFileSz }

// Open opens (or creates) the store in opts.Dir. A store whose schema
// record names another value encoding version is refused (ErrStoreVersion).
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: no directory")
	}
	opts.defaults()
	if !opts.Sync.valid() {
		return nil, fmt.Errorf("store %s: sync policy %q: %s", opts.Dir, opts.Sync, syncWant)
	}
	if opts.ReadOnly {
		// Without this, badger's own "no manifest found, required for
		// read-only db" is what a reader of a wrong directory sees.
		if _, err := os.Stat(filepath.Join(opts.Dir, "MANIFEST")); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("store %s: %w: it has no store files (MANIFEST); give the directory a node's store.path names", opts.Dir, ErrNotAStore)
		}
	}
	lock, err := lockDir(opts.Dir, opts.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
	}
	s, err := open(opts)
	if err != nil {
		lock.release()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// open is Open under the directory's lock.
func open(opts Options) (*Store, error) {
	empty, err := emptyLogs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
	}
	if len(empty) > 0 && opts.ReadOnly {
		return nil, fmt.Errorf("store %s: %w: empty log file %s left by a killed writer; open it read-write once to recover it",
			opts.Dir, ErrNeedsRecovery, filepath.Base(empty[0]))
	}
	var rec Recovery
	if !opts.ReadOnly {
		rec.PreviousPID, rec.Dirty = lockPID(opts.Dir)
	}
	for _, p := range empty {
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
		}
		rec.EmptyLogsRemoved++
	}
	before := logBytes(opts.Dir)
	plan := planMemory(&opts)
	db, err := badger.Open(badgerOptions(&opts, plan))
	// badger wraps ErrTruncateNeeded without %w, so errors.Is cannot see it.
	if opts.ReadOnly && err != nil && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
		return nil, fmt.Errorf("store %s: %w: it was not closed cleanly (writer killed?); open it read-write once to recover it (%v)",
			opts.Dir, ErrNeedsRecovery, err)
	}
	// badger says it in text only.
	if err != nil && strings.Contains(err.Error(), "Cannot acquire directory lock") {
		return nil, fmt.Errorf("store %s: %w (%v)", opts.Dir, ErrLocked, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
	}
	s := &Store{opts: opts, db: db, stop: make(chan struct{}), pool: recycle.New(recycle.Limits{MinSize: cursorPoolMin, MaxHeld: int(plan.CursorPool)}),
		plan: plan, trim: newTrimmer(opts.Dir, plan.Mapped)}
	s.dcond = sync.NewCond(&s.dmu)
	if s.segs, err = openSegments(opts.Dir, plan.ValueLogFileSz, opts.Sync, plan.Staging); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
	}
	if rec.Dirty || rec.EmptyLogsRemoved > 0 {
		rec.LogBytesCut = max(0, before-logBytes(opts.Dir))
		s.recovery = rec
	}
	if err := s.loadSchema(); err != nil {
		db.Close()
		return nil, err
	}
	s.plugins = newPluginTable()
	if err := s.plugins.load(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", opts.Dir, err)
	}
	if rec.Dirty {
		if s.recovery.SegmentEntriesDropped, err = s.verifyLastSegment(); err != nil {
			db.Close()
			return nil, fmt.Errorf("store %s: verifying the last segment file: %w", opts.Dir, err)
		}
	}
	s.guard = newGuard(opts.Dir, uint64(opts.MinFreeBytes), uint64(opts.MaxStoreBytes), opts.statfs)
	if s.m, err = newMetrics(opts.Registerer, s.DirectWrites); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: metrics: %w", opts.Dir, err)
	}
	if !opts.ReadOnly {
		s.guard.refresh(s.m)
	}
	s.wg.Add(1)
	go s.background()
	return s, nil
}

// DirectWrites reports whether the store writes its segment files with
// O_DIRECT: false when store.page_cache asked for the page cache, when the
// plan left no staging buffer, for a read-only store, and from the moment
// the file system refused O_DIRECT (the store then writes through the page
// cache; it does not retry). The node logs the refusal, and the
// sluice_store_direct_writes gauge shows it.
func (s *Store) DirectWrites() bool {
	return !s.opts.ReadOnly && s.plan.Staging >= dioAlign && !s.segs.refused.Load()
}

// emptyLogs lists zero-length memtable (.mem) and value-log (.vlog) files.
// A process killed between creating such a file and sizing it leaves one
// behind, and badger v4.9.6 then refuses to open the directory ("while
// opening fid: N err: Create a new file"); seen in TestReplayKilled. An
// empty file holds no entry, so a read-write Open removes them.
func emptyLogs(dir string) ([]string, error) {
	return scanDir(dir, func(e fs.DirEntry) (string, bool) {
		if ext := filepath.Ext(e.Name()); ext != ".mem" && ext != ".vlog" {
			return "", false
		}
		fi, err := e.Info()
		return filepath.Join(dir, e.Name()), err == nil && fi.Mode().IsRegular() && fi.Size() == 0
	})
}

// loadSchema reads the schema record; a version-1 store opened for
// writing is marked version 2 first, since its next writes put pointers
// into segment files in it, which a version-1 build cannot read (it
// refuses the store, naming the version, instead).
func (s *Store) loadSchema() error {
	var raw []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(metaSchemaKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		raw, err = it.ValueCopy(nil)
		return err
	})
	if err != nil || raw == nil {
		return err
	}
	ss, err := parseStoreSchema(s.opts.Dir, raw)
	if err != nil {
		return err
	}
	if ss.ValueVersion != FormatVersion && !s.opts.ReadOnly {
		up := *ss
		up.ValueVersion = FormatVersion
		b, err := encodeStoreSchema(&up)
		if err != nil {
			return err
		}
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(metaSchemaKey, b) }); err != nil {
			return fmt.Errorf("store %s: marking the store format %d: %w", s.opts.Dir, FormatVersion, err)
		}
		ss = &up
	}
	s.schema.Store(ss)
	return nil
}

// Close stops the background loops, makes every acknowledged write durable
// (unless the policy is SyncNever) and closes the database.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.wg.Wait()
	err := s.segs.close()
	if err == nil && !s.opts.ReadOnly && s.opts.Sync != SyncNever {
		err = s.db.Sync()
		if err == nil {
			s.markDurable(s.seq.Load())
		}
	}
	s.dmu.Lock()
	s.dcond.Broadcast()
	s.dmu.Unlock()
	s.m.unregister()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.lock.release()
	return err
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.opts.Dir }

// Put writes rows of batch (row indices; nil: every row) to stream
// (Accepted, Deferred, or Shadow, whose events get no provenance record), row i
// with the trigger's verdict verdicts[i] (len(verdicts) == batch.Len()):
// its decision, lines, stage and reason text are stored with the event, and
// its status bits are added to the event's. Rows are written with one
// badger WriteBatch; an event already stored under the same (run, event id)
// is replaced. The first Put fixes the store's schema; later batches must
// have the same mode and source groups (ErrSchemaMismatch). Put refuses the
// whole batch with a *DiskBudgetError (ErrDiskBudget) when the disk budget
// would be passed. On success every row is in the store; Ack.Durable says
// whether it is durable yet (see SyncPolicy and WaitDurable).
func (s *Store) Put(stream Stream, batch *schemas.EventBatch, verdicts []schemas.Verdict, rows []int) (Ack, error) {
	commits := s.commits.Load()
	if s.closed.Load() {
		return Ack{}, ErrClosed
	}
	if stream != Accepted && stream != Deferred && stream != Shadow {
		return Ack{}, fmt.Errorf("store put: invalid stream %d", stream)
	}
	// A shadow event's provenance is its production event's.
	noProvenance := s.noProvenance || stream == Shadow
	if len(verdicts) != batch.Len() {
		return Ack{}, fmt.Errorf("store put: %d verdicts for %d events", len(verdicts), batch.Len())
	}
	if rows == nil {
		rows = allRows(batch.Len())
	}
	for _, i := range rows {
		if i < 0 || i >= batch.Len() {
			return Ack{}, fmt.Errorf("store put: row %d of a batch of %d events", i, batch.Len())
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	start := time.Now()
	newSchema, err := s.checkSchema(batch)
	if err != nil {
		return Ack{}, err
	}
	size, psize := 0, 0 // events' keys and values; provenance records' (a bound)
	bu := s.bu.Load()
	var tooLarge []int
	for _, i := range rows {
		if err := validateVerdict(&verdicts[i]); err != nil {
			return Ack{}, fmt.Errorf("store put: row %d: %w", i, err)
		}
		n := encodedSize(batch, i, &verdicts[i])
		if int64(n) > s.MaxEventBytes() {
			tooLarge = append(tooLarge, i)
			continue
		}
		size += KeySize + n
		if !noProvenance {
			psize += KeySize + 2 + builtBound(batch, i, bu) + provBound(&verdicts[i])
		}
	}
	if tooLarge != nil {
		// Badger would fail the whole write (and a 1 KiB hex dump with it).
		kept := make([]int, 0, len(rows)-len(tooLarge))
		for _, i := range rows {
			if !slices.Contains(tooLarge, i) {
				kept = append(kept, i)
			}
		}
		if rows = kept; len(rows) == 0 {
			return Ack{TooLarge: tooLarge, Durable: true}, nil
		}
	}
	if err := s.guard.admit(uint64(size+psize), s.m); err != nil {
		s.m.refused.Inc()
		return Ack{}, err
	}
	defer s.guard.wrote(uint64(size + psize))
	// The values go to the active segment file with one writev(2) (and,
	// under SyncEveryBatch, one fdatasync) before their index entries go to
	// badger: an entry never points at bytes not written. The payloads are
	// written from the batch itself; the arena holds the rest of the
	// values, then the keys and pointers until Flush returns (a WriteBatch
	// keeps references, not copies, until its commit), and the provenance
	// records (psize bounds them). It is never outgrown, so the pieces
	// taken from it stay valid.
	payload := 0
	for _, i := range rows {
		for g := range batch.Groups {
			payload += len(batch.GroupPayload(g, i))
		}
	}
	need := size - KeySize*len(rows) - payload + (KeySize+ptrSize)*len(rows) + psize
	if cap(s.arena) < need {
		s.arena = make([]byte, 0, need)
	}
	buf := s.arena[:0]
	parts := s.parts[:0]
	ends := s.ends[:0] // per row: its value's end in the file's bytes, and its last piece
	total := 0
	for _, i := range rows {
		h0 := len(buf)
		buf = appendValueHead(buf, batch, i, &verdicts[i], batch.Status(i)|verdicts[i].Status)
		for g := range batch.Groups {
			buf = appendGroupHead(buf, batch, g, i)
			p := batch.GroupPayload(g, i)
			parts = append(parts, buf[h0:len(buf):len(buf)], p)
			total += len(buf) - h0 + len(p)
			h0 = len(buf)
		}
		if len(batch.Groups) == 0 {
			parts = append(parts, buf[h0:len(buf):len(buf)])
			total += len(buf) - h0
		}
		ends = append(ends, total, len(parts))
	}
	s.parts, s.ends = parts, ends
	// The pieces view the batch's buffers, which the caller frees after
	// Put: keep no reference to them.
	defer clear(parts)
	replaced, err := s.countStored(stream, batch, rows)
	if err != nil {
		return Ack{}, fmt.Errorf("store put: %w", err)
	}
	seg, off, err := s.segs.appendParts(parts, s.opts.Sync == SyncEveryBatch)
	if err != nil {
		return Ack{}, fmt.Errorf("store put: %w", err)
	}
	defer s.segs.indexed(seg)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	if newSchema != nil {
		if err := wb.Set(metaSchemaKey, newSchema); err != nil {
			return Ack{}, fmt.Errorf("store put: %w", err)
		}
	}
	at := uint64(start.UnixNano())
	var unstored []uint32 // plugin table entries to write with the events
	start0, part0 := 0, 0
	s.plugins.mu.Lock()
	for r, i := range rows {
		end, partEnd := ends[2*r], ends[2*r+1]
		var crc uint32
		for _, p := range parts[part0:partEnd] {
			crc = crc32.Update(crc, castagnoli, p)
		}
		k := Key{Run: batch.Run(i), EventID: batch.EventID(i)}
		k0 := len(buf)
		buf = appendKey(buf, stream, k)
		p0 := len(buf)
		buf = appendPtr(buf, valuePtr{seg: seg, off: off + int64(start0), n: uint32(end - start0), crc: crc})
		if err := wb.Set(buf[k0:p0:p0], buf[p0:len(buf):len(buf)]); err != nil {
			s.plugins.mu.Unlock()
			return Ack{}, fmt.Errorf("store put: %w", err)
		}
		start0, part0 = end, partEnd
		if noProvenance {
			continue
		}
		q0 := len(buf)
		buf = appendProvKey(buf, k)
		v0 := len(buf)
		s.built = appendBuilt(s.built[:0], batch.DuplicateSources(i), batch.LateSources(i), bu, batch.Assignment(i))
		buf = s.plugins.newProvenance(buf, s.built, false, at, &verdicts[i], &unstored)
		if err := wb.Set(buf[q0:v0:v0], buf[v0:len(buf):len(buf)]); err != nil {
			s.plugins.mu.Unlock()
			return Ack{}, fmt.Errorf("store put: %w", err)
		}
	}
	recs, err := s.plugins.records(unstored)
	s.plugins.mu.Unlock()
	if err != nil {
		return Ack{}, fmt.Errorf("store put: plugin table: %w", err)
	}
	for _, kv := range recs {
		if err := wb.Set(kv[0], kv[1]); err != nil {
			return Ack{}, fmt.Errorf("store put: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return Ack{}, fmt.Errorf("store put: %w", err)
	}
	s.plugins.markStored(unstored)
	s.checkPut(stream, batch, rows, commits)
	if newSchema != nil {
		ss, _ := parseStoreSchema(s.opts.Dir, newSchema)
		s.schema.Store(ss)
	}
	ack, err := s.written(len(rows), int64(size-KeySize*len(rows)))
	ack.Replaced, ack.TooLarge = replaced, tooLarge
	s.m.replaced.WithLabelValues(stream.String()).Add(float64(replaced))
	if err != nil {
		return ack, fmt.Errorf("store put: %w", err)
	}
	s.m.written(time.Since(start))
	return ack, nil
}

// allRows is 0, 1, ..., n-1.
func allRows(n int) []int {
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	return rows
}

// countStored counts the given rows of batch already stored in stream: a resent
// batch replaces its events (idempotent), but a replaced event is also
// what an event id collision looks like, so it is counted, not silent.
// Key lookups only (bloom filters, no value reads).
func (s *Store) countStored(stream Stream, batch *schemas.EventBatch, rows []int) (int, error) {
	n := 0
	var kb [KeySize]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, i := range rows {
			_, err := txn.Get(appendKey(kb[:0], stream, Key{Run: batch.Run(i), EventID: batch.EventID(i)}))
			switch {
			case err == nil:
				n++
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
		}
		return nil
	})
	return n, err
}

// checkSchema returns the encoded schema record to write when the store
// has none yet, or an error if batch does not match the stored schema.
func (s *Store) checkSchema(batch *schemas.EventBatch) ([]byte, error) {
	if ss := s.schema.Load(); ss != nil {
		return nil, ss.matches(batch)
	}
	return encodeStoreSchema(newStoreSchema(batch.Mode, batch.Groups))
}

// written records a flushed write: gives it a sequence number and, under
// SyncEveryBatch, fsyncs the logs.
func (s *Store) written(events int, bytes int64) (Ack, error) {
	seq := s.seq.Add(1)
	ack := Ack{Events: events, Bytes: bytes, Seq: seq}
	switch s.opts.Sync {
	case SyncEveryBatch:
		// A bare db.Sync does not cover an async WriteBatch still pending;
		// callers have flushed before coming here.
		if err := s.syncAll(); err != nil {
			return ack, err
		}
		s.markDurable(seq)
		ack.Durable = true
	case SyncNever:
		s.markDurable(seq)
		ack.Durable = true
	}
	return ack, nil
}

// syncAll makes every write so far durable: the active segment file and
// badger's logs, fsync'ed at the same time. Both calls then usually share
// one journal commit of the file system, where one after the other would
// cost two. An index entry may so become durable before the bytes it
// points at, for an event not acknowledged yet: after a machine crash,
// Open verifies what could be affected (verifyLastSegment).
func (s *Store) syncAll() error {
	errc := make(chan error, 1)
	go func() { errc <- s.segs.sync() }()
	err := s.db.Sync()
	if serr := <-errc; err == nil {
		err = serr
	}
	return err
}

func (s *Store) markDurable(seq uint64) {
	s.dmu.Lock()
	if seq > s.durable.Load() {
		s.durable.Store(seq)
	}
	s.dcond.Broadcast()
	s.dmu.Unlock()
}

// WaitDurable blocks until the write with sequence number seq (Ack.Seq) is
// durable under the sync policy, ctx is done, or the store is closed.
func (s *Store) WaitDurable(ctx context.Context, seq uint64) error {
	stop := context.AfterFunc(ctx, func() {
		s.dmu.Lock()
		s.dcond.Broadcast()
		s.dmu.Unlock()
	})
	defer stop()
	s.dmu.Lock()
	defer s.dmu.Unlock()
	for s.durable.Load() < seq {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.closed.Load() {
			return ErrClosed
		}
		s.dcond.Wait()
	}
	return nil
}

// background runs the interval fsync, the disk-budget re-check and the
// value-log GC until Close.
func (s *Store) background() {
	defer s.wg.Done()
	never := make(<-chan time.Time)
	syncC, gcC, guardC := never, never, never
	if s.opts.Sync == SyncInterval && !s.opts.ReadOnly {
		t := time.NewTicker(s.opts.SyncInterval)
		defer t.Stop()
		syncC = t.C
	}
	if s.opts.GCInterval > 0 && !s.opts.ReadOnly {
		t := time.NewTicker(s.opts.GCInterval)
		defer t.Stop()
		gcC = t.C
	}
	if !s.opts.ReadOnly {
		t := time.NewTicker(s.opts.GuardInterval)
		defer t.Stop()
		guardC = t.C
	}
	// Mapped pages: Put, Commit and cursors trim them after a quarter of
	// their bound went through (trimmer.touched); the tick catches what
	// else brings pages in (badger's compactions, value-log GC).
	trimT := time.NewTicker(trimPeriod)
	defer trimT.Stop()
	ticks := 0
	for {
		select {
		case <-s.stop:
			return
		case <-syncC:
			// Everything flushed up to seq is in the logs; one fsync makes
			// all of it durable.
			seq := s.seq.Load()
			if seq > s.durable.Load() {
				if err := s.syncAll(); err != nil {
					s.m.syncErrors.Inc()
				} else {
					s.markDurable(seq)
				}
			}
		case <-guardC:
			s.guard.refresh(s.m)
		case <-gcC:
			s.RunGC()
		case <-trimT.C:
			if ticks++; s.trim.due() || ticks%10 == 0 {
				s.trim.trim()
			}
		}
	}
}

// trimPeriod is how often the store checks whether its mapped files' pages
// need trimming.
const trimPeriod = 50 * time.Millisecond

// Memory is the store's memory bound and the peak of its mapped files'
// resident pages so far.
func (s *Store) Memory() MemoryStats {
	peak, trims := s.trim.stats()
	return MemoryStats{BoundBytes: s.plan.Bytes(), MappedBound: s.plan.Mapped, MappedPeakBytes: peak, StagingBytes: s.segs.stagingBytes(), Trims: trims}
}
