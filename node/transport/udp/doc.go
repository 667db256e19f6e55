// Package udp is the UDP readout datagram transport (udp://HOST:PORT, and
// udp://HOST:PORT?format=vtp for VDIF frames over VTP): the node's Input,
// which puts each sender's datagrams back in order and counts what was
// lost, late or duplicated, and the Sender the emulator uses.
//
// # UDP datagrams
//
//	| off | size | field    | meaning                                                    |
//	|-----|------|----------|------------------------------------------------------------|
//	|   0 |    8 | sequence | u64 little-endian, +1 per datagram, one space per sender   |
//	|   8 |  ... | payload  | one MFP (format=mfp) or one VDIF frame (format=vtp: VTP)   |
//
// A datagram of only the 8 bytes ends the stream: its number is the count of
// numbers the sender used, so a loss at the very end is counted too. The
// receiver keeps a reordering window per sender (ReorderWindow datagrams,
// LatencyBudget of waiting), as VLBI_UDP does: a missing number is declared
// lost when the window or the budget passes it; if it arrives afterwards it
// is counted late and dropped; a number received twice is a duplicate.
package udp
