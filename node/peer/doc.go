// Package peer is the node-to-node transport of a sluice farm: the "RDMA
// peers" over which readout units send multi-fragment packets to builder
// units and every node sends small control messages (credits, assignments,
// requests, releases) to the others.
//
// One interface (Transport, Conn), two implementations registered by name:
// node/peer/tcp ("tcp", pure Go, always built) and node/peer/ucx ("ucx",
// libucp through cgo, built with the `ucx` build tag; UCX picks RC/DC
// verbs on InfiniBand/RoCE, shared memory between processes of one host, or
// TCP, as UCX_TLS says). node/peer/peertest is the conformance suite both
// pass.
//
// # What a Conn promises
//
//   - Peers are known by node id, from a hello exchanged at connect that
//     also checks the farm id, the protocol version and the farm's shared
//     token (each side proves it knows the token by an HMAC over the other's
//     fresh nonce). A failed hello is refused and counted (Stats.Refused).
//   - Control messages: typed, at most MaxControl bytes, in order, never
//     delayed behind a data message, flow-controlled by a window of
//     ControlWindow messages per Conn (the receiver returns credits as its
//     Recv takes them), so nothing queues without bound.
//   - Data messages: a header of at most MaxHeader bytes and a payload of at
//     most the receiver's MaxData, sent from a registered Region (no copy by
//     sluice; UCX may read it by RDMA) and received into a slot of the
//     receiver's receive pool (registered memory of Config.PoolBytes, part of
//     the node's memory budget), handed over as a Buffer to Release once.
//     While the pool has no room, messages wait in their senders (SendData
//     blocks after SendQueue in flight): backpressure, not buffering.
//   - Goodbye: a bye counts the data messages its sender sent; the
//     receiver answers it (bye_ack) once all of them have arrived, and only
//     then sees the Conn closed by the peer (ErrPeerClosed). A sender that
//     must know its data arrived calls Finish, which waits for that answer
//     while both sides keep the Conn alive; Close does not wait. A Conn
//     whose connection ends before the counted messages arrived is lost,
//     not closed.
//   - Failure: a peer whose process dies is seen at once (TCP: the
//     connection resets; UCX: peer error handling fails the endpoint); a
//     peer that stops without closing (SIGSTOP, a hung host) is lost after
//     PeerTimeout without frames (heartbeats every Heartbeat). Either way the
//     Conn ends with ErrPeerLost, its in-flight sends complete with that
//     error, its partly received data messages free their pool slots, and
//     Recv drains what had arrived complete, then returns the error.
//
// # Wire format, version 2
//
// All integers are little-endian. Every message is a frame: an 8-byte
// header and a body. On TCP each Conn is two connections dialled by the
// connecting side: the control connection (hello exchange, then control,
// credit, heartbeat and bye frames) and the data connection (a join frame,
// then data frames in both directions), so a 64 MiB data frame never
// delays a credit or a heartbeat. On UCX the Conn is one endpoint: its
// control-path frames travel as AM id 1 (eager; one message carries one or
// more whole frames, those queued together), data frames as AM id 2 (the AM header is the data
// frame's first 8+H bytes, the AM data is the payload, always by
// rendezvous so the receiver fetches it only once it has a pool slot).
//
// Frame header:
//
//	| off | size | field  | meaning                                                  |
//	|-----|------|--------|----------------------------------------------------------|
//	|   0 |    1 | kind   | what the frame is (table below)                          |
//	|   1 |    1 | flags  | 0 (a receiver rejects other values)                      |
//	|   2 |    2 | type   | control: the message type; data: header length H; else 0 |
//	|   4 |    4 | length | control/handshake: body bytes L; data: payload bytes N   |
//	|   8 |  ... | body   | L bytes; data: H header bytes, then N payload bytes      |
//
// Frame kinds:
//
//	| kind | name        | direction               | body                                           |
//	|------|-------------|-------------------------|------------------------------------------------|
//	|    1 | hello       | connector → acceptor    | hello body (below)                             |
//	|    2 | hello_reply | acceptor → connector    | hello body, then a 32-byte MAC (acceptor)      |
//	|    3 | proof       | connector → acceptor    | 32-byte MAC (connector)                        |
//	|    4 | welcome     | acceptor → connector    | 16-byte session cookie (TCP: for join)         |
//	|    5 | refuse      | either, then it closes  | u8 reason code, then UTF-8 text (why)          |
//	|    6 | join        | TCP data connection     | 16-byte session cookie of welcome, first frame |
//	|   16 | control     | both                    | the message (type in the header)               |
//	|   17 | credit      | both                    | u32: control messages taken by Recv since last |
//	|   18 | heartbeat   | both                    | empty; sent when nothing else was for a beat   |
//	|   19 | bye         | both                    | u64: data messages sent on the Conn in all     |
//	|   20 | bye_ack     | both                    | u64: data messages received on the Conn in all |
//	|   32 | data        | both                    | H header bytes, N payload bytes                |
//
// Hello body (kinds 1 and 2):
//
//	| off | size | field          | meaning                                                 |
//	|-----|------|----------------|---------------------------------------------------------|
//	|   0 |    2 | version        | peer protocol version, 2                                |
//	|   2 |    2 | flags          | 0                                                       |
//	|   4 |    4 | max_data       | largest data payload the sender accepts (bytes)         |
//	|   8 |    4 | control_window | control messages the sender accepts before a credit    |
//	|  12 |   16 | nonce          | fresh random bytes                                      |
//	|  28 |    1 | farm_len F     |                                                         |
//	|  29 |    F | farm           | farm id                                                 |
//	|     |    1 | node_len D     | 1..255                                                  |
//	|     |    D | node           | the sender's node id                                    |
//	|     |    1 | addr_len A     |                                                         |
//	|     |    A | addr           | where the sender listens (Config.Advertise), may be ""  |
//
// MACs are HMAC-SHA256 keyed with the token over: the role ("sluice-peer-1
// acceptor" or "sluice-peer-1 connector"), the connector's nonce, the
// acceptor's nonce, then each node id preceded by its length (connector's
// first). Refuse reason codes: 1 farm, 2 token, 3 version, 4 node,
// 5 accept_queue, 6 malformed (the Refused* names).
//
// A bye ends what its sender sends on the Conn, but for a bye_ack answering
// the peer's bye; the receiver of a bye sends its bye_ack once the data
// messages counted have all arrived (version 1 had empty byes and no
// answer: a sender that closed its sockets at once could lose what the
// receiver had not read yet). On TCP the side that closes shuts its write
// half and reads the peer's frames until their end (at most a second)
// before it closes, so that no unread byte resets the connection.
//
// A receiver treats any frame that does not decode, an unknown kind, a
// control frame beyond the window it granted, or a frame out of sequence
// as a protocol violation: the Conn is lost with ErrProtocol.
package peer
