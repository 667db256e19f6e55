// Package transport is how multi-fragment packets (MFPs, see package
// schemas) travel into a sluice node: the interfaces both ends of every
// transport implement, their counters, the one parser of transport URIs,
// and the registry through which the node, its configuration and the
// readout emulator find a transport by its URI's scheme.
//
// Each transport is one package holding its input and its sender: shm (the
// shared-memory readout ring a PCIe readout board's DMA engine and its
// driver use), tcp (streams with credit-based flow control), udp
// (datagrams with sequence numbers, VTP for VDIF) and file (native MFP
// files). Each registers a Transport once: its scheme, its URI options,
// its input's and its sender's settings (its own structs, with defaults
// and Check) and their openers. Package all lists the registrations, one
// line per transport; adding a transport is a new package and one line
// there.
//
// An input feeds a Sink (the event builder). A packet's bytes stay valid
// until the sink calls its release func; only then is the ring space
// acknowledged or the TCP credit returned, so a slow builder throttles the
// readout instead of losing data. Nothing is dropped without a counter and
// a reason (Stats.Discarded, by Reason).
package transport
