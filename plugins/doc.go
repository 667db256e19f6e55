// Package plugins is the trigger host of the sluice node: it runs trigger
// plugins (separate processes serving the sluice.trigger.v1 gRPC service
// through hashicorp/go-plugin, written with plugins/sdk) and chains them
// into stages.
//
// A Chain is an ordered list of stages (e.g. "llt" then "hlt"); each stage
// runs N instances of one plugin binary, dispatches batches to free
// instances under a per-batch deadline, applies per-line prescales and a
// deferral policy, restarts crashed or hung instances with back-off and
// resends the batch they held. A batch that fails K times is not retried
// again: its events are deferred with schemas.StatusTriggerError and the
// reason. Plugins die with the node, even when the node is killed with
// SIGKILL.
//
// A decision is a schemas.Verdict from the plugin to the store: the host
// adds the stage and the reason's kind (the plugin's own, the deferral
// fraction or backlog, the prescales, a trigger error). Chain.State reports
// each stage's plugin processes (up, restarts, backlog, calls, failures)
// and what it decided (accepted, rejected, prescaled, deferred, per line),
// whether or not the chain has a metrics registry (its sluice_trigger_…
// metrics say the same).
//
// Batches reach a plugin on the same machine through shared memory, mapped
// once on both sides; only names, offsets and lengths cross the socket:
//
//   - layout: a batch built in the chain's Arena (NewArena, given to the
//     builder as its allocator and to the chain as Options.Arena) travels as
//     the places of its Arrow buffers in the arena: nothing is copied (a
//     64 MiB batch makes the round trip in ~0.2 ms);
//   - region: any other batch is written once, as an Arrow IPC stream, into
//     a /dev/shm region of the instance (~8 ms per 64 MiB);
//   - inline: with Options.Inline the IPC stream travels in the gRPC request
//     (~0.4 GB/s; for plugins that cannot map the host's files).
//
// Typical use by the node:
//
//	arena, _ := plugins.NewArena(512 << 20)
//	b, _ := builder.New(builder.Config{..., Allocator: arena.Unzeroed()})
//	chain, err := plugins.NewChain(ctx, plugins.Config{
//		Stages:     []plugins.StageConfig{{Name: "hlt", Plugin: "bin/plugins/l0calo", Instances: 2}},
//		Options:    plugins.Options{Arena: arena, Logger: log},
//		Registerer: reg,
//	})
//	for rec := range b.Batches() {
//		ev, _ := schemas.NewEventBatch(rec)
//		verdicts, err := chain.Decide(ctx, ev) // one schemas.Verdict per event
//		...
//		rec.Release()
//	}
//	chain.Close()
//	arena.Close()
package plugins
