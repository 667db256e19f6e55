// Package emulator is the readout emulator behind `sluice readout` and the
// node's embedded emulators: it stands in for the readout boards,
// generating detector-like multi-fragment packets (or replaying the events
// of an MDF/MEP, VDIF or native MFP file, looped with event ids shifted),
// injecting faults (drop, duplicate, corrupt, truncate, reorder, stall) and
// sending the packets, paced, through the sender of the transport its URI
// names (package transport): it knows no transport itself. Its Summary
// says what it sent and injected, so receivers can reconcile with it.
package emulator
