// Package ucx is the UCX peer transport ("ucx"): the peer protocol of
// package peer over libucp (UCX 1.13) through a small cgo wrapper of our
// own. It is compiled only with the `ucx` build tag (the Makefile sets it
// when `pkg-config --exists ucx`); without it this package is empty and
// "ucx" is not registered.
//
// One UCX context and one worker per Transport, driven by one goroutine
// locked to its OS thread (UCS_THREAD_MODE_SERIALIZED): every ucp call is
// made there; other goroutines hand it operations through a queue and wake
// it through an eventfd. In wake-up mode (the default) the worker sleeps in
// epoll on UCX's event fd between events; Config.BusyPoll keeps it polling.
//
// Each Conn is one endpoint, created by socket address (a listener and
// client-server endpoints) with peer error handling on, so a peer that dies
// fails its endpoint at once. Control-path frames are eager active messages
// (id 1); data messages are active messages (id 2) always sent by
// rendezvous from the registered Region (memh passed explicitly): the
// receiver's callback gets only the header and a descriptor, and fetches
// the payload with ucp_am_recv_data_nbx into a slot of the registered
// receive pool once the pool has room. Until then the descriptor waits and
// the sender's send stays in flight: UCX buffers nothing unexpected outside
// the pool's budget. On InfiniBand/RoCE the fetch is an RDMA read; on
// shared memory a cross-memory attach or copy by the kernel; on TCP a read.
//
// UCX is told to leave the error signals to Go (ERROR_SIGNALS empty; Go's
// SIGSEGV/SIGBUS handlers are checked and put back if replaced) and to
// install no malloc/mmap hooks and no memory events (cgo's libc mmap would
// run through them). Transport selection is UCX's own: UCX_TLS (e.g.
// "rc,ud,sm,self" on InfiniBand, "tcp", "sm" or "posix"), UCX_NET_DEVICES.
package ucx
