// Package emulator is the readout emulator behind `sluice readout` and the
// node's embedded emulators: it stands in for the readout boards,
// generating detector-like multi-fragment packets (or replaying the events
// of a file, looped with event ids shifted), injecting faults (drop,
// duplicate, corrupt, truncate, reorder, stall) and sending the packets,
// paced, through the sender of the transport its URI names (package
// transport): it knows no transport itself. Its Summary says what it sent
// and injected, so receivers can reconcile with it. A run limited by a
// duration ends between events: every source has sent the last event.
//
// # Replaying a file
//
// The file's format is found by the format registry's detection
// (schemas/formats), the one place formats are listed: the emulator
// replays every format that splits into sluice fragments
// (format.Splitter), as `sluice inspect` and `sluice plugin check --from`
// split it, and refuses, naming the format, those sluice only inspects
// (Mark 5B, ATLAS ROB streams, Arrow IPC and Parquet exports). Today that is:
// sluice's own fragment and packet streams, CMS FRD events and FEROL
// captures, BESIII raw files (eformat v3.0 in BESIII file records), ATLAS
// eformat v4.0/v5.0 full events, LHCb MDF and MEP, and VDIF. A format
// whose records a destination's packets carry as they are (format.Framer:
// sluice packets for any MFP input, VDIF frames for UDP ?format=vtp, a
// FED fragment's FEROL blocks for TCP ?framing=ferol) is sent record for
// record, byte for byte; any other is split, one fragment per source and
// event with the CRC the splitter gave it (a fragment the file holds
// damaged stays so, flagged, for the builder to mark), and packed into
// MFPs of up to `packing` fragments of one source with consecutive event
// ids and equal flags (FlagEmpty aside: an empty payload says it). Bad
// input is refused before anything is sent, with the file, the record and
// its byte offset (the format's *schemas.DecodeError); nothing of a file
// is skipped.
//
// # What comes back byte for byte
//
// Built and stored, the events export (`sluice store export --format`) in
// the store's order, ascending event id within a run. Each event comes
// back as the file had it, byte for byte, for: CMS FRD (the header
// fragment keeps the FRD header and the FEDs' order), CMS FEROL (the
// captures' FEROL blocks; as FRD they become version-6 events of the FED
// fragments), ATLAS eformat v4.0/v5.0 (little-endian; a big-endian file
// comes back little-endian, the word values equal), BESIII raw (each data
// separator and full event; the file start records are the first
// event's, and FILE_END is written anew with FILE_START's time and the
// exported counts), LHCb MDF (a MEP's events come back as MDF records
// whose trigger mask is the stored verdict's, schemas/lhcb) and VDIF
// (each frame). sluice's own streams have no export of their own: their
// events export in the format their payloads are (a recorded LHCb split as
// MDF). A whole file comes back byte for byte
// when its events are in ascending event id (the FEROL captures, FRD and
// eformat files written from them): the real BESIII sample is not (event
// 199786 follows 199788), so its export has the same events in id order.
//
// Looping a file (loop > 1) shifts the event ids of each pass by the
// file's span. The builder uses those ids; inside the payloads only
// LHCb's ODIN event numbers are rewritten to agree (see fileSource).
// Other payloads keep the first pass's numbers: an FRD, eformat or BESIII
// header fragment its event number, so the export refuses such a row as
// inconsistent; VDIF frames their times and FED fragments their LV1_id,
// which the export of later passes repeats. Records sent as they are (VTP,
// FEROL framing) carry their ids in their bytes: loop must be 1.
package emulator
