//go:build ucx

#include "sluice_ucx.h"
#include "_cgo_export.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucm/api/ucm.h>
#include <ucs/config/global_opts.h>

// A request's C-side context: the id Go knows it by and the C buffers to
// free when it completes.
typedef struct {
	uintptr_t handle;
	uint64_t id;
	void *buf1, *buf2;
} sl_req_t;

static sl_req_t *req_new(uintptr_t handle, uint64_t id, void *b1, void *b2) {
	sl_req_t *r = malloc(sizeof *r);
	if (r) {
		r->handle = handle;
		r->id = id;
		r->buf1 = b1;
		r->buf2 = b2;
	}
	return r;
}

static void req_free(sl_req_t *r) {
	free(r->buf1);
	free(r->buf2);
	free(r);
}

static void send_cb(void *request, ucs_status_t status, void *user_data) {
	sl_req_t *r = user_data;
	uintptr_t h = r->handle;
	uint64_t id = r->id;
	req_free(r);
	ucp_request_free(request);
	if (id != 0) {
		goSendDone(h, id, status);
	}
}

static void recv_cb(void *request, ucs_status_t status, size_t length, void *user_data) {
	sl_req_t *r = user_data;
	uintptr_t h = r->handle;
	uint64_t id = r->id;
	req_free(r);
	ucp_request_free(request);
	goRecvDone(h, id, status, length);
}

static void close_cb(void *request, ucs_status_t status, void *user_data) {
	sl_req_t *r = user_data;
	uintptr_t h = r->handle;
	uint64_t id = r->id;
	req_free(r);
	ucp_request_free(request);
	goCloseDone(h, id, status);
}

static ucs_status_t am_ctl_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param) {
	ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
	int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
	return goAmCtl((uintptr_t)arg, ep, data, length, rndv);
}

static ucs_status_t am_data_cb(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param) {
	ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
	int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
	return goAmData((uintptr_t)arg, ep, (void *)header, header_length, data, length, rndv);
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
	goEpError((uintptr_t)arg, ep, status);
}

static void conn_cb(ucp_conn_request_h req, void *arg) {
	goConnRequest((uintptr_t)arg, req);
}

static const int error_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
#define NSIG_ERR (sizeof error_signals / sizeof error_signals[0])

ucs_status_t sl_init(int wakeup, uintptr_t handle, sl_worker_t *out) {
	// Go owns the error signals: remember its handlers, tell UCX to leave
	// them alone, and put them back should UCX have replaced them.
	struct sigaction go_sa[NSIG_ERR];
	for (size_t i = 0; i < NSIG_ERR; i++) {
		sigaction(error_signals[i], NULL, &go_sa[i]);
	}
	// The error signals are a global (UCS) option: ucp_config_modify
	// would set it too but warns at every worker creation that it is not
	// a UCP option, so set it where it lives.
	ucs_global_opts_set_value("ERROR_SIGNALS", "");
	// No malloc/mmap hooks and no memory events: cgo's libc mmap would go
	// through them, and every buffer we hand UCX is registered explicitly.
	// (UCX_MEM_MALLOC_HOOKS/UCX_MEM_EVENTS in the environment would be too
	// late here: UCS reads them when the library loads, and warns that they
	// went unused. The options themselves can still be set.)
	// (mmap_hook_mode stays as it is: UCM_MMAP_HOOK_NONE makes UCM 1.13
	// recurse into its own mmap when a thread is created.)
	ucm_global_config_t ucm = ucm_global_opts;
	ucm.enable_events = 0;
	ucm.enable_malloc_hooks = 0;
	ucm.enable_malloc_reloc = 0;
	ucm_set_global_opts(&ucm);
	// Shared-memory transports take part in endpoints with peer error
	// handling only if they say they support it (UCX 1.13 keeps them out
	// otherwise, and client-server endpoints then never use shared memory).
	setenv("UCX_MM_ERROR_HANDLING", "y", 0);

	memset(out, 0, sizeof *out);
	out->efd = -1;
	ucp_config_t *cfg;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		return st;
	}
	ucp_params_t p = {0};
	p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
	p.features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0);
	p.name = "sluice";
	st = ucp_init(&p, cfg, &out->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		return st;
	}
	ucp_worker_params_t wp = {0};
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
	st = ucp_worker_create(out->ctx, &wp, &out->worker);
	if (st != UCS_OK) {
		ucp_cleanup(out->ctx);
		return st;
	}
	ucp_worker_attr_t wa = {0};
	wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
	if (ucp_worker_query(out->worker, &wa) == UCS_OK) {
		out->max_am_header = wa.max_am_header;
	}
	if (wakeup) {
		st = ucp_worker_get_efd(out->worker, &out->efd);
		if (st != UCS_OK) {
			sl_destroy(out);
			return st;
		}
	}
	ucp_am_handler_param_t ah = {0};
	ah.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
	                UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
	ah.flags = UCP_AM_FLAG_WHOLE_MSG;
	ah.arg = (void *)handle;
	ah.id = SL_AM_CTL;
	ah.cb = am_ctl_cb;
	if ((st = ucp_worker_set_am_recv_handler(out->worker, &ah)) != UCS_OK) {
		sl_destroy(out);
		return st;
	}
	ah.id = SL_AM_DATA;
	ah.cb = am_data_cb;
	if ((st = ucp_worker_set_am_recv_handler(out->worker, &ah)) != UCS_OK) {
		sl_destroy(out);
		return st;
	}
	for (size_t i = 0; i < NSIG_ERR; i++) {
		struct sigaction now;
		sigaction(error_signals[i], NULL, &now);
		if (now.sa_sigaction != go_sa[i].sa_sigaction) {
			sigaction(error_signals[i], &go_sa[i], NULL);
			out->signals_restored = 1;
		}
	}
	return UCS_OK;
}

