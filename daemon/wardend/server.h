/* wardend's HTTP/JSON API on a unix socket (libmicrohttpd, one thread per
 * connection so a streaming response may block on its run). */
#ifndef WD_SERVER_H
#define WD_SERVER_H

#include "common/util.h"
#include "runtime/runtime.h"

struct wd_server;

/* Bind `socket_path` (mode 0666: any local user may talk to the daemon;
 * what they may do is decided from their SO_PEERCRED uid) and serve. */
int wd_server_start(struct wd_rt *rt, const char *socket_path,
		    struct wd_server **out, struct wd_err *err);
/* Optional TCP listener for GET /metrics and /healthz only ("ADDR:PORT"). */
int wd_server_start_metrics(struct wd_server *s, const char *addr,
			    struct wd_err *err);
void wd_server_stop(struct wd_server *s);

#endif
