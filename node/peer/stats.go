package peer

// Refusal reasons, the keys of Stats.Refused.
const (
	RefusedFarm        = "farm"         // the peer's hello named another farm
	RefusedToken       = "token"        // the peer could not prove the shared token
	RefusedVersion     = "version"      // another peer protocol version
	RefusedNode        = "node"         // the peer has our own node id, or none
	RefusedAcceptQueue = "accept_queue" // Config.AcceptQueue peers already waiting
	RefusedMalformed   = "malformed"    // a hello that does not decode, or none in time
)

// Loss reasons, the keys of Stats.Lost.
const (
	LostReset     = "reset"     // the connection or endpoint failed (e.g. the peer died)
	LostHeartbeat = "heartbeat" // silent for Config.PeerTimeout (e.g. a stopped peer)
	LostProtocol  = "protocol"  // the peer broke the protocol
)

// Stats are a transport's counters (totals since it started, unless said).
type Stats struct {
	Connected, Accepted uint64 // Conns established by Connect / by Accept
	Open                int64  // Conns open now
	// Refused counts hello exchanges that failed, by reason (Refused*), on
	// either side.
	Refused map[string]uint64
	// Lost counts Conns lost, by reason (Lost*). Clean goodbyes are not
	// losses.
	Lost map[string]uint64

	ControlSent, ControlReceived uint64 // control messages (heartbeats and credits not counted)
	DataSent, DataReceived       uint64 // data messages
	DataBytesSent, DataBytesRecv uint64 // their payload bytes
	SendErrors                   uint64 // data sends completed with an error
	// DataTruncated counts data messages cut off by a Conn's end (partly
	// received; their pool slots were freed, nothing handed on).
	DataTruncated uint64

	// PoolBytes is the receive pool's size; PoolHeld the bytes of its
	// slots now taken (being received into, or held by the receiver until
	// Release); PoolWaits counts data messages that waited for room.
	PoolBytes, PoolHeld int64
	PoolWaits           uint64
	// Regions is how many registered Regions are open.
	Regions int64
	// CopiedBytes counts payload bytes sluice copied on the data path (a
	// staging copy on either side). Zero when the zero-copy paths held.
	CopiedBytes uint64
}
