package peer

import (
	"fmt"
	"net"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultPoolBytes        = 256 << 20
	DefaultSendQueue        = 64
	DefaultControlWindow    = 256
	DefaultAcceptQueue      = 1024
	DefaultHeartbeat        = 100 * time.Millisecond
	DefaultHandshakeTimeout = 5 * time.Second
	// heartbeatsPerTimeout: PeerTimeout's default in heartbeats.
	heartbeatsPerTimeout = 5
	// maxDataLimit: payload lengths travel as u32 (see the package doc).
	maxDataLimit = 1 << 31
)

// WithDefaults returns c with zero fields set to their defaults, or an error
// wrapping ErrConfig that names the first field out of range. Transports
// call it first thing.
func (c Config) WithDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if l := len(c.Node); l == 0 || l > 255 {
		return bad("Node", "node id of %d bytes, want 1..255", l)
	}
	if len(c.Farm) > 255 {
		return bad("Farm", "farm id of %d bytes, want at most 255", len(c.Farm))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("Listen", "%q is not host:port: %v", c.Listen, err)
	}
	if len(c.Advertise) > 255 {
		return bad("Advertise", "%d bytes, want at most 255", len(c.Advertise))
	}
	if c.MaxData == 0 {
		c.MaxData = DefaultMaxData
	}
	if c.MaxData < 1 || c.MaxData > maxDataLimit {
		return bad("MaxData", "%d, want 1..%d", c.MaxData, maxDataLimit)
	}
	if c.PoolBytes == 0 {
		c.PoolBytes = max(DefaultPoolBytes, int64(c.MaxData))
	}
	if c.PoolBytes < int64(c.MaxData) {
		return bad("PoolBytes", "%d bytes cannot hold one message of MaxData %d", c.PoolBytes, c.MaxData)
	}
	if c.SendQueue == 0 {
		c.SendQueue = DefaultSendQueue
	}
	if c.ControlWindow == 0 {
		c.ControlWindow = DefaultControlWindow
	}
	if c.AcceptQueue == 0 {
		c.AcceptQueue = DefaultAcceptQueue
	}
	if c.SendQueue < 1 || c.ControlWindow < 1 || c.AcceptQueue < 1 {
		return bad("SendQueue/ControlWindow/AcceptQueue", "%d/%d/%d, want positive", c.SendQueue, c.ControlWindow, c.AcceptQueue)
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = heartbeatsPerTimeout * c.Heartbeat
	}
	if c.Heartbeat < time.Millisecond || c.PeerTimeout <= c.Heartbeat {
		return bad("Heartbeat/PeerTimeout", "%v/%v, want Heartbeat >= 1ms and PeerTimeout > Heartbeat", c.Heartbeat, c.PeerTimeout)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.HandshakeTimeout < 0 {
		return bad("HandshakeTimeout", "%v, want positive", c.HandshakeTimeout)
	}
	return c, nil
}
