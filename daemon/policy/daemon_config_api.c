/* policy/daemon.yaml, block `api:` -- wardend's connection limits (see
 * daemon_config.h and wardend/conn.h for what each one holds). Kept apart
 * from daemon_config.c so other blocks can grow there without touching
 * this one. */
#include "policy/daemon_config.h"
#include "policy/ywalk.h"

void wd_api_limits_defaults(struct wd_api_limits *l)
{
	l->threads = 4;
	l->max_connections = 1024;
	l->max_connections_per_uid = 64;
	l->request_timeout_s = 10;
	l->idle_timeout_s = 30;
	l->listen_backlog = 4096;
}

static int a_uint(struct wd_ywalk *w, yaml_node_t *v, const char *what,
		  uint64_t min, uint64_t max, unsigned *out)
{
	uint64_t x;
	if (wd_y_uint(w, v, what, min, max, &x) < 0)
		return -EINVAL;
	*out = (unsigned)x;
	return 0;
}

#define API_KEY(field, lo, hi)                                                 \
	static int a_##field(struct wd_ywalk *w, yaml_node_t *v, void *o)      \
	{                                                                      \
		struct wd_api_limits *l = o;                                   \
		return a_uint(w, v, "'api." #field "'", lo, hi, &l->field);    \
	}
/* threads: MHD workers (epoll each); a handler that waits (fsync of a
 * run_start) holds only its own worker's connections. */
API_KEY(threads, 1, 64)
API_KEY(max_connections, 1, 1u << 20)
API_KEY(max_connections_per_uid, 1, 1u << 20)
API_KEY(request_timeout_s, 1, 3600)
API_KEY(idle_timeout_s, 1, 86400)
/* the kernel caps it at net.core.somaxconn */
API_KEY(listen_backlog, 16, 1u << 20)
#undef API_KEY

int wd_daemon_config_parse_api(struct wd_ywalk *w, yaml_node_t *v,
			       struct wd_api_limits *l)
{
	static const struct wd_y_key keys[] = {
	    {"threads", a_threads, false},
	    {"max_connections", a_max_connections, false},
	    {"max_connections_per_uid", a_max_connections_per_uid, false},
	    {"request_timeout_s", a_request_timeout_s, false},
	    {"idle_timeout_s", a_idle_timeout_s, false},
	    {"listen_backlog", a_listen_backlog, false},
	};
	int rc = wd_y_map(w, v, "'api'", keys, WD_ARRAY_SIZE(keys), l);
	if (rc == 0 && l->max_connections_per_uid > l->max_connections) {
		wd_y_err(w, v,
			 "'api.max_connections_per_uid' (%u) is above "
			 "'api.max_connections' (%u)",
			 l->max_connections_per_uid, l->max_connections);
		return -EINVAL;
	}
	return rc;
}

void wd_api_limits_diff(const struct wd_api_limits *a,
			const struct wd_api_limits *b, struct wd_buf *out)
{
#define DIFF(f)                                                                \
	do {                                                                   \
		if (a->f != b->f)                                              \
			wd_buf_printf(out, "%sapi." #f, out->len ? ", " : ""); \
	} while (0)
	DIFF(threads);
	DIFF(max_connections);
	DIFF(max_connections_per_uid);
	DIFF(request_timeout_s);
	DIFF(idle_timeout_s);
	DIFF(listen_backlog);
#undef DIFF
}
