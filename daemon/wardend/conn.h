/* The unix socket's front door: wardend accepts connections itself (one
 * thread, epoll) and hands them to libmicrohttpd (MHD_add_connection) only
 * within the limits of policy/daemon.yaml `api:` (daemon_config.h).
 *
 * Why not let MHD accept: the socket is mode 0666, so every local user is a
 * client, and one of them must not lock the others out. MHD's accept knows
 * the peer address only (nothing for AF_UNIX); here the caller's uid comes
 * from SO_PEERCRED at accept, before any byte of the request, so:
 *   - a uid holding max_connections_per_uid connections, or the daemon
 *     holding max_connections, gets its next one answered at once with
 *     `503 {"error":"refused: too many connections from uid N (limit M)"}`
 *     (or "... wardend is at its limit of N connections"), then EOF. The
 *     refused socket is drained for up to a second so the client reads the
 *     answer instead of a reset, then closed -- it holds no MHD slot;
 *   - a request must arrive whole (headers and body) within
 *     request_timeout_s of the connection opening or of the previous
 *     response, else the connection is shut down: slowloris (a byte a
 *     second) and idle connections end there; MHD's own
 *     idle_timeout_s ends a connection on which nothing moved (a client
 *     that stops reading its response);
 *   - a long response (`warden run --follow`, `warden events --follow`) is
 *     not a request in progress: it stays open as long as the client reads
 *     (server.c writes a keep-alive line at least every 10 s).
 * The listen backlog is listen_backlog (capped by net.core.somaxconn), so
 * bursts of connects queue instead of failing with EAGAIN.
 */
#ifndef WD_WARDEND_CONN_H
#define WD_WARDEND_CONN_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "policy/daemon_config.h"

struct wd_gate;

struct wd_gate_stats {
	unsigned open;		   /* connections held by MHD now */
	unsigned lingering;	   /* refused, being drained */
	uint64_t accepted;	   /* handed to MHD */
	uint64_t refused_uid;	   /* per-uid cap */
	uint64_t refused_total;	   /* global cap */
	uint64_t request_timeouts; /* shut down by request_timeout_s */
};

/* Listen on fd (bound, not listening) with l->listen_backlog. The MHD
 * daemon is attached with wd_gate_attach before the first accept. */
int wd_gate_new(int lfd, const struct wd_api_limits *l, struct wd_gate **out,
		struct wd_err *err);
/* The TCP listener (`--metrics`: /metrics and /healthz only) through the
 * same front door, keyed by the client's IPv4 address instead of a uid:
 * per_addr connections per address, max in all, and the same request
 * deadline, so idle or slowloris connections from one address cannot
 * hold the probe port. */
int wd_gate_new_tcp(int lfd, const struct wd_api_limits *l, unsigned per_addr,
		    unsigned max, struct wd_gate **out, struct wd_err *err);
/* Options for MHD_start_daemon: its connection callback (pass `g` as its
 * closure with MHD_OPTION_NOTIFY_CONNECTION). */
void wd_gate_notify(void *cls, struct MHD_Connection *con,
		    void **socket_context,
		    enum MHD_ConnectionNotificationCode t);
/* Start accepting into d. */
int wd_gate_start(struct wd_gate *g, struct MHD_Daemon *d, struct wd_err *err);
/* A request is in whole (headers and body): the request deadline no
 * longer applies while it is handled. */
void wd_gate_request_begin(struct MHD_Connection *con);
/* Its response is queued: the request deadline no longer applies. */
void wd_gate_request_answered(struct MHD_Connection *con);
/* The response is sent (MHD_OPTION_NOTIFY_COMPLETED): a keep-alive
 * connection waits for its next request from now on. */
void wd_gate_request_done(struct MHD_Connection *con);
void wd_gate_stats(struct wd_gate *g, struct wd_gate_stats *out);
/* Stop accepting (joins the thread, closes the listening and refused
 * sockets). Connections already in MHD are MHD's to close. */
void wd_gate_stop(struct wd_gate *g);
void wd_gate_free(struct wd_gate *g);

#endif
