// Package atlas reads and writes the ATLAS event format ("eformat") v4.0:
// full events, ROB fragments and the ROD fragments inside them. Layouts
// follow the ATLAS TDAQ eformat headers (HeaderMarker.h as vendored in
// redeboer/BOSS_ExternalLibs) and athena's offline v4.0 readers
// (rolandjansky/athena: v40_Header.cxx, v40_ROBFragment.cxx,
// v40_FullEventFragment.cxx); the tables are below.
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
// buffer ends first), ErrBadMagic (marker), ErrBadVersion / ErrUnsupported
// (a v5.0 full event, whose word order is not verified), ErrSizeOverflow
// (a size or count that reaches past its enclosing structure),
// ErrInconsistent, ErrBadHeader, ErrCRCMismatch.
package atlas
