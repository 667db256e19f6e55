// Package farm is what makes many sluice nodes build every event once: the
// messages nodes exchange, the event manager (EM) that assigns work to
// builder units (BUs), the farm ledger, and the pure trackers the readout
// units (RUs) and BUs keep. Nothing in this package does I/O: the EM and
// the trackers are state machines driven by method calls and a Clock, so
// the same code runs under the peer transport, under etcd, and in tests
// that kill nodes at random (see control for the etcd side).
//
// # Work and its names
//
// An assignment is one unit of the readout's own packing (Unit): ranges of
// event ids, as named by the RU that holds the trigger source (CMS's EVM),
// or ranges of packet sequence numbers (LHCb's MEPs), within one (run,
// resync). Each assignment has its own id from a block the EM reserved in
// etcd, the BU it goes to, that BU's incarnation (its etcd lease id) and
// the EM epoch (its election revision) that made it. A reassignment gets a
// new id and names the id it supersedes.
//
// # Messages (version 1)
//
// Little-endian. Every message starts with the same 12-byte header; the
// transport delimits messages, and size must equal the bytes delivered.
// Reserved bytes must be 0, so every valid message has exactly one
// encoding (decoding then encoding gives the same bytes).
//
//	| off | size | field    | meaning                                          |
//	|-----|------|----------|--------------------------------------------------|
//	|   0 |    4 | magic    | 0x4D464C53, the bytes "SLFM"                     |
//	|   4 |    1 | version  | 1                                                |
//	|   5 |    1 | kind     | 1 hello, 2 bye, 3 heartbeat, 4 credit, 5 assign, |
//	|     |      |          | 6 request, 7 data, 8 release, 9 announce,        |
//	|     |      |          | 10 inventory, 11 duplicate, 12 end               |
//	|   6 |    2 | reserved | 0                                                |
//	|   8 |    4 | size     | bytes of the whole message, header included      |
//
// A str is a 1-byte length n then n bytes (so at most 255 bytes). Node ids
// (node, bu) are never empty.
//
// Hello (kind 1), node → peer or EM, first on every connection; Bye (kind
// 2) when a drained node leaves. A peer of another farm or with another
// token is refused and counted.
//
//	| off | size | field        | meaning                                      |
//	|-----|------|--------------|----------------------------------------------|
//	|  12 |    8 | incarnation  | the sender's etcd lease id                   |
//	|  20 |    1 | roles        | bits: 1 RU, 2 BU, 4 EM candidate             |
//	|  21 |    3 | reserved     | 0                                            |
//	|  24 |    4 | n_ranges     | source ranges at the end                     |
//	|  28 |  str | farm         | farm id                                      |
//	|     |  str | token        | the farm's shared token                      |
//	|     |  str | node         | node id                                      |
//	|     |  str | address      | transport address others connect to          |
//	|     |  8·n | sources      | (first u32, last u32) inclusive, ascending,  |
//	|     |      |              | separated by at least one id; 2^20 ids total |
//
//	Bye:
//	|  12 |    8 | incarnation  |                                              |
//	|  20 |  str | farm, token, node (three str)                               |
//
// Heartbeat (kind 3), every ~100 ms on every connection, each way:
//
//	|  12 |    8 | incarnation  | the sender's                                 |
//	|  20 |    8 | seq          | per connection, from 1                       |
//	|  28 |    8 | unix_ns      | sender's wall clock (int64)                  |
//
// Credit (kind 4), BU → EM: the BU can take events more elements and
// bytes more payload bytes (increments, not totals). The first credit a BU
// sends to an EM of a new epoch is its whole free capacity; later ones
// give back the event slots and the payload bytes of the assignments it
// settled since. The EM charges an assignment an estimate of its bytes
// (the bytes per element its settled assignments had) and, when it
// settles, puts the charge right to the bytes the BU received: a BU gets
// work only while both credits last (one holding nothing takes an
// assignment larger than its byte credit). In the pull protocol a credit
// is the BU asking for work.
//
//	|  12 |    8 | epoch        | of the EM it is meant for                    |
//	|  20 |    8 | incarnation  | the BU's                                     |
//	|  28 |    8 | bytes        | payload bytes more                           |
//	|  36 |    4 | events       | elements more (events, or packets)           |
//	|  40 |  str | bu           | the BU's node id                             |
//
// Assign (kind 5), EM → BU and (push) every RU; Request (kind 6), BU → RU
// (pull), the same fields, asking the RU for the assignment's data. A
// pull BU keeps at most the run's max_requests requests outstanding over
// all its assignments (traffic shaping: that many RUs send to it at a
// time; one stays outstanding until the RU's final data message, its
// death or the assignment's completion; 0: every RU at once):
//
//	|  12 |    8 | epoch        | the EM's that made the assignment            |
//	|  20 |    8 | id           | assignment id, never 0, never reused         |
//	|  28 |    8 | supersedes   | id this one replaces (reassignment), or 0    |
//	|  36 |    8 | incarnation  | the BU's                                     |
//	|  44 |    4 | run          |                                              |
//	|  48 |    4 | resync       | event counter resets within the run          |
//	|  52 |    1 | unit         | 1 event ids, 2 packet sequence numbers       |
//	|  53 |    3 | reserved     | 0                                            |
//	|  56 |    4 | count        | elements: the sum of the ranges' n           |
//	|  60 |    4 | n_ranges     | 1 or more                                    |
//	|  64 |  str | bu           | the BU's node id                             |
//	|     | 12·k | ranges       | (first u64, n u32), n >= 1, ascending,       |
//	|     |      |              | separated by at least one missing number     |
//
// Data (kind 7), RU → BU, one per assignment per RU: this header as the
// transport's data header, the RU's multi-fragment packets for the
// assignment as its payload.
//
//	|  12 |    8 | assignment   | assignment id                                |
//	|  20 |    8 | incarnation  | the BU's (data for an old incarnation is     |
//	|     |      |              | dropped, counted)                            |
//	|  28 |    8 | payload      | payload bytes that follow                    |
//	|  36 |    4 | group        | source group index in the run configuration, |
//	|     |      |              | 0xFFFFFFFF when packets of several groups    |
//	|  40 |    4 | packets      | multi-fragment packets in the payload        |
//	|  44 |    4 | flags        | 1 final (the RU's last data message for it), |
//	|     |      |              | 2 missing (some of the RU's sources had no   |
//	|     |      |              | data for part of it)                         |
//
// Release (kind 8), BU → EM, grouped (release_group entries at a time):
// the BU has reached outcome for each assignment. The EM relays to every
// RU the entries it accepted that reach the run's release policy, and an
// RU frees an assignment's bytes only on such a relay: the EM alone
// decides, in one order, whether an assignment was released or is
// reassigned (a BU release reaching the RUs while the EM, told first of
// the BU's death, reassigns the work would leave the reassignment without
// data; ATLAS's DFM sends the clears to the ROSs for the same reason).
//
//	|  12 |    8 | incarnation  | the BU's                                     |
//	|  20 |    4 | n            | entries, 1 or more                           |
//	|  24 |  str | bu           | the BU's node id                             |
//	|     | 24·n+| entries      | id u64, outcome u8, flags u8, reserved 2     |
//	|     |      |              | bytes (0), events u32 (events built), bytes  |
//	|     |      |              | u64 (payload bytes received); with flag 1,   |
//	|     |      |              | then m u32 (1 or more) and m ranges (first   |
//	|     |      |              | u64, n u32; ascending, separated): the ids   |
//	|     |      |              | of an assignment of event ids no RU's data   |
//	|     |      |              | reached the BU for (no event built: lost,    |
//	|     |      |              | timed_out). Other flags are refused.         |
//
// Announce (kind 9), RU → EM: the RU holding the trigger source names the
// elements it read (CMS's EVM); the EM assigns them.
//
//	|  12 |    4 | run          |                                              |
//	|  16 |    4 | resync       |                                              |
//	|  20 |    1 | unit         | 1 event ids, 2 packet sequence numbers       |
//	|  21 |    3 | reserved     | 0                                            |
//	|  24 |    4 | count        | elements: the sum of the ranges' n           |
//	|  28 |    4 | n_ranges     | 1 or more                                    |
//	|  32 | 12·k | ranges       | as in assign                                 |
//
// Inventory (kind 10), BU and RU → a new EM: a BU's assignments in
// flight and lately settled, an RU's lately released ones, so the EM
// adopts them rather than assigning their events again (the old EM may
// have died with its messages half sent). The RU holding the trigger
// source sends its inventory after its re-announcements.
//
//	|  12 |    8 | epoch        | of the new EM                                |
//	|  20 |    8 | incarnation  | the sender's                                 |
//	|  28 |    4 | n            | entries (0 or more)                          |
//	|  32 |  str | node         | the sender's node id                         |
//	|     |  ... | entries      | id u64, supersedes u64, epoch u64 (of the EM |
//	|     |      |              | that made it), incarnation u64 (its BU's),   |
//	|     |      |              | reached u8 (0: nothing yet), 3 reserved (0), |
//	|     |      |              | run u32, resync u32, unit u8, 3 reserved,    |
//	|     |      |              | count u32, n_ranges u32, bu str (its BU),    |
//	|     |      |              | then the ranges as in assign                 |
//
// Duplicate (kind 11), BU → EM: the events an earlier incarnation of this
// BU (dead) had stored for assignments the EM gave to other BUs after
// declaring it dead (the EM's void record in etcd names them). The BU has
// voided them in its store; the EM counts them duplicate_after_failover.
//
//	|  12 |    8 | incarnation  | the sender's                                 |
//	|  20 |    8 | dead         | the incarnation that stored them             |
//	|  28 |    4 | run          |                                              |
//	|  32 |    4 | resync       |                                              |
//	|  36 |    1 | unit         | 1 event ids, 2 packet sequence numbers       |
//	|  37 |    3 | reserved     | 0                                            |
//	|  40 |    4 | count        | elements: the sum of the ranges' n           |
//	|  44 |    4 | n_ranges     | 1 or more                                    |
//	|  48 |  str | bu           | the BU's node id                             |
//	|     | 12·k | ranges       | as in assign                                 |
//
// End (kind 12), the RU holding the trigger source → every RU (itself
// included), once per numbering space, when its readout ended or the run
// was stopped (it names nothing after the stop: the trigger stopped):
// the elements it named, all of them. No assignment can hold any other
// element, so an RU frees the packets of the others at once — those of a
// readout that read further than the trigger source — and any that come
// later, counted never_announced by source. Without it such packets were
// held for ever and a stopped node never finished. Sent again to an RU
// that joins later.
//
//	|  12 |    4 | run          |                                              |
//	|  16 |    4 | resync       |                                              |
//	|  20 |    1 | unit         | 1 event ids, 2 packet sequence numbers       |
//	|  21 |    3 | reserved     | 0                                            |
//	|  24 |    4 | n_spans      | 0 or more                                    |
//	|  28 | 16·k | named        | (first u64, last u64) inclusive, ascending,  |
//	|     |      |              | separated by at least one element not named  |
//
// Outcomes: 1 received (every RU's data is in), 2 decided (built and the
// trigger decided), 3 durable (accepted events synced to the store), 4
// returned (given back unbuilt, e.g. by a draining BU: the EM reassigns it).
//
// # Errors
//
// Decoders never panic: bad bytes give a *schemas.DecodeError naming the
// message ("farm.assign", ...), the field, its byte offset and one of the
// schemas sentinels.
package farm
