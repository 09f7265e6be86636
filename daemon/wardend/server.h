/* wardend's HTTP/JSON API on a unix socket: libmicrohttpd with a few epoll
 * workers behind wardend's own accept loop and connection limits
 * (conn.h); streaming responses never hold a worker while they wait
 * (server.c: parked streams). */
#ifndef WD_SERVER_H
#define WD_SERVER_H

#include "common/util.h"
#include "policy/daemon_config.h"
#include "runtime/runtime.h"

struct wd_server;

struct wd_fleet;
/* Bind `socket_path` (mode 0666: any local user may talk to the daemon;
 * what they may do is decided from their SO_PEERCRED uid) and serve.
 * fleet (may be NULL: one node): POST /v1/runs queues in the fleet, and
 * /v1/fleet/... answers. */
int wd_server_start(struct wd_rt *rt, struct wd_fleet *fleet,
		    const char *socket_path, const struct wd_api_limits *lim,
		    struct wd_server **out, struct wd_err *err);
/* The optional TCP listener for GET /metrics and /healthz only: `addr` is
 * "ADDR:PORT" (IPv4; ":PORT" is loopback; port 1..65535, nothing else),
 * bound into *fd_out before the daemon opens anything else, so a typo or a
 * port in use stops the start. */
int wd_metrics_listen(const char *addr, int *fd_out, struct wd_err *err);
/* Serves that socket (taken: closed on failure too). */
int wd_server_start_metrics(struct wd_server *s, int fd, const char *addr,
			    struct wd_err *err);
/* Stops accepting, ends open streams, closes every connection, removes
 * the socket. */
void wd_server_stop(struct wd_server *s);

#endif
