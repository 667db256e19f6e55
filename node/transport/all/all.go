// Package all registers every transport of sluice, one line each: a new
// transport is a package of its own and one line here. The node, its
// configuration and the emulator import it, so any URI scheme registered
// here can be read, configured and sent to.
package all

import (
	"github.com/sluice-daq/sluice/node/peerinput"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/file"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/node/transport/tcp"
	"github.com/sluice-daq/sluice/node/transport/udp"
)

func init() {
	transport.Register(shm.Transport)
	transport.Register(tcp.Transport)
	transport.Register(udp.Transport)
	transport.Register(file.Transport)
	transport.Register(peerinput.Transport)
}
