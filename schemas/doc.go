// Package schemas holds sluice's wire formats and the Arrow schemas of event
// batches and of exports. Every other package depends on it; it depends on
// nothing of sluice. The data formats sluice reads and writes are each a
// package below it implementing schemas/format's contract, listed in
// schemas/formats.
//
// # Fragment (native, version 1)
//
// One source's data for one event. Little-endian, 32-byte header followed by
// the payload:
//
//	| off | size | field        | meaning                                              |
//	|-----|------|--------------|------------------------------------------------------|
//	|   0 |    4 | magic        | 0x47464C53, the bytes "SLFG"                         |
//	|   4 |    1 | version      | 1                                                    |
//	|   5 |    1 | header_size  | 32 (bytes); readers skip any larger header           |
//	|   6 |    2 | flags        | FragmentFlag bits set by the source                  |
//	|   8 |    4 | source_id    | readout source (link, board, stream)                 |
//	|  12 |    4 | payload_len  | payload bytes following the header                   |
//	|  16 |    8 | event_id     | event id (or timestamp in ns, in timeslice mode)     |
//	|  24 |    4 | crc32c       | CRC-32C (Castagnoli) of the payload bytes only       |
//	|  28 |    4 | reserved     | 0                                                    |
//
// # Multi-fragment packet (native MFP, version 1)
//
// One source's fragments for n consecutive event ids, sent as one unit so
// that per-fragment overhead is amortized (n is the packing factor).
// Little-endian, 32-byte header, then two arrays, then the payloads:
//
//	| off      | size | field           | meaning                                                |
//	|----------|------|-----------------|--------------------------------------------------------|
//	|   0      |    4 | magic           | 0x504D4C53, the bytes "SLMP"                           |
//	|   4      |    1 | version         | 1                                                      |
//	|   5      |    1 | align           | payloads start on 2^align byte boundaries (0..12)      |
//	|   6      |    2 | flags           | FragmentFlag bits that apply to every fragment         |
//	|   8      |    4 | source_id       | readout source                                         |
//	|  12      |    4 | n               | number of fragments (packing factor), 1..MaxPacking    |
//	|  16      |    8 | first_event_id  | fragment i has event id first_event_id + i             |
//	|  24      |    4 | packet_size     | bytes of the whole packet, header included             |
//	|  28      |    4 | reserved        | 0                                                      |
//	|  32      |   4n | sizes[n]        | payload bytes of fragment i (uint32)                   |
//	|  32+4n   |   4n | crc32c[n]       | CRC-32C (Castagnoli) of payload i only                 |
//	|  32+8n   |  ... | payloads        | payload i, zero-padded to a multiple of 2^align bytes; |
//	|          |      |                 | the payload area itself starts 2^align-aligned         |
//
// # Event batch (Arrow)
//
// See EventSchema for the columns of the record batches the builder emits,
// the trigger chain decides on, and the store keeps; ExportSchema adds the
// trigger's verdict columns for exports.
//
// # Errors
//
// Decoders never panic: a malformed buffer yields a *DecodeError that names
// the format, the field, the byte offset and one of the sentinel errors in
// errors.go, so callers can test with errors.Is.
package schemas
