// Package lhcb reads and writes the LHCb data formats and maps them onto
// sluice fragments and events: MDF records and their raw banks, the ODIN
// bank, the multi-event packets (MEP) of the Allen 2019–2023 event builder,
// and (provisionally) the Run 3 PCIe40 multi-fragment packet.
//
// Everything is little-endian. The layouts below (and the PCIe40 packet's on
// PCIe40MFP) are cross-checked with the LHCb Allen sources (mdf/include/
// mdf_header.hpp, eb_header.hpp, mdf/lhcb/Event/ODIN.h) and with the real
// samples in testdata/third_party/lhcb.
//
// # MDF record
//
//	| off | size | field                                                        |
//	|-----|------|--------------------------------------------------------------|
//	|   0 |   12 | size[3]: record bytes incl. header, the three words equal    |
//	|  12 |    4 | checksum: one-at-a-time hash of bytes [16, size); 0 = none   |
//	|  16 |    1 | compression: low nibble != 0 = body compressed (ROOT blocks),|
//	|     |      | high nibble = expansion factor - 1 (a buffer-size hint)      |
//	|  17 |    1 | hdr: header version << 4 | subheader length in 32-bit words |
//	|  18 |    1 | data type: 1 raw banks, 2 MEP (versions 1..3)                |
//	|  19 |    1 | spare                                                        |
//	|  20 |    … | subheader of the header version (below), then the body       |
//
// Header versions (MDFHeader::sizeOf): version 3 and 1 have a 28-byte
// subheader {trigger_mask[4], run, orbit, bunch} (48-byte header); version 2
// has none (20 bytes); version 0 (VELO test beam) overlays bytes 18..39 with
// {event type u8, L0 trigger number bits 32..39 u8, bits 0..31 u32,
// trigger_mask[4]} (40 bytes) and has no data type (its body is raw banks).
//
// # Raw bank
//
//	{u16 magic 0xCBCB, u16 length (bytes incl. this 8-byte header), u8 type,
//	 u8 version, u16 source id}, payload, zero padding to a multiple of 4.
//
// # Mapping to sluice
//
// See split.go (MDF event -> fragments, the header fragment, source ids) and
// join.go (built event -> MDF record). An event of a MEP is split with the
// MEP record's header, its run, orbit and bunch taken from the event's
// ODIN bank; exported (`sluice store export --format mdf`), an event whose
// header has no trigger mask (a MEP's events) gets one from its stored
// verdict, while an MDF event keeps its own and comes back byte for
// byte.
//
// # Trigger mask of an exported event (TriggerMaskOf)
//
// The four little-endian u32 words of the MDF header's trigger mask, for
// an event whose header had none:
//
//	| word | value                                                         |
//	|------|---------------------------------------------------------------|
//	|    0 | lines 0-31 that fired: bit i = line i of the deciding stage    |
//	|      | (schemas.Verdict.Lines: its plugin's declared line order)     |
//	|    1 | lines 32-63 of that stage, bit i = line 32+i                  |
//	|    2 | the decision: 1 accept, 2 reject, 3 defer (schemas.Decision)  |
//	|    3 | 0                                                             |
//
// An event accepted on lines 0 and 33 gets {1, 2, 1, 0}; a deferred one
// {0, 0, 3, 0}. TestTriggerMaskOf pins the mapping.
package lhcb
