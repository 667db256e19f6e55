// Package tcp is the TCP readout stream transport (tcp://HOST:PORT): the
// node's Input, which listens for any number of connections, and the
// Sender a readout board (or the emulator) runs, with credit-based flow
// control so that a slow node throttles its senders instead of losing data.
//
// # TCP readout stream
//
// One connection per source or board; any number at once; a sender that
// loses its connection reconnects and starts a new stream. The sender
// declares the version in its preamble; the receiver reads both (and
// counts and logs each stream's, Stats.ConnectionsByVersion), Dial sends
// version 2, DialVersion and SenderOptions.StreamVersion either. A
// receiver that reads only version 1 closes a version 2 stream as a
// protocol violation. Little-endian throughout.
//
// Version 2: the preamble, every record's header and every payload with
// its padding are multiples of 64 bytes, so every payload starts at a
// multiple of 64 in the stream, in each write of whole records the sender
// makes and in the receiver's memory: the kernel's copies of it (into the
// socket's pages, which a sender's connections share, and out of them)
// and the builder's are aligned. Grants are batched:
//
//	| direction         | bytes       | content                                                  |
//	|-------------------|-------------|----------------------------------------------------------|
//	| sender → receiver |           4 | preamble magic 0x53544C53, the bytes "SLTS"              |
//	| sender → receiver |           4 | preamble version 2                                       |
//	| sender → receiver |          56 | reserved, zero                                           |
//	| receiver → sender |           8 | credit grant: bytes the sender may send more (u64);      |
//	|                   |             | the first is the window, then as the sink releases       |
//	| sender → receiver |           4 | record header: length L (u32)                            |
//	| sender → receiver |           4 | record header: kind K (u32)                              |
//	| sender → receiver |          56 | record header: reserved, zero                            |
//	| K = 0, L > 0      |           L | one MFP                                                  |
//	|                   | (-L) mod 64 | zero padding                                             |
//	| K = 0, L = 0      |             | end of the stream, nothing follows the header            |
//	| K = 1             |             | credit wanted: the sender waits to send a frame of L     |
//	|                   |             | bytes (1 ≤ L ≤ the window); nothing follows the header   |
//
// The receiver grants the credit the sink released in batches of 1/8 of
// the window, and sooner to a sender that sent a credit wanted record:
// once the credit the sender has and the credit released reach L. A sender
// sends one before each wait for credit, after the frames before it (so a
// frame larger than 7/8 of the window, waiting for less than a batch of
// released credit, is granted). Any other kind closes the connection
// (transport.Protocol).
//
// Version 1 (still read): a frame per MFP, no padding, and a grant as soon
// as the sink holds nothing more of the connection (which, for a sink that
// releases at once, is a grant per frame):
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
// In both, a sender never has more frame bytes (L; headers, padding and
// credit wanted records not counted) in flight than it was granted; the
// receiver closes a connection that does (transport.Protocol). Credits
// return in batches of 1/8 of the window, or sooner as each version says.
// A frame cut by a disconnect is counted as
// transport.TruncatedAtDisconnect and never handed on.
// The receiver reads into pooled chunks (an eighth of the window, 4 KiB to
// 1 MiB) and hands frames on as views of them. A chunk the receiver has
// read past but whose frames the sink still holds counts whole against
// the window (the grants withhold the rest of it until it is freed), so
// that one connection holds at most its window plus one chunk however
// its frames are pinned: the node's memory budget counts that per expected
// stream (Options.MemoryBytes).
package tcp