void sl_destroy(sl_worker_t *w) {
	if (w->worker) {
		ucp_worker_destroy(w->worker);
		w->worker = NULL;
	}
	if (w->ctx) {
		ucp_cleanup(w->ctx);
		w->ctx = NULL;
	}
}

static int make_sockaddr(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len) {
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		*len = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*len = sizeof *in6;
		return 0;
	}
	return -1;
}

ucs_status_t sl_listen(ucp_worker_h w, const char *ip, int port, uintptr_t handle,
                       ucp_listener_h *out, char *bound, size_t boundlen) {
	struct sockaddr_storage ss;
	socklen_t len;
	if (make_sockaddr(ip, port, &ss, &len) != 0) {
		return UCS_ERR_INVALID_ADDR;
	}
	ucp_listener_params_t lp = {0};
	lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
	lp.sockaddr.addr = (struct sockaddr *)&ss;
	lp.sockaddr.addrlen = len;
	lp.conn_handler.cb = conn_cb;
	lp.conn_handler.arg = (void *)handle;
	ucs_status_t st = ucp_listener_create(w, &lp, out);
	if (st != UCS_OK) {
		return st;
	}
	ucp_listener_attr_t la = {0};
	la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
	if ((st = ucp_listener_query(*out, &la)) != UCS_OK) {
		ucp_listener_destroy(*out);
		return st;
	}
	char host[INET6_ADDRSTRLEN];
	if (la.sockaddr.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&la.sockaddr;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
		snprintf(bound, boundlen, "[%s]:%d", host, ntohs(a->sin6_port));
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&la.sockaddr;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		snprintf(bound, boundlen, "%s:%d", host, ntohs(a->sin_port));
	}
	return UCS_OK;
}

static void ep_common(ucp_ep_params_t *ep, uintptr_t handle) {
	ep->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
	ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
	ep->err_handler.cb = ep_err_cb;
	ep->err_handler.arg = (void *)handle;
}

ucs_status_t sl_ep_accept(ucp_worker_h w, ucp_conn_request_h req, uintptr_t handle, ucp_ep_h *out) {
	ucp_ep_params_t ep = {0};
	ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
	ep.conn_request = req;
	ep_common(&ep, handle);
	return ucp_ep_create(w, &ep, out);
}

