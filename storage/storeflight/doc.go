// Package storeflight serves a node's event store over Arrow Flight while
// the node runs, and reads it back: what `sluice store stat|ls|export`
// use when a running node holds the store's directory lock, and what any
// Arrow Flight client (arrow-go, pyarrow.flight, the Java and C++ ones)
// can read without stopping the node.
//
// # Protocol (version 1)
//
// Standard Arrow Flight over gRPC. Streams are named as in the store
// ("accepted", "deferred").
//
//	| call        | request                         | response                                   |
//	|-------------|---------------------------------|--------------------------------------------|
//	| ListFlights | (criteria ignored)              | one FlightInfo per stream: descriptor path |
//	|             |                                 | [stream], the export schema, total_records |
//	|             |                                 | (events), one endpoint whose ticket gets   |
//	|             |                                 | the whole stream                           |
//	| DoGet       | ticket: a Query as JSON         | the selected events as record batches of   |
//	|             |                                 | schemas.ExportSchema (the stored events    |
//	|             |                                 | with their verdicts), key order            |
//	| DoAction    | "stat", body empty              | one result: storage.Stats as JSON          |
//	| DoAction    | "ls", body a Query as JSON      | one result per event: storage.EventInfo as |
//	|             |                                 | JSON (limit required, at most MaxList)     |
//	| DoAction    | "lines", body empty             | one result: the trigger line names by      |
//	|             |                                 | stage as JSON ({"stage": ["line", …]})     |
//	| DoAction    | "why", body {"version":1,"run":R,| one result: storage.Why as JSON (the       |
//	|             | "event":E}                      | event's provenance); NotFound: no such     |
//	|             |                                 | event                                      |
//	| ListActions |                                 | stat, ls, lines, why                       |
//
// Query (JSON): {"version":1, "stream":"accepted", "min_run":0,
// "max_run":0, "min_event":0, "max_event":0, "limit":0} — storage.Selection's
// fields (a max of 0: no bound), limit 0: all (DoGet).
//
// # Security
//
// The endpoint listens on 127.0.0.1 by default. Bound to any other address
// it must have TLS (a certificate and key) and a token: every call then
// carries gRPC metadata "authorization: Bearer TOKEN"; a call without it
// is refused (Unauthenticated) and counted.
//
// # Closing
//
// Close (the node's run end) refuses new calls and lets those in progress
// finish for Config.CloseGrace (flight.close_grace, 5 s by default); a
// client still reading then (a DoGet it stopped reading holds its stream
// and the server's response bytes) has its connection cut: it gets an
// error, never a stream that looks whole. Cut connections are counted
// (Server.Cut) and logged, so a node ends within the grace period
// whatever its Flight clients do.
//
// # Discovery
//
// While it serves, the server keeps a file named EndpointFile in the
// store's directory: the endpoint's URI (grpc://HOST:PORT or
// grpc+tls://HOST:PORT) on its first line, then "token_file PATH" when a
// token is needed and "tls_cert PATH" (the certificate to trust) with TLS. `sluice store` reads it when the store
// is locked by a running node.
package storeflight
