// Package storage is sluice's event store: the accepted and deferred
// streams of a node in one badger (v4) database, the replay cursor and its
// exactly-once commit, the disk budget, value-log GC, export to Arrow IPC,
// Parquet and foreign per-event formats, statistics and metrics.
//
// # Keys
//
// Every event key is 13 bytes, all fields big-endian so that badger's byte
// order is (stream, run, event id) order:
//
//	| off | size | field    | meaning                                        |
//	|-----|------|----------|------------------------------------------------|
//	|   0 |    1 | stream   | 1 accepted, 2 deferred (Stream)                |
//	|   1 |    4 | run      | run number                                     |
//	|   5 |    8 | event_id | event id (timeslice index in timeslice mode)   |
//
// (run, event id) identifies an event in a stream: writing it again
// replaces it, which makes a resent batch idempotent. The store's own
// records have first byte 0: "\x00schema", "\x00ledger", "\x00lines"
// (JSON: stage name -> its trigger line names, bit i named by entry i) and
// one "\x00run" + run number (4 bytes big-endian) per run that ended
// normally on the store (Store.EndRun), holding the end time as uint64 Unix
// nanoseconds little-endian: a start with that run number is a rerun.
//
// # Event value, encoding version 1
//
// Little-endian. A 56-byte header, then variable parts in this order:
//
//	| off | size  | field           | meaning                                              |
//	|-----|-------|-----------------|------------------------------------------------------|
//	|   0 |     1 | version         | ValueVersion (1); other versions are refused         |
//	|   1 |     1 | decision        | schemas.Decision: 0 none, 1 accept, 2 reject, 3 defer |
//	|   2 |     2 | n_groups        | source groups (as in the store's schema record)      |
//	|   4 |     4 | run             | run number (must equal the key's)                    |
//	|   8 |     8 | event_id        | event id (must equal the key's)                      |
//	|  16 |     8 | timestamp_ns    | schemas.ColTimestamp, ns                             |
//	|  24 |     4 | status          | schemas.EventStatus bits                             |
//	|  28 |     4 | n_fragments     | fragments in the event                               |
//	|  32 |     8 | trigger_lines   | bit mask of the trigger lines that fired             |
//	|  40 |     4 | stage_len S     | bytes of the deciding stage's name                   |
//	|  44 |     4 | reason_len R    | bytes of the reason (why it was deferred, ...)       |
//	|  48 |     4 | n_missing M     | missing source ids                                   |
//	|  52 |     4 | n_corrupt C     | corrupt source ids                                   |
//	|  56 |     S | stage           | UTF-8                                                |
//	|     |     R | reason          | UTF-8                                                |
//	|     |    4M | missing_sources | uint32 source ids                                    |
//	|     |    4C | corrupt_sources | uint32 source ids                                    |
//	|     |       | group × n_groups | in the schema's group order:                        |
//	|     |     4 |   n_sizes N     | sources of the group                                 |
//	|     |     8 |   payload_len P | payload bytes of the group                           |
//	|     |    4N |   sizes         | uint32 payload size per source, group order          |
//	|     |     P |   payload       | the group's payloads back to back                    |
//
// These are exactly the columns of one row of a schemas event batch plus
// the trigger's verdict (schemas.Verdict), so a replayed batch is rebuilt with the
// builder's schema. A value must end after the last group. Decoding errors
// are *schemas.DecodeError with the byte offset in the value.
//
// # Schema record
//
// "\x00schema" holds JSON: {"value_version": 1, "mode": "event",
// "groups": [{"name": "velo", "sources": "0-511"}, ...]} (sources as
// schemas.FormatSourceList). The first Put writes it; later batches must
// match it; Open refuses a store whose value_version is not ValueVersion,
// naming the version. From it a reader rebuilds schemas.EventSchema.
//
// # Ledger record
//
// "\x00ledger" holds three uint64 little-endian counters: events accepted,
// rejected and kept deferred by replay commits, updated in each commit's
// transaction (see Commit).
//
// # Replay
//
// A Cursor reads the deferred stream in key order as Arrow record batches
// with the builder's schema; Commit applies the trigger outcomes of one
// batch in ONE badger transaction (accepted events written to the accepted
// stream, processed events deleted from the deferred stream, the ledger
// updated). A transaction is applied whole or not at all after a crash; a
// WriteBatch is split into several transactions when large, so it is used
// only for Put, where every event stands alone. A replay killed at any
// point and restarted therefore decides every deferred event exactly once.
//
// # Export
//
// Arrow IPC files and Parquet (uncompressed, Arrow schema stored) have the
// event schema's columns followed by decision (uint8), trigger_lines
// (uint64), stage and reason (utf8). FormatRows writes one record per event
// made by a caller's RowEncoder (`sluice store export --format mdf` uses
// the LHCb joiner of schemas/lhcb).
//
// # Durability and disk
//
// Put writes one badger WriteBatch, flushes it, and under SyncEveryBatch
// fsyncs before acknowledging; see SyncPolicy. Values go to badger's value
// log (ValueThreshold 1 KiB), which badger writes through memory maps: a
// full file system would kill the process with SIGBUS, so every write is
// first checked against the disk budget (Options.MinFreeBytes,
// Options.MaxStoreBytes), which refuses it with ErrDiskBudget and raises
// backpressure (Store.Writable) instead.
package storage
