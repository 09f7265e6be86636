/* Tool manifest: the parsed form of a policy/tools/ YAML file
 * (DESIGN.md §4). Every field here is enforced, not documentation.
 *
 * Loading: wd_manifest_load_file()/wd_manifest_load_str() parse YAML (JSON is
 * YAML) with libyaml, reject unknown keys, canonicalise paths and parse
 * network endpoints. Errors are collected as "file:line:col: message".
 */
#ifndef WD_MANIFEST_H
#define WD_MANIFEST_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"

enum wd_tier { WD_TIER_1 = 1, WD_TIER_2 = 2, WD_TIER_3 = 3 };
enum wd_input_mode { WD_INPUT_STDIN_JSON, WD_INPUT_ARGV, WD_INPUT_STDIN_FIELD };
enum wd_side_effects { WD_SE_NONE, WD_SE_INTERNAL, WD_SE_EXTERNAL };
/* "none", "internal", "external" (the manifest's words, in order) */
extern const char *const wd_side_effects_words[3];
/* A label as a record names it; NULL or an unknown word is external
 * (the strictest: a replay never runs a tool live on a guess). */
enum wd_side_effects wd_side_effects_parse(const char *s);
enum wd_mode { WD_MODE_ENFORCE, WD_MODE_AUDIT };
enum wd_auth_mode { WD_AUTH_ON_BEHALF_OF_USER, WD_AUTH_SERVICE };

/* One egress allow-list entry: an address prefix and a port (0 = any).
 * IPv4 is stored as IPv4-mapped IPv6 (::ffff:a.b.c.d) so one rule type
 * covers connect4 and IPv4-mapped connect6. `text` keeps the original
 * text. A host name that is not a literal address is NOT resolved at load
 * (DNS at load time would freeze a stale answer into the policy and make
 * `policy check` depend on the network): `needs_resolve` is set, `host`
 * holds the name, addr/prefix are zero, and the sandbox resolves it at call
 * time and fails closed if it cannot. */
struct wd_net_rule {
	uint8_t addr[16];   /* network byte order, IPv6 or v4-mapped */
	uint8_t prefix;	    /* 0..128 over the 16-byte form */
	uint16_t port;	    /* host byte order; 0 = any port */
	char text[128];	    /* as written, for messages (may be truncated) */
	bool needs_resolve; /* `host` is a DNS name, addr/prefix unset */
	char host[254];	    /* the DNS name (lower case) when needs_resolve */
};

/* Paths are canonical at load (wd_path_canonical). filesystem.write may not
 * name a system path (/etc, /usr, /proc, /sys, ...), anything under one, or
 * an ancestor of one ("/", "/var"): such a manifest is refused. When both
 * exec and filesystem.exec are given, exec[0] must lie under an exec path. */
struct wd_path_list {
	char **v; /* canonical absolute paths */
	int n;
};

/* Accepted forms: `approval: always`, `approval: never` (the default),
 * `approval: {required_above: {arg: number, ...}}`, and the seed's
 * `approval: required_above` + sibling `approval_threshold: {arg: number}`.
 * Thresholds are >= 0. */
struct wd_approval {
	bool always;
	/* required_above: {arg_name: threshold}; approval needed when the
	 * numeric value (or array length) of args[arg] exceeds threshold */
	char **above_keys;
	double *above_vals;
	int n_above;
};

/* "N/sec|min|hour [per run|user|agent]" (also s/second, m/minute, h);
 * the scope defaults to "run". */
struct wd_rate_limit {
	int count;	/* 0 = none */
	int per_s;	/* window in seconds */
	char scope[16]; /* "run" | "user" | "agent" */
};

struct wd_manifest {
	char *source; /* file the manifest came from (for messages) */
	char *name;
	char *description;
	enum wd_tier tier;
	char **exec; /* argv prefix, NULL-terminated; NULL if absent */
	int n_exec;
	enum wd_input_mode input;
	char *input_field; /* for stdin:<field> */
	/* `argv:` template for input: argv (NULL when absent): literal
	 * elements and {property} placeholders (wd_argv_elem_parse) */
	char **argv_tmpl;
	int n_argv_tmpl;
	char *args_schema; /* compact JSON text of the schema; never NULL after
			    * load ({"type":"object"} when absent) */
	uint32_t timeout_ms;
	uint32_t memory_mb; /* 0 = unset -> default */
	double cpus;	    /* 0 = unset */
	uint32_t pids;	    /* 0 = unset -> default */
	struct wd_net_rule *net_allow;
	int n_net_allow;
	/* network.allow_private: ranges (port 0) an answer for a name in
	 * net_allow may fall in although loopback, private, link-local or
	 * the metadata address (enforce/dns.h); never NULL after load */
	struct wd_net_rule *net_private;
	int n_net_private;
	bool filesystem_ephemeral; /* `filesystem: ephemeral` shorthand */
	struct wd_path_list fs_read, fs_write, fs_exec;
	char **syscalls_deny; /* names, validated against libseccomp */
	int n_syscalls_deny;
	char **socket_families; /* extra AFs allowed, e.g. "netlink" (never
				 * unix/inet/inet6/icmp: see below) */
	int n_socket_families;
	int *socket_family_nums; /* AF_* numbers of socket_families */
	bool net_icmp;		 /* network.families lists icmp: ping
				  * sockets (policy/families.h) */
	bool net_listen;	 /* network.listen: inbound allowed (bind to
				  * a port, listen, SO_REUSEPORT) */
	enum wd_auth_mode auth_mode;
	char **auth_scopes;
	int n_auth_scopes;
	struct wd_rate_limit rate_limit;
	enum wd_side_effects side_effects;
	struct wd_approval approval;
	uint32_t output_max_bytes;
	enum wd_mode mode;
	char **require; /* mechanisms the call must have, e.g. "bpf_lsm" */
	int n_require;
	int line; /* 1-based line of the manifest's document in `source` */
	/* `replay: {environment: {network: {allow}, filesystem: {write},
	 * env}}` (side_effects: internal only): the manifest a live replay
	 * (`warden replay --live-internal`) runs this tool with — this one
	 * with network.allow and filesystem.write REPLACED by the
	 * environment's (absent = nothing) and `env` set. Each of its write
	 * paths and allow rules is disjoint from this manifest's: a live
	 * replay never writes or connects where production does. NULL when
	 * not declared (the tool then never runs live in a replay). Owned. */
	struct wd_manifest *replay_env;
	/* "NAME=value" added to the tool's environment: set only in a
	 * replay_env manifest (from replay.environment.env) */
	char **env;
	int n_env;
};

