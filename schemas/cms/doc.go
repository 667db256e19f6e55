// Package cms reads and writes the CMS data formats sluice meets at a CMS
// farm: FED fragments (the legacy SLINK header and trailer framing every
// front-end's data, Run 1-3), FRD events (what the CMS event builder writes
// for the HLT: an FRD header followed by the concatenated FED fragments of
// one event, versions 3 to 6) and the optional "RAW_" header of an FRD file.
// It also reads the FEROL stream, the TCP framing FED fragments arrive in at
// the DAQ (see FEROLFormat). Layouts follow cms-sw/cmssw
// (DataFormats/FEDRawData, IOPool/Streamer), as tabled here and on the
// types below. Everything is little-endian except the FEROL block headers.
//
// # FEROL stream
//
// FEROL blocks back to back, each a 16-byte big-endian header and at most
// 4080 bytes of payload; the payloads of a first..last run of blocks are
// one FED fragment:
//
//	word 0: 63:48 signature 0x475A | 31 first block | 30 last block
//	        | 9:0 payload length in 64-bit words
//	word 1: 43:32 FED id | 23:0 event number
//
// # FED fragment
//
// A whole number of 64-bit words: one header word, the payload, one trailer
// word. Bits of the header word (bit 0 = LSB of the 64-bit LE word):
//
//	63:60 BOE_1 = 0x5 | 59:56 Evt_ty | 55:32 LV1_id | 31:20 BX_id
//	19:8 Source_id (FED id) | 7:4 FOV | 3 H (another header word follows)
//
// and of the trailer word:
//
//	63:60 EOE_1 = 0xA | 55:32 Evt_lgth (64-bit words, header and trailer
//	included) | 31:16 CRC-16 | 15 R | 14 F | 11:8 Evt_stat | 7:4 TTS
//	| 3 T | 2 C
//
// The CRC is CRC-16/CMS (poly 0x8005, init 0xFFFF, not reflected, no final
// xor) over every 64-bit word of the fragment fed most significant byte
// first, with the CRC field and the C, F and R bits zeroed (see FEDCRC).
//
// # SlinkRocket (Phase 2)
//
// The Phase-2 framing: a 128-bit header (BOE 0x55, version 3, 44-bit event
// id), the payload in 128-bit words and a 128-bit trailer (EOE 0xAA, length
// in 128-bit words, status bits, orbit and bunch crossing); see
// SlinkRocket. Its CRCs are carried, not verified, as in cmssw.
//
// # FRD event
//
//	v3: version u32, run, lumi, event, eventSize, paddingSize, adler32  (28 B)
//	v4: version u32, run, lumi, eventLow, eventHigh, eventSize,
//	    paddingSize, adler32                                            (32 B)
//	v5: version u32, run, lumi, event, eventSize, crc32c                (24 B)
//	v6: version u16, flags u16, run, lumi, event, eventSize, crc32c     (24 B)
//
// eventSize bytes of FED data follow the header; v3 and v4 then add
// paddingSize bytes. The checksum (Adler-32 for v3/v4, CRC-32C for v5/v6)
// covers the FED data only. Readers find the FEDs by walking the data
// backwards from its end (see WalkFEDs), as cmssw's FedRawDataInputSource does.
//
// # Mapping to sluice
//
// SplitFRD turns an FRD event into one native fragment per FED: source id =
// FED id, event id = the FRD event number (64-bit for v4), payload = the
// whole FED fragment (header, payload and trailer, so that the joiner can
// concatenate payloads back into FRD data unchanged); plus one fragment
// from HeaderSource with the FRD header and the FED order. Joiner.Join
// turns a built event back into the FRD event, byte for byte.
//
// # Errors
//
// Decoders never panic; bad input yields a *schemas.DecodeError with the
// byte offset from the start of the buffer (or file) and one of the schemas
// sentinel errors; a checksum that does not match is schemas.ErrCRCMismatch.
package cms
