// The C half of node/peer/ucx: thin wrappers over libucp that fill UCX's
// parameter structs and route its callbacks to Go by integer ids. C never
// keeps a Go pointer: buffers handed to UCX are C or mmap'd memory, and
// callbacks carry a cgo.Handle (the worker) or a request id.
#ifndef SLUICE_UCX_H
#define SLUICE_UCX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

enum { SL_AM_CTL = 1, SL_AM_DATA = 2 };

typedef struct {
	ucp_context_h ctx;
	ucp_worker_h worker;
	int efd;               // -1 without wake-up mode
	size_t max_am_header;
	int signals_restored;  // UCX had replaced Go's handlers: put back
} sl_worker_t;

ucs_status_t sl_init(int wakeup, uintptr_t handle, sl_worker_t *out);
void sl_destroy(sl_worker_t *w);

ucs_status_t sl_listen(ucp_worker_h w, const char *ip, int port, uintptr_t handle,
                       ucp_listener_h *out, char *bound, size_t boundlen);
ucs_status_t sl_ep_accept(ucp_worker_h w, ucp_conn_request_h req, uintptr_t handle, ucp_ep_h *out);
ucs_status_t sl_ep_connect(ucp_worker_h w, const char *ip, int port, uintptr_t handle, ucp_ep_h *out);

// Operations return UCS_OK (completed at once; buffers already freed),
// UCS_INPROGRESS (the callback will report id later) or an error.
// C takes ownership of frame and hdr (malloc'd): they are freed when UCX
// is done with them. Completions report (handle, id); id 0 reports nothing.
ucs_status_t sl_send_ctl(ucp_ep_h ep, void *frame, size_t len, uintptr_t handle, uint64_t id);
ucs_status_t sl_send_data(ucp_ep_h ep, void *hdr, size_t hlen, void *payload, size_t n,
                          ucp_mem_h memh, uintptr_t handle, uint64_t id);
ucs_status_t sl_recv_data(ucp_worker_h w, void *desc, void *buf, size_t n, ucp_mem_h memh,
                          uintptr_t handle, uint64_t id);
ucs_status_t sl_ep_close(ucp_ep_h ep, int force, uintptr_t handle, uint64_t id);

ucs_status_t sl_mem_map(ucp_context_h ctx, void *addr, size_t len, ucp_mem_h *out);

void sl_version(unsigned *major, unsigned *minor, unsigned *release);

// sl_ep_info writes ucp_ep_print_info's report (the lanes and transports
// UCX chose) into buf; it returns the bytes written.
size_t sl_ep_info(ucp_ep_h ep, char *buf, size_t len);

#endif