ucs_status_t sl_ep_connect(ucp_worker_h w, const char *ip, int port, uintptr_t handle, ucp_ep_h *out) {
	struct sockaddr_storage ss;
	socklen_t len;
	if (make_sockaddr(ip, port, &ss, &len) != 0) {
		return UCS_ERR_INVALID_ADDR;
	}
	ucp_ep_params_t ep = {0};
	ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
	ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
	ep.sockaddr.addr = (struct sockaddr *)&ss;
	ep.sockaddr.addrlen = len;
	ep_common(&ep, handle);
	return ucp_ep_create(w, &ep, out);
}

// finish turns an operation's status pointer into a status, freeing the
// request context unless the callback will run.
static ucs_status_t finish(ucs_status_ptr_t sp, sl_req_t *r) {
	if (sp == NULL) {
		if (r) req_free(r);
		return UCS_OK;
	}
	if (UCS_PTR_IS_ERR(sp)) {
		if (r) req_free(r);
		return UCS_PTR_STATUS(sp);
	}
	return UCS_INPROGRESS;
}

ucs_status_t sl_send_ctl(ucp_ep_h ep, void *frame, size_t len, uintptr_t handle, uint64_t id) {
	sl_req_t *r = req_new(handle, id, frame, NULL);
	if (!r) {
		free(frame);
		return UCS_ERR_NO_MEMORY;
	}
	ucp_request_param_t p = {0};
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
	p.cb.send = send_cb;
	p.user_data = r;
	return finish(ucp_am_send_nbx(ep, SL_AM_CTL, NULL, 0, frame, len, &p), r);
}

ucs_status_t sl_send_data(ucp_ep_h ep, void *hdr, size_t hlen, void *payload, size_t n,
                          ucp_mem_h memh, uintptr_t handle, uint64_t id) {
	sl_req_t *r = req_new(handle, id, hdr, NULL);
	if (!r) {
		free(hdr);
		return UCS_ERR_NO_MEMORY;
	}
	ucp_request_param_t p = {0};
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
	                 UCP_OP_ATTR_FIELD_MEMH;
	// Always rendezvous: the receiver fetches the payload only once it has a
	// pool slot for it, so nothing waits in UCX's own buffers.
	p.flags = UCP_AM_SEND_FLAG_RNDV | UCP_AM_SEND_FLAG_REPLY;
	p.cb.send = send_cb;
	p.user_data = r;
	p.memh = memh;
	return finish(ucp_am_send_nbx(ep, SL_AM_DATA, hdr, hlen, payload, n, &p), r);
}

ucs_status_t sl_recv_data(ucp_worker_h w, void *desc, void *buf, size_t n, ucp_mem_h memh,
                          uintptr_t handle, uint64_t id) {
	sl_req_t *r = req_new(handle, id, NULL, NULL);
	if (!r) {
		ucp_am_data_release(w, desc);
		return UCS_ERR_NO_MEMORY;
	}
	ucp_request_param_t p = {0};
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
	p.cb.recv_am = recv_cb;
	p.user_data = r;
	p.memh = memh;
	return finish(ucp_am_recv_data_nbx(w, desc, buf, n, &p), r);
}

ucs_status_t sl_ep_close(ucp_ep_h ep, int force, uintptr_t handle, uint64_t id) {
	sl_req_t *r = req_new(handle, id, NULL, NULL);
	if (!r) {
		return UCS_ERR_NO_MEMORY;
	}
	ucp_request_param_t p = {0};
	p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
	p.cb.send = close_cb;
	p.user_data = r;
	return finish(ucp_ep_close_nbx(ep, &p), r);
}

ucs_status_t sl_mem_map(ucp_context_h ctx, void *addr, size_t len, ucp_mem_h *out) {
	ucp_mem_map_params_t mp = {0};
	mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	mp.address = addr;
	mp.length = len;
	return ucp_mem_map(ctx, &mp, out);
}

void sl_version(unsigned *major, unsigned *minor, unsigned *release) {
	ucp_get_version(major, minor, release);
}

size_t sl_ep_info(ucp_ep_h ep, char *buf, size_t len) {
	FILE *f = fmemopen(buf, len, "w");
	if (!f) {
		return 0;
	}
	ucp_ep_print_info(ep, f);
	long n = ftell(f);
	fclose(f);
	return n < 0 ? 0 : (size_t)n;
}
