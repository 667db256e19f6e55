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
// Batches reach a plugin on the same machine through a shared-memory region
// per instance: the host writes the Arrow IPC stream into a /dev/shm file
// that both sides map once; only its name, offset and length cross the
// socket. Options.Inline sends the bytes in the gRPC request instead.
package plugins
