// Package control is the farm's control plane on etcd: membership under a
// lease, fencing, the event manager's election and its reservations of
// assignment ids, the run configuration and the desired run state. Only
// these go through etcd; per-assignment traffic never does (it is tens of
// kHz: the peer transport carries it).
//
// # Keys
//
// Everything of farm F lives under /sluice/F/:
//
//	| key                | value                         | written by                          |
//	|--------------------|-------------------------------|-------------------------------------|
//	| nodes/<node id>    | Member (JSON)                 | the node, under its session lease   |
//	| em/<lease hex>     | candidate's node id           | concurrency.Election (prefix em/)   |
//	| reserved           | next free assignment id (dec) | the EM, guarded by its leadership   |
//	| run                | RunState (JSON)               | `sluice farm start/stop`            |
//	| runs/<run>/config  | farm.RunConfig (JSON)         | `sluice farm start`, once per run   |
//	| runs/<run>/ledger  | farm.LedgerSummary (JSON)     | the EM, from time to time           |
//	| runs/<run>/mask    | RunMask (JSON)                | `sluice farm mask`                  |
//	| drain/<node id>    | DrainRequest (JSON)           | `sluice farm drain`                 |
//	| runs/<run>/void/<bu>/<inc hex> | farm.VoidRecord (JSON) | the EM, when it declares inc dead; |
//	|                    |                               | deleted by the BU once applied      |
//	| sources/<node id>  | the node's sources at its last join | the node (no lease: masking a dead RU) |
//	| fenced/<lease hex> | Fencing (JSON): who fenced it, why | the EM, before it revokes the lease (10 min lease) |
//
// # Service discovery
//
// A member's record names its HTTP endpoint (Member.HTTP: /metrics and
// /status); Targets and SDHandler turn the members into Prometheus's
// HTTP service discovery (http_sd_configs: a JSON list of target groups),
// which `sluice farm sd` serves, so a scrape configuration needs no list
// of hosts.
//
// # Incarnations and fencing
//
// A node's incarnation is its session's lease id. Leases alone detect a
// dead node only after their TTL (etcd's minimum is ceil(1.5 × election
// timeout): 2 s with default ticks), so the EM suspects faster from the
// peer transport's heartbeats and then fences the suspect with Fence
// (LeaseRevoke): its membership key (and its election key, which shares
// the lease) disappear, its session ends, and it must Join again under a
// new lease — a new incarnation, whose messages the EM tells apart from
// the old one's.
//
// # Epochs and reservations
//
// The EM's epoch is the create revision of its election key, so a newer
// leader always has a larger epoch. Before using assignment ids it
// reserves a block with a transaction that moves the reserved key's high
// water mark only while its election key still exists with that revision:
// a deposed EM cannot reserve, and a new EM starts above every id an
// earlier one may have used.
package control
