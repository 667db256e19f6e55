// Package tcp is the TCP readout stream transport (tcp://HOST:PORT): the
// node's Input, which listens for any number of connections, and the
// Sender a readout board (or the emulator) runs, with credit-based flow
// control so that a slow node throttles its senders instead of losing data.
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
// (transport.Protocol). Credits return in batches of 1/8 of the window, or at
// once when the sink holds nothing more of the connection. A frame cut by a
// disconnect is counted as transport.TruncatedAtDisconnect and never handed on.
// The receiver reads into pooled chunks (an eighth of the window, 4 KiB to
// 1 MiB) and hands frames on as views of them. A chunk the receiver has
// read past but whose frames the sink still holds counts whole against
// the window (the grants withhold the rest of it until it is freed), so
// that one connection holds at most its window plus one chunk however
// its frames are pinned: the node's memory budget counts that per expected
// stream (Options.MemoryBytes).
package tcp
