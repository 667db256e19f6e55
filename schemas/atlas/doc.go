// Package atlas reads and writes the ATLAS event format ("eformat") v4.0
// and v5.0 (the version ATLAS has written since Run 2): full events, ROB
// fragments and the ROD fragments inside them. Layouts follow the ATLAS
// TDAQ eformat headers (HeaderMarker.h as vendored in
// redeboer/BOSS_ExternalLibs), athena's offline v4.0 readers
// (rolandjansky/athena: v40_Header.cxx, v40_ROBFragment.cxx,
// v40_FullEventFragment.cxx) and, for v5.0, the eformat 5 headers vendored
// in Ish-D/AtlEventProcess (include/eformat/write/FullEventFragment.h and
// write/ROBFragment.h, whose accessors name each header word's index;
// include/eformat/FullEventFragmentNoTemplates.h, the reader's accessors
// in header order); the tables are below.
//
// Every structure is a sequence of 32-bit words in the writer's native byte
// order. Each fragment starts with a marker holding the bytes 0x12 0x34 in
// its middle (e.g. 0xaa1234aa), so a reader on the other endianness sees
// 0xaa3412aa and knows to swap every word; the decoders here accept both
// orders, report which one they found, and the encoders write either.
//
// # Generic header (full event and ROB)
//
//	w0 marker | w1 fragment size (words, all included) | w2 header size
//	(words) | w3 format version (major in the high 16 bits) | w4 source id
//	| w5 nstatus | w6.. status words | checksum type | type-specific words
//
// The payload runs from the end of the header to the end of the fragment,
// less one trailing checksum word when the checksum type is not 0.
//
// # ROB fragment
//
// Header size = 7 + nstatus (no specific words besides the checksum type);
// the payload is one ROD fragment.
//
// # ROD fragment
//
//	w0 0xee1234ee | w1 header size = 9 | w2 version (0x0301xxxx) | w3 source
//	id | w4 run number | w5 extended L1ID | w6 BCID | w7 L1 trigger type |
//	w8 detector event type | status and data words | nstatus | ndata |
//	status position (0: status before data, 1: after)
//
// A ROD has no size word: its size is the enclosing ROB's payload size and
// must equal 12 + nstatus + ndata.
//
// # Full event (v4.0)
//
// After the generic header's status words: checksum type, bc_time_seconds,
// bc_time_nanoseconds, global_id, run_type, run_no, lumi_block, lvl1_id,
// bc_id, lvl1_trigger_type, then four counted lists (n words followed by the
// n words): L1 trigger info, L2 trigger info, EF info, stream tags. Header
// size = 20 + nstatus + the four counts. The payload is the event's ROB
// fragments back to back.
//
// # Full event (v5.0, version word 0x0500xxxx)
//
// The words after the status words, s = 6 + nstatus (eformat 5's writer:
// m_node[2].base[k] is word s+k; the lists follow as in v4.0):
//
//	| word  | field                                                      |
//	|-------|------------------------------------------------------------|
//	| s+0   | checksum type                                              |
//	| s+1   | bc_time_seconds                                            |
//	| s+2   | bc_time_nanoseconds                                        |
//	| s+3   | global_id, low 32 bits                                     |
//	| s+4   | global_id, high 32 bits (64-bit in v5.0)                   |
//	| s+5   | run_type                                                   |
//	| s+6   | run_no                                                     |
//	| s+7   | lumi_block                                                 |
//	| s+8   | lvl1_id                                                    |
//	| s+9   | bc_id                                                      |
//	| s+10  | lvl1_trigger_type                                          |
//	| s+11  | compression_type (0: none)                                 |
//	| s+12  | readable payload size, words once uncompressed (*)         |
//	| s+13  | n, then n L1 trigger info words; then L2 info, HLT info    |
//	|       | (v4.0's EF info) and stream tags, each counted the same    |
//
// Header size = 23 + nstatus + the four counts. (*) The writer's
// accessors name every index but s+12; the reader declares
// compression_type, then readable_payload_size_word, then the list
// counts, which places it there. Only uncompressed payloads are read
// (compression type 0; another is ErrUnsupported); the writer here sets
// s+12 to the payload's size. A v5.0 ROB has the v4.0 ROB layout (header
// 7 + nstatus words, checksum type last), its version word 0x0500xxxx.
//
// # Checksums
//
// Type 0 none, 1 CRC16-CCITT, 2 Adler-32 (eformat/checksum.h). The
// checksum covers exactly the payload words (from the word after the
// header to the word before the checksum word), as athena's
// v40::Header::eval_checksum passes payload() and payload_size_word() =
// fragment size - header size - 1. Both are computed on word values, so
// they do not depend on the byte order on disk: Adler-32 over the words'
// little-endian bytes (eformat passes the word buffer to zlib on x86),
// CRC16-CCITT (poly 0x1021, init 0xFFFF, not reflected, no final xor) over
// each word's bytes most significant first, stored zero-extended. The
// CRC16-CCITT word order is our reading of eformat's "optimised for
// hardware" routine, whose source (checksum.cxx) we could not consult; see
// CRC16CCITT.
//
// # Mapping to sluice
//
// SplitFullEvent turns a full event into one sluice fragment per ROB:
// source id = the ROB's source id, event id = the full event's global_id
// (unique within a run, where lvl1_id restarts at every ECR), payload = the
// ROB fragment in little-endian byte order; plus one fragment from
// HeaderSource with the full-event header and the ROB order.
// Joiner.Join turns a built event back into the full event, byte for
// byte in the byte order asked for.
//
// # Errors
//
// Decoders never panic. Bad input yields a *schemas.DecodeError with the
// byte offset from the start of the buffer passed in: ErrTruncated (the
// buffer ends first), ErrBadMagic (marker), ErrBadVersion (a major version
// other than 4 or 5), ErrUnsupported (a compressed v5.0 payload, an
// unknown checksum type), ErrSizeOverflow
// (a size or count that reaches past its enclosing structure),
// ErrInconsistent, ErrBadHeader, ErrCRCMismatch.
package atlas
