// Package storage is sluice's event store: the accepted and deferred
// streams of a node, their event values in the store's own append-only
// segment files and an index of them in one badger (v4) database (the
// design badger itself follows for its value log), the replay cursor and its
// exactly-once commit, the disk budget, GC, export to Arrow IPC,
// Parquet and foreign per-event formats, statistics and metrics.
//
// # Keys
//
// Every event key is 13 bytes, all fields big-endian so that badger's byte
// order is (stream, run, event id) order:
//
//	| off | size | field    | meaning                                        |
//	|-----|------|----------|------------------------------------------------|
//	|   0 |    1 | stream   | 1 accepted, 2 deferred, 3 void, 4 shadow       |
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
// # Store format versions
//
// The schema record's value_version is the store format:
//
//   - 1: each event's value (below) is the badger value under its key, in
//     badger's value log. Written by builds before segment files.
//   - 2 (FormatVersion): each event's value is in a segment file; the
//     badger value under its key is an index entry pointing at it. A store
//     of version 1 opened for writing is marked 2 (a version-1 build then
//     refuses it, naming the version) and keeps its old values in badger:
//     an index entry's first byte tells the two apart (1: a value, 2: a
//     pointer), so both are read.
//
// Other versions are refused with ErrStoreVersion.
//
// # Index entry (format 2)
//
// The badger value under an event key, 24 bytes, little-endian:
//
//	| off | size | field   | meaning                                         |
//	|-----|------|---------|-------------------------------------------------|
//	|   0 |    1 | version | 2 (a pointer; 1 would be an inline event value)  |
//	|   1 |    3 | zero    |                                                 |
//	|   4 |    4 | segment | segment file id                                 |
//	|   8 |    8 | offset  | byte offset of the event value in that file     |
//	|  16 |    4 | length  | bytes of the event value                        |
//	|  20 |    4 | crc     | CRC-32C (Castagnoli) of the event value bytes   |
//
// A tombstone (Void) holds the entry its event had.
//
// # Segment file
//
// Named as its id in 8 decimal digits plus ".seg" (00000001.seg). A
// 16-byte header, then event values back to back, each where an index
// entry says; bytes no entry points at (values replaced or removed, the
// tail of a batch whose writer was killed before indexing it, the zeros an
// O_DIRECT write filled its last block with when the writer was killed
// before closing the file) are dead until GC copies a file's live values
// out and deletes it.
//
//	| off | size | field   | meaning                                         |
//	|-----|------|---------|-------------------------------------------------|
//	|   0 |    8 | magic   | "SLUICESG"                                      |
//	|   8 |    4 | version | segment format version (1)                      |
//	|  12 |    4 | id      | the id in the file's name                       |
//	|  16 |      | values  | event values, back to back                      |
//
// Files are appended with O_DIRECT from the store's staging buffer
// (direct.go: its last block rewritten by the next write, the file cut
// to its values at close), or with writev(2) through the page cache where
// the file system refuses O_DIRECT or Options.PageCache asks, and read
// with pread(2), never mapped: of the store's memory share they take only
// the staging buffer. Each Open writes to a new
// file after the highest; a file grows past its target size
// (the memory plan's ValueLogFileSz) by at most one batch before the next
// one starts.
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
// # Provenance record, version 2
//
// Beside each event, under key 0x10 + run (4 bytes big-endian) + event id
// (8 bytes big-endian) — stream-independent, so it follows the event from
// the deferred to the accepted stream and stays beside a tombstone —
// how the event was built beyond its own columns and what every trigger
// pass did with it (Store.Why, the export's provenance and built
// columns). Put writes it with the build section and the online pass; a
// replay Commit adds a pass to it in the same transaction (keeping the
// build section), or deletes it with a rejected event. Varints are
// unsigned LEB128 (encoding/binary's Uvarint).
//
//	| size   | field      | meaning                                            |
//	|--------|------------|----------------------------------------------------|
//	|      1 | version    | ProvenanceVersion (2)                              |
//	|      1 | flags      | build section: bit 0 duplicated, bit 1 late, bit 2 |
//	|        |            | builder unit (the parts below present)             |
//	| varint | n_dup D    | bit 0: sources that sent more than one fragment    |
//	| varint×D | dup      |   their ids, ascending                             |
//	| varint | n_late L   | bit 1: sources whose fragment came after the event |
//	| varint×L | late     |   was emitted (and before its batch left the       |
//	|        |            |   builder), ids ascending                          |
//	| varint | bu_len B   | bit 2: the farm builder unit (Store.SetBuildUnit): |
//	|      B | bu         |   node name, UTF-8                                 |
//	| varint | incarnation|   its membership lease id                          |
//	| varint | assignment |   the event manager's assignment id (0: none)      |
//	|      1 | n_passes   | passes, oldest first (at most 255)                 |
//	|        | pass × n_passes:                                                |
//	|      1 |   flags    | bit 0: a replay pass (else the online one)         |
//	| varint |   at       | when the pass was stored, Unix ns                  |
//	|      1 |   n_steps  | stages that saw the event, in chain order          |
//	|        |   step × n_steps:                                               |
//	| varint |     plugin | plugin table index + 1; 0: no stage (node's own)   |
//	|      1 |     decision | schemas.Decision                                 |
//	| varint |     fired  | lines the plugin fired, before the prescales       |
//	| varint |     kept   | lines after the prescales                          |
//	| varint |     reason_len R | bytes of the reason                          |
//	|      R |     reason | UTF-8                                              |
//
// The plugin table is one record per plugin, "\x00plugin" + index (4 bytes
// big-endian) holding schemas.PluginID as JSON ({"stage", "plugin",
// "version", "sha256"}), written with the first event that names it;
// indexes are dense from 0. A two-stage online pass takes about 25 bytes,
// the build section of an event with nothing to say 1 byte.
//
// Version 1 (builds before the build section) is the same without the
// flags byte and what it announces; it is still read (an empty build
// section), and a replay pass added to one writes it as version 2. The
// sources come from the batch's build columns (schemas.BuilderSchema); a
// batch without them (hand-built, or rebuilt from a store) records none.
//
// # Schema record
//
// "\x00schema" holds JSON: {"value_version": 2, "mode": "event",
// "groups": [{"name": "velo", "sources": "0-511"}, ...]} (sources as
// schemas.FormatSourceList; value_version is the store format above). The
// first Put writes it; later batches must match it; Open refuses a store
// whose value_version it does not read, naming the version. From it a
// reader rebuilds schemas.EventSchema.
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
// (uint64), stage and reason (utf8), provenance (a list of
// schemas.ProvenanceStep structs, one per stage per pass) and built (a
// schemas.BuiltColumn struct: duplicated and late sources, builder unit,
// assignment). FormatRows writes one record per event
// made by a caller's RowEncoder (`sluice store export --format mdf` uses
// the LHCb joiner of schemas/lhcb).
//
// # Durability and disk
//
// Put encodes the batch's values back to back and appends them to the
// active segment file with one write(2), then writes their index entries
// with one badger WriteBatch; under SyncEveryBatch it then fsyncs the
// segment file and badger's logs at the same time (the two usually share
// one journal commit of the file system) before acknowledging, so an
// acknowledged event is durable. A replay Commit appends its accepted and
// kept events' new values the same way before its transaction. The
// interval policy's background sync does the same two fsyncs. A file is
// fsync'ed when the next one starts (unless SyncNever), so only the
// highest segment file can hold bytes not yet durable: after an unclean
// shutdown Open reads every value the index points at in it and removes
// the entries whose bytes are not there whole (a machine crash between
// the two fsyncs; such a write was not acknowledged), counted in
// Recovery.SegmentEntriesDropped. A writer killed at any point leaves at
// worst dead bytes in a segment file. After a machine crash under
// SyncNever, an event in an older file may read back with a checksum
// error naming its segment and offset instead of being absent. Badger
// writes its own logs through memory maps: a full file system would kill
// the process with SIGBUS, so every write is first checked against the
// disk budget (Options.MinFreeBytes, Options.MaxStoreBytes), which refuses
// it with ErrDiskBudget and raises backpressure (Store.Writable) instead.
package storage
