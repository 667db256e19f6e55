// Package shm is the shared-memory readout ring transport (shm://NAME): the
// ring a PCIe readout board's DMA engine and its driver share with the
// node, its Writer (the board's side, and the emulator's), its Reader and
// the node's Input. The ring is a file under /dev/shm.
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
// lap, publishing both with one store of the write pointer. A writer
// replaying a sample (Writer.WritePlaced, the emulator's file replays) may
// also write a skip record where a pass over the sample starts, when the
// rest of the lap is at most 1/16 of the ring, so that the pass comes round
// at the same places; a reader sees only a skip record, as at a lap's end.
//
// Wake-ups use futexes on the shared mapping (write_seq, ack_seq),
// coalesced like a board's interrupts: a sleeping side asks to be woken only
// once 1/8 of the ring (at most 1 MiB) is ready for it (*_wake_at) and
// otherwise sleeps at most 1 ms. This package's Reader and Writer wake a
// peer that sleeps so, but never sleep in futex(2) themselves (the thread
// would keep a Go P, see park): they leave their *_waiting flag at 0 and
// poll the pointers on Go's timer, on the same terms (1/8 of the ring or
// 1 ms), so that between two of them no futex call is made at all. Every 20 ms without progress each side
// checks the other's liveness: a pid that has exited (or is a zombie) or a
// heartbeat older than StaleAfter (default 2 s) is reported as
// ErrWriterDead / ErrReaderDead instead of waiting forever. The reader delivers every complete packet before it reports the
// writer dead. A reader that restarts resumes at the ack pointer, so packets
// read but not acknowledged are read again (at-least-once delivery); a
// writer waiting for space gives a dead reader ReaderGrace (default 5 s) to
// be replaced before it reports ErrReaderDead.
package shm
