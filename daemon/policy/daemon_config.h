/* policy/daemon.yaml: settings of the daemon itself (not of any agent or
 * tool), optional. Parsed strictly with libyaml (ywalk.h): unknown or
 * duplicate keys, wrong types and invalid regexes are errors
 * "file:line:col: message".
 *
 *   warm_pool:                  # tier-3 (gVisor) sandboxes booted ahead
 *     size: 1                   # ready per call shape; 0 = cold starts
 *     per_tenant: 4             # warm sandboxes one tenant may hold at
 *                               # once; 0 = no quota
 *     idle_s: 300               # a ready sandbox older than this is
 *                               # replaced
 *     key_idle_s: 600           # a call shape unused this long is dropped
 *                               # with its ready sandboxes
 *     max_keys: 32              # shapes kept warm at most (LRU eviction)
 *   trace:
 *     otlp:                     # live export of GenAI spans (OTLP/HTTP JSON)
 *       endpoint: "http://127.0.0.1:4318/v1/traces"
 *       queue: 4096             # records held for the sender; more are
 *                               # dropped (and counted), never blocking
 *       batch: 256              # spans per request
 *       timeout_ms: 2000        # per request
 *       service_name: warden    # resource service.name
 *     redact:                   # extra patterns, POSIX extended regexes,
 *       - "password=[^&[:space:]]+"   # each match becomes [REDACTED]
 *   api:                        # the unix socket's connections (conn.h)
 *     threads: 4                # MHD worker threads (epoll each)
 *     max_connections: 1024     # open at once, all users together
 *     max_connections_per_uid: 64   # open at once per caller uid
 *     request_timeout_s: 10     # a request must arrive whole this soon
 *                               # after connect / the previous response
 *     idle_timeout_s: 30        # nothing moved either way this long
 *     listen_backlog: 4096      # capped by net.core.somaxconn
 *   uids:
 *     range: "2000000000-2000004095"  # the per-call uids (FIRST-LAST)
 *   fleet:                      # many nodes on one PostgreSQL (fleet.h)
 *     url: "@/etc/warden/fleet.url"
 *     capacity: 8               # or [T1, T2, T3]: runs using each tier
 *     lease_ms: 10000
 *     labels: ["zone=a"]
 *     when_down: refuse         # or run_here: the database unreachable
 *
 * Every setting is read when wardend starts; wardend's flags override the
 * file (--warm-pool N, --otlp URL). A reload (SIGHUP, POST
 * /v1/policy/reload) checks the file again -- a bad one fails the reload --
 * but the settings themselves apply at the next start: the trace store
 * compiles its patterns and binds its exporter when it opens, and the pool
 * cannot be swapped under calls in flight.
 */
#ifndef WD_DAEMON_CONFIG_H
#define WD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "enforce/dns.h"
#include "common/util.h"
#include "policy/manifest.h" /* struct wd_diag */

#define WD_DAEMON_CONFIG_FILE "daemon.yaml"

/* api: (daemon_config_api.c); every field >= 1 once parsed */
struct wd_api_limits {
	unsigned threads;
	unsigned max_connections, max_connections_per_uid;
	unsigned request_timeout_s, idle_timeout_s;
	unsigned listen_backlog;
};

/* fleet: (daemon_config_fleet.c); wardend's --fleet flags override */
struct wd_fleet_config {
	char *url;	      /* NULL: not in a fleet */
	int capacity;	      /* -1: not set */
	int tier_capacity[3]; /* capacity: [T1, T2, T3]; -1 each: not set */
	unsigned lease_ms;    /* 0: not set */
	char **labels;	      /* "key=value", NULL-terminated or NULL */
	int n_labels;
	int when_down; /* -1: not set, 0: refuse, 1: run_here */
};
struct wd_daemon_config {
	char *source; /* the file it came from; NULL = built-in defaults */
	struct {
		int size;	/* 0 = no pool (cold starts) */
		int per_tenant; /* 0 = no quota */
		uint32_t idle_s;
		uint32_t key_idle_s; /* 0 = the pool's default */
		int max_keys;	     /* 0 = the pool's default */
	} warm_pool;
	struct {
		char *endpoint; /* NULL = no export */
		char *service_name;
		unsigned queue, batch, timeout_ms; /* 0 = exporter default */
	} otlp;
	struct {
		/* the per-call uids (sandbox/uidpool.h); count 0 = not set:
		 * $WARDEN_UID_RANGE or the built-in default */
		uint32_t first, count;
	} uids;
	char **redact; /* NULL-terminated, never NULL */
	int n_redact;
	struct wd_api_limits api;
	struct wd_fleet_config fleet;
	/* dns: where calls' resolvers look names up (enforce/resolver.h);
	 * --dns-upstream / --dns-hosts override */
	struct {
		bool have_upstream;
		struct wd_dns_upstream upstream; /* server only */
		char *hosts; /* the operator's names, or NULL */
	} dns;
};

/* Defaults when there is no daemon.yaml: no warm pool, no export, no extra
 * patterns. Never NULL. */
struct wd_daemon_config *wd_daemon_config_new(void);
/* Parse. 0, or -EINVAL with one "file:line:col: message" per error in diag,
 * or -errno when the file cannot be read. */
int wd_daemon_config_load_str(const char *file, const char *text, size_t len,
			      struct wd_daemon_config **out,
			      struct wd_diag *diag);
int wd_daemon_config_load_file(const char *path, struct wd_daemon_config **out,
			       struct wd_diag *diag);
/* <dir>/daemon.yaml, or the defaults when it does not exist. 0 or -errno
 * with every diagnostic in err->msg (one per line). */
int wd_daemon_config_load_dir(const char *dir, struct wd_daemon_config **out,
			      struct wd_err *err);
void wd_daemon_config_free(struct wd_daemon_config *c);

/* Names of the settings that differ between a and b, comma separated, into
 * out (empty when they are the same). */
void wd_daemon_config_diff(const struct wd_daemon_config *a,
			   const struct wd_daemon_config *b,
			   struct wd_buf *out);

struct wd_ywalk;
struct yaml_node_s;
void wd_api_limits_defaults(struct wd_api_limits *l);
int wd_daemon_config_parse_fleet(struct wd_ywalk *w, struct yaml_node_s *v,
				 struct wd_fleet_config *f);
void wd_fleet_config_free(struct wd_fleet_config *f);
void wd_fleet_config_diff(const struct wd_fleet_config *a,
			  const struct wd_fleet_config *b, struct wd_buf *out);
int wd_daemon_config_parse_api(struct wd_ywalk *w, struct yaml_node_s *v,
			       struct wd_api_limits *l);
void wd_api_limits_diff(const struct wd_api_limits *a,
			const struct wd_api_limits *b, struct wd_buf *out);

#endif
