// Package readout brings multi-fragment packets (MFPs, see package schemas)
// into a sluice node and hands them to the event builder: from a
// shared-memory readout ring (the layout a PCIe readout board's DMA engine
// and its driver use), from TCP streams with credit-based flow control, from
// UDP datagrams with sequence numbers, and from native MFP files. It also
// holds the readout emulator behind `sluice readout`, which stands in for
// the boards.
//
// Every input implements Input and feeds a Sink (the builder). A packet's
// bytes stay valid until the sink calls its release func; only then is the
// ring space acknowledged or the TCP credit returned, so a slow builder
// throttles the readout instead of losing data. Nothing is dropped without a
// counter and a reason (Stats.Discarded).
//
// # Shared-memory readout ring (version 1)
//
// One file /dev/shm/NAME: a 4096-byte control page, then a data region of
// DataSize bytes (a power of two). All integers little-endian (host order,
// x86-64 and arm64). The write and ack pointers are free-running byte counts
// (never wrapped; the position in the data region is pointer mod DataSize);
// the writer may write while write+record-ack <= DataSize, so space is
// reused only after the reader acknowledged it. Fields written by different
// sides are on different cache lines.
//
//	| off | size | field          | written by | meaning                                          |
//	|-----|------|----------------|------------|--------------------------------------------------|
//	|   0 |    8 | magic          | writer     | 0x31474E4952534C53, the bytes "SLSRING1"         |
//	|   8 |    4 | version        | writer     | 1                                                |
//	|  12 |    4 | control_size   | writer     | 4096                                             |
//	|  16 |    8 | data_size      | writer     | bytes in the data region, power of two           |
//	|  64 |    8 | write          | writer     | end of the last published record (bytes)         |
//	|  72 |    4 | write_seq      | writer     | futex word, incremented to wake the reader       |
//	|  76 |    4 | reader_waiting | reader     | 1 while the reader sleeps on write_seq           |
//	|  80 |    4 | writer_pid     | writer     | process id of the writer                         |
//	|  84 |    4 | writer_state   | writer     | 0 writing, 1 closed cleanly (reader: EOF at end) |
//	|  88 |    8 | writer_beat    | writer     | writer heartbeat, unix time in ns                |
//	|  96 |    8 | throttle_ns    | writer     | total ns the writer waited for space (busy)      |
//	| 112 |    8 | writer_wake_at | writer     | sleeping writer: wake me once ack >= this        |
//	| 128 |    8 | ack            | reader     | end of the acknowledged prefix (bytes)           |
//	| 136 |    4 | ack_seq        | reader     | futex word, incremented to wake the writer       |
//	| 140 |    4 | writer_waiting | writer     | 1 while the writer sleeps on ack_seq             |
//	| 144 |    4 | reader_pid     | reader     | process id of the reader, 0 when none attached   |
//	| 152 |    8 | reader_beat    | reader     | reader heartbeat, unix time in ns                |
//	| 160 |    8 | reader_wake_at | reader     | sleeping reader: wake me once write >= this      |
//
// The magic is stored last and the file renamed into place only then, so a
// reader never sees a half-initialized ring.
//
// The data region holds records, each starting on a 64-byte boundary:
//
//	| off | size | field  | meaning                                                  |
//	|-----|------|--------|----------------------------------------------------------|
//	|   0 |    4 | length | bytes of the packet that follows (0 for a skip)          |
//	|   4 |    4 | kind   | 1 packet; 2 skip: the rest of this lap is padding        |
//	|   8 |    8 | seq    | records written by this writer before this one           |
//	|  16 |  len| packet | one MFP as the source sent it; then zero padding to 64 B  |
//
// A record never straddles the end of the region: when it does not fit, the
// writer writes a skip record and starts the packet at offset 0 of the next
// lap, publishing both with one store of the write pointer.
//
// Wake-ups use futexes on the shared mapping (write_seq, ack_seq),
// coalesced like a board's interrupts: a sleeping side asks to be woken only
// once 1/8 of the ring (at most 1 MiB) is ready for it (*_wake_at) and
// otherwise sleeps at most 1 ms. Every 20 ms without progress each side
// checks the other's liveness: a pid that has exited (or is a zombie) or a
// heartbeat older than StaleAfter (default 2 s) is reported as
// ErrWriterDead / ErrReaderDead instead of waiting forever. The reader delivers every complete packet before it reports the
// writer dead. A reader that restarts resumes at the ack pointer, so packets
// read but not acknowledged are read again (at-least-once delivery); a
// writer waiting for space gives a dead reader ReaderGrace (default 5 s) to
// be replaced before it reports ErrReaderDead.
//
// # TCP readout stream (version 1)
//
// One connection per source or board; any number at once; a sender that
// loses its connection reconnects and starts a new stream. Little-endian:
//
//	| direction         | bytes | content                                                |
//	|-------------------|-------|--------------------------------------------------------|
//	| sender → receiver |     4 | preamble magic 0x53544C53, the bytes "SLTS"            |
//	| sender → receiver |     4 | preamble version 1                                     |
//	| receiver → sender |     8 | credit grant: bytes the sender may send more (u64);    |
//	|                   |       | the first is the window, then as the sink releases     |
//	| sender → receiver |     4 | frame length L (u32); 0 ends the stream cleanly        |
//	| sender → receiver |     L | one MFP                                                |
//
// A sender never has more frame bytes (L, prefixes not counted) in flight
// than it was granted; the receiver closes a connection that does
// (ReasonProtocol). Credits return in batches of 1/8 of the window, or at
// once when the sink holds nothing more of the connection. A frame cut by a
// disconnect is counted as ReasonTruncatedAtDisconnect and never handed on.
// The receiver reads into pooled 1 MiB chunks and hands frames on as views
// of them, so the credit window also bounds the chunks held.
//
// # UDP datagrams
//
//	| off | size | field    | meaning                                                    |
//	|-----|------|----------|------------------------------------------------------------|
//	|   0 |    8 | sequence | u64 little-endian, +1 per datagram, one space per sender   |
//	|   8 |  ... | payload  | one MFP (format=mfp) or one VDIF frame (format=vtp: VTP)   |
//
// A datagram of only the 8 bytes ends the stream: its number is the count of
// numbers the sender used, so a loss at the very end is counted too. The
// receiver keeps a reordering window per sender (ReorderWindow datagrams,
// LatencyBudget of waiting), as VLBI_UDP does: a missing number is declared
// lost when the window or the budget passes it; if it arrives afterwards it
// is counted late and dropped; a number received twice is a duplicate.
package readout