/* Defaults for absent fields, beyond the numeric ones below:
 *   side_effects -> external (an undeclared tool is assumed to change the
 *   world: never replayed live); auth.mode -> on_behalf_of_user; mode ->
 *   enforce; network.allow, filesystem lists, syscalls.deny -> empty
 *   (deny by default); input -> stdin; cpus -> 0 (no CPU limit). */

/* Defaults applied when a field is absent. */
#define WD_DEFAULT_TIMEOUT_MS 30000
#define WD_DEFAULT_MEMORY_MB  256
#define WD_DEFAULT_PIDS	      64
#define WD_DEFAULT_OUTPUT_MAX 65536

/* A list of diagnostics "file:line:col: message". `items` holds the same
 * diagnostics split into their parts (for --json). At most WD_DIAG_MAX are
 * kept; `dropped` counts the rest. */
struct wd_diag_item {
	char *file;
	int line, col; /* 1-based; 0 when unknown */
	char *msg;
};
struct wd_diag {
	char **msgs;
	int n;
	struct wd_diag_item *items;
	int dropped;
};
#define WD_DIAG_MAX 200
void wd_diag_add(struct wd_diag *d, const char *file, int line, int col,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void wd_diag_free(struct wd_diag *d);

/* Parse. On any error returns -EINVAL with messages in `diag` and *out NULL.
 * A multi-document file (---) yields the first manifest via _load_file and
 * all of them via wd_manifest_load_all(). */
int wd_manifest_load_file(const char *path, struct wd_manifest **out,
			  struct wd_diag *diag);
int wd_manifest_load_str(const char *name, const char *text, size_t len,
			 struct wd_manifest **out, struct wd_diag *diag);
int wd_manifest_load_all(const char *path, struct wd_manifest ***out, int *n,
			 struct wd_diag *diag);
int wd_manifest_load_all_str(const char *name, const char *text, size_t len,
			     struct wd_manifest ***out, int *n,
			     struct wd_diag *diag);
void wd_manifest_free(struct wd_manifest *m);
void wd_manifest_free_all(struct wd_manifest **v, int n);

/* The manifest as JSON (canonical paths, parsed rules; json_t from
 * jansson). Never NULL. */
struct json_t;
struct json_t *wd_manifest_to_json(const struct wd_manifest *m);

/* Canonical form of an absolute path: its longest existing prefix with
 * every symlink resolved (so /lib -> /usr/lib on merged-usr), the rest
 * lexically normalised ("." "..", "//"). A symlink is followed only when it
 * and its directory are root's and no one else may write that directory
 * (common/safepath.h): one a tool could have made refuses the path
 * (-ELOOP, the link named in err). Returns 0 and a malloc'd *out, or
 * -EINVAL (relative, empty) / -ENAMETOOLONG / -ELOOP with a message in
 * err. */
int wd_path_canonical(const char *path, char **out, struct wd_err *err);

/* AF_* number of a socket family name ("netlink", "packet", "unix", ...)
 * from policy/families.h, or -1 if it is not there (or is "icmp", which
 * is no AF). */
int wd_socket_family_parse(const char *name);

/* One element of an `argv` template, split into pieces: literal text
 * (name NULL: text[0..len)) and {property} placeholders (name[0..len)).
 * "{{" and "}}" are literal braces. 0, or -EINVAL with a message in err
 * (an unbalanced brace, an empty placeholder, more than `max` pieces). */
struct wd_argv_piece {
	const char *text; /* literal text, or NULL */
	const char *name; /* placeholder name, or NULL */
	size_t len;
};
int wd_argv_elem_parse(const char *elem, struct wd_argv_piece *pieces, int max,
		       int *n, struct wd_err *err);
#define WD_ARGV_MAX_PIECES 16

/* Known names for `require:` (enforcement mechanisms). */
bool wd_mechanism_known(const char *name);
/* A DNS name is listed in network.allow (the call gets its resolver). */
bool wd_manifest_names(const struct wd_manifest *m);

/* Parse "host:port", "a.b.c.d/nn:port", "[v6]:port", "[v6/nn]:port"; port
 * may be "*". Returns 0 or -EINVAL with a message in err. */
int wd_net_rule_parse(const char *text, struct wd_net_rule *r,
		      struct wd_err *err);

#endif
