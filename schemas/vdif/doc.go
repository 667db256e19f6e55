// Package vdif reads and writes the VLBI formats VDIF (VLBI Data
// Interchange Format, specification release 1.1.1), VTP (VDIF Transport
// Protocol) and Mark 5B, and maps VDIF frames to sluice fragments and
// events. Layouts (the tables below) are from the specifications,
// mhvk/baseband (vdif/header.py, mark5b/header.py) and DiFX vdifio, checked
// against the baseband sample files in testdata/third_party/baseband.
//
// # VDIF frame
//
// A header of eight little-endian 32-bit words (four if the legacy bit is
// set) followed by the payload; the frame length, header included, is in
// word 2 in units of 8 bytes:
//
//	| word | bits  | field                                                   |
//	|------|-------|---------------------------------------------------------|
//	|  0   | 31    | invalid-data flag                                       |
//	|  0   | 30    | legacy: header is words 0..3 only (16 bytes)            |
//	|  0   | 29:0  | seconds since the reference epoch                       |
//	|  1   | 31:30 | unassigned (0)                                          |
//	|  1   | 29:24 | reference epoch: half-years since 2000-01-01            |
//	|  1   | 23:0  | frame number within the second, from 0                  |
//	|  2   | 31:29 | VDIF version                                            |
//	|  2   | 28:24 | log2(channels)                                          |
//	|  2   | 23:0  | frame length in 8-byte units, header included           |
//	|  3   | 31    | complex samples                                         |
//	|  3   | 30:26 | bits per sample - 1                                     |
//	|  3   | 25:16 | thread id                                               |
//	|  3   | 15:0  | station id                                              |
//	|  4   | 31:24 | EDV (extended data version)                             |
//	|  4-7 | rest  | extended user data, by EDV:                             |
//	|      |       | 0: all zero                                             |
//	|      |       | 1, 3, 4: w4 bit 23 unit (MHz/kHz), 22:0 sample rate;    |
//	|      |       |    w5 sync 0xACABFEED; EDV 3 (VLBA): w6 LO/IF tuning,   |
//	|      |       |    w7 dbe unit, IF, subband, sideband, revisions,       |
//	|      |       |    personality                                          |
//	|      |       | 2 (ALMA/R2DBE): w4 23:4 sync 0xA5EA5, 3:0 pol/baseline; |
//	|      |       |    w5 PIC status; w6-7 packet serial number             |
//	|      |       | 0xAB: w4..w7 a Mark 5B header (frame length 1254)       |
//
// # VTP
//
// One UDP datagram = an 8-byte little-endian packet sequence number
// followed by exactly one VDIF frame.
//
// # Mark 5B frame
//
// A 16-byte header (sync 0xABADDEED; user field, TVG flag and frame number;
// BCD time code: MJD modulo 1000, seconds of day, fraction in 0.1 ms; CRC16
// of the time code) followed by 10000 bytes of payload. See Mark5BHeader.
//
// # Mapping to sluice
//
// One VDIF frame is one fragment (FrameFragment):
//   - source id = (station id << 10) | thread id (SourceID);
//   - event id = (reference epoch << 56) | (seconds << 24) | frame number
//     (EventID): equal for every thread's frame of the same instant,
//     growing with time within a stream;
//   - payload = the whole frame, header included, so that the joiner
//     rebuilds frames byte for byte; a frame flagged invalid is sent with
//     schemas.FlagSourceError.
//
// Packer builds per-thread multi-fragment packets; Joiner writes a built
// event's frames back, in a given source order (e.g. the recording's thread
// interleave from ScanSources) or in the event batch's source order.
//
// # Errors
//
// Every decoder returns *schemas.DecodeError with Format "vdif", "vtp" or
// "mark5b", the byte offset, and a sentinel: ErrTruncated, ErrBadHeader
// (frame length smaller than the header), ErrBadMagic (sync words),
// ErrCRCMismatch (Mark 5B time code), ErrInconsistent (EDV 0 words not
// zero, EDV 0xAB fields, threads whose times diverge: ThreadCheck).
package vdif
