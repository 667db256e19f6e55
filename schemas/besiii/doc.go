// Package besiii reads and writes BESIII raw data files: the BESIII file
// records around events in the ATLAS event format ("eformat") v3.0, which
// still has the sub-detector and ROS levels that eformat v4 and v5 dropped.
// Layouts follow the BESIII offline software's copy of eformat v3
// (BOSS/eformat Header.h, FullEventFragment.h, ROSFragment.h,
// ROBFragment.h as vendored in redeboer/BOSS_ExternalLibs) and its
// RawFileUtil.h (the file records); both are checked against the real
// BESIII file in testdata/third_party/besiii.
//
// Every structure is a sequence of little-endian 32-bit words (BESIII
// writes on x86; a byte-swapped file is refused, ErrUnsupported).
//
// # File records (format version 1 of this package's reading)
//
//	FILE_START   | 0x1234aaaa | record size = 8 | version | file number |
//	               date | time | size limit (data blocks) | size limit (MB)
//	FILE_NAME    | 0x1234aabb | length1 (bytes) | application name, padded
//	               to 4 bytes | length2 (bytes) | user tag, padded to 4
//	RUN_PARAMS   | 0x1234bbbb | record size = 9 | run number | max events |
//	               rec enable | trigger type | detector mask | beam type |
//	               beam energy
//	then for every event:
//	DATA_SEPARATOR | 0x1234cccc | record size = 4 | data block number (the
//	               event's sequence number in the run) | data block size
//	               (bytes of the event that follows)
//	               | the full event
//	and at the end:
//	FILE_END     | 0x1234dddd | record size = 10 | date | time | events in
//	               file | data in file (MB) | events in run | data in run
//	               (MB) | status (non-zero: the run's last file) | 0x1234eeee
//
// A stream may start at a data separator (no FILE_START, FILE_NAME and
// RUN_PARAMS, as `sluice store export --format besiii` writes events
// without a file start) and may lack the FILE_END record.
//
// # eformat v3.0 fragments
//
// Every fragment has the same generic header:
//
//	w0 marker | w1 fragment size (words, all included) | w2 header size
//	(words) = 7 + nstatus + nspecific | w3 format version (0x0300xxxx) |
//	w4 source id | w5 nstatus | w6.. status words | nspecific | specific
//	words
//
// and its payload, from the end of the header to the end of the fragment
// (there is no checksum in v3), is its children back to back: a full
// event (0xaa1234aa) holds sub-detector fragments (0xbb1234bb), a
// sub-detector ROS fragments (0xcc1234cc), a ROS ROB fragments
// (0xdd1234dd), a ROB exactly one ROD fragment (0xee1234ee). The specific
// words are, for a full event (10): time (Unix seconds), global id, run
// number, lvl1 id, lvl1 trigger type, lvl2 trigger info, four event filter
// words; for a ROS (3): run number, lvl1 id, BCID; for a ROB none; for a
// sub-detector none or one (both occur in real files, so any count is
// kept). The ROD is as in later eformat versions: a 9-word header
// (0xee1234ee, header size 9, version, source id, run number, lvl1 id,
// BCID, lvl1 trigger type, detector event type), status and data words,
// and a 3-word trailer (nstatus, ndata, status position), its size the
// enclosing ROB's payload size, = 12 + nstatus + ndata.
//
// # Mapping to sluice
//
// Split turns each event into one sluice fragment per ROB (source id =
// the ROB's source id, event id = the full event's global id, payload =
// the ROB fragment's bytes) plus one from HeaderSource holding what the
// ROBs do not (see SplitEvent); the format's Joiner writes a built event
// back as its data separator and full event, byte for byte, and `sluice
// store export --format besiii` writes a whole file: the first event's
// file start records, the events, and a FILE_END record.
//
// # Errors
//
// Decoders never panic. Bad input yields a *schemas.DecodeError with the
// byte offset in the stream or buffer: ErrTruncated, ErrBadMagic (a
// marker, or a child of the wrong level), ErrBadVersion (a fragment not of
// major version 3), ErrSizeOverflow (a size or count that reaches past its
// enclosing structure), ErrInconsistent (sizes that disagree, a data
// separator whose block size is not its event's), ErrUnsupported (a
// byte-swapped file).
package besiii
