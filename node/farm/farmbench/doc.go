// Package farmbench compares the farm's two protocols, push and pull, the
// way real event builders meet them: N readout units (RUs) send one
// fragment each per event to one builder unit (BU) through one shaped
// link, as a farm's switch port towards a BU is one queue that every RU
// sends into.
//
// # Set-up
//
// Every unit is its own process (sluice farm bench-unit) with its own
// agent, its own etcd client and the TCP peer transport; a single-member
// etcd (sluice farm etcd) runs beside them. The BU (also the event
// manager) lives in a network namespace joined to the host's by a veth
// pair. Everything the RUs send the BU crosses the host side's egress,
// where a token bucket filter (tc tbf) limits the rate and, with its
// byte limit, the queue: a burst that does not fit is dropped and TCP
// recovers it, at a tail-loss probe (~10 ms) or a retransmission timeout
// (≥ 200 ms) when it was the burst's end. The other direction (credits,
// assignments, requests) is not shaped.
//
// Each event is one assignment (assignment size 1) of N fragments of one
// size. Push: the BU's credits (Credits) let the EM assign that many
// events at a time and every RU sends its fragment at once, so a burst of
// Credits·N fragments meets the queue. Pull: the BU holds as many
// assignments (max_outstanding = Credits) but asks the RUs one request at
// a time over all of them (max_requests 1), so one fragment meets the
// queue, at the price of one round trip per fragment.
//
// # Prediction
//
// Push loses when its burst overflows the queue: Credits·N·size > queue +
// tbf burst, so above size* = (queue + burst) / (Credits·N) pull should
// build more events per second, below it push (fewer round trips). The
// crossover moves with the queue limit: Bench runs every size at each
// queue limit given and reports the measured crossover next to size*:
// the smallest size from which pull builds at least Margin times push's
// events per second and never fewer at a larger size, over the sizes
// below the queue limit (a fragment larger than the queue is dropped in
// part under both protocols, outside the model).
//
// # Figures
//
// Per point: events built per second in a window after a warm-up,
// latency from the RU's readout of a fragment (its creation time, in its
// first 8 bytes) to the BU's build of its event (median and 99th
// percentile; RUs keep at most Window fragments unreleased, so this is
// the farm's own delay, not a readout queue), events built incomplete
// (none expected) and the packets the link's queue dropped (tc -s).
//
// Root only (network namespaces, tc); Bench returns ErrNotRoot otherwise.
package farmbench
