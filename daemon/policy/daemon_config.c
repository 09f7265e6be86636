/* policy/daemon.yaml parser (see daemon_config.h). Strict like every
 * policy file: a typo'd key (`redcat:`) must fail loudly rather than leave
 * secrets unredacted or the pool unbounded. */
#include "policy/daemon_config.h"
#include "policy/ywalk.h"
#include "sandbox/uidpool.h"

#include <regex.h>
#include <string.h>
#include <unistd.h>

struct dctx {
	struct wd_daemon_config *c;
	int docs;
};

/* ---- warm_pool ---------------------------------------------------------- */

static int p_size(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	uint64_t x;
	if (wd_y_uint(w, v, "'warm_pool.size'", 0, 64, &x) < 0)
		return -EINVAL;
	d->c->warm_pool.size = (int)x;
	return 0;
}

static int p_per_tenant(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	uint64_t x;
	if (wd_y_uint(w, v, "'warm_pool.per_tenant'", 0, 4096, &x) < 0)
		return -EINVAL;
	d->c->warm_pool.per_tenant = (int)x;
	return 0;
}

static int p_idle_s(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	uint64_t x;
	/* the pool keeps milliseconds in 32 bits: at most ~49 days */
	if (wd_y_uint(w, v, "'warm_pool.idle_s'", 1, 86400 * 7, &x) < 0)
		return -EINVAL;
	d->c->warm_pool.idle_s = (uint32_t)x;
	return 0;
}

static int p_key_idle_s(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	uint64_t x;
	if (wd_y_uint(w, v, "'warm_pool.key_idle_s'", 1, 86400 * 7, &x) < 0)
		return -EINVAL;
	d->c->warm_pool.key_idle_s = (uint32_t)x;
	return 0;
}

static int p_max_keys(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	uint64_t x;
	if (wd_y_uint(w, v, "'warm_pool.max_keys'", 1, 4096, &x) < 0)
		return -EINVAL;
	d->c->warm_pool.max_keys = (int)x;
	return 0;
}

static int f_warm_pool(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"size", p_size, false},
	    {"per_tenant", p_per_tenant, false},
	    {"idle_s", p_idle_s, false},
	    {"key_idle_s", p_key_idle_s, false},
	    {"max_keys", p_max_keys, false},
	};
	return wd_y_map(w, v, "'warm_pool'", keys, WD_ARRAY_SIZE(keys), o);
}

/* ---- trace.otlp ---------------------------------------------------------- */

static int o_endpoint(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	char *s = NULL;
	if (wd_y_str(w, v, "'trace.otlp.endpoint'", &s) < 0)
		return -EINVAL;
	if (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)) {
		wd_y_err(w, v,
			 "'trace.otlp.endpoint': '%s' is not an http:// or "
			 "https:// URL",
			 s);
		free(s);
		return -EINVAL;
	}
	free(d->c->otlp.endpoint);
	d->c->otlp.endpoint = s;
	return 0;
}

static int o_service(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	int rc = wd_y_str(w, v, "'trace.otlp.service_name'",
			  &d->c->otlp.service_name);
	if (!rc && !d->c->otlp.service_name[0]) {
		wd_y_err(w, v, "'trace.otlp.service_name' must not be empty");
		return -EINVAL;
	}
	return rc;
}

static int o_uint(struct wd_ywalk *w, yaml_node_t *v, const char *what,
		  uint64_t max, unsigned *out)
{
	uint64_t x;
	if (wd_y_uint(w, v, what, 1, max, &x) < 0)
		return -EINVAL;
	*out = (unsigned)x;
	return 0;
}

static int o_queue(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return o_uint(w, v, "'trace.otlp.queue'", 1u << 20,
		      &((struct dctx *)o)->c->otlp.queue);
}

static int o_batch(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return o_uint(w, v, "'trace.otlp.batch'", 65536,
		      &((struct dctx *)o)->c->otlp.batch);
}

static int o_timeout(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return o_uint(w, v, "'trace.otlp.timeout_ms'", 600000,
		      &((struct dctx *)o)->c->otlp.timeout_ms);
}

static int t_otlp(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"endpoint", o_endpoint, true},
	    {"queue", o_queue, false},
	    {"batch", o_batch, false},
	    {"timeout_ms", o_timeout, false},
	    {"service_name", o_service, false},
	};
	return wd_y_map(w, v, "'trace.otlp'", keys, WD_ARRAY_SIZE(keys), o);
}

/* ---- trace.redact ------------------------------------------------------- */

/* Compiled exactly as the trace store will (REG_EXTENDED), so a pattern
 * accepted here cannot make the store refuse to open. PCRE habits such as
 * (?i) or \d are not ERE and are reported here with their position. */
static int regex_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		       void *arg)
{
	(void)arg;
	regex_t rx;
	if (!*s) {
		wd_y_err(w, item, "'trace.redact': empty pattern");
		return -EINVAL;
	}
	int r = regcomp(&rx, s, REG_EXTENDED);
	if (r) {
		char msg[256];
		regerror(r, &rx, msg, sizeof(msg));
		wd_y_err(w, item,
			 "'trace.redact': '%s' is not a POSIX extended regex: "
			 "%s",
			 s, msg);
		return -EINVAL;
	}
	/* a pattern matching the empty string would redact nothing useful
	 * and hide a mistake (e.g. "a*") */
	regmatch_t m;
	bool empty = regexec(&rx, "", 1, &m, 0) == 0;
	regfree(&rx);
	if (empty) {
		wd_y_err(w, item,
			 "'trace.redact': '%s' matches the empty string", s);
		return -EINVAL;
	}
	return 0;
}

static int t_redact(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	wd_y_strv_free(d->c->redact, d->c->n_redact);
	d->c->redact = NULL;
	d->c->n_redact = 0;
	int rc = wd_y_strlist(w, v, "'trace.redact'", &d->c->redact,
			      &d->c->n_redact, regex_check, NULL);
	if (!d->c->redact) {
		d->c->redact = wd_calloc(1, sizeof(char *));
		d->c->n_redact = 0;
	}
	return rc;
}

static int f_trace(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"otlp", t_otlp, false},
	    {"redact", t_redact, false},
	};
	return wd_y_map(w, v, "'trace'", keys, WD_ARRAY_SIZE(keys), o);
}

static int f_api(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_daemon_config_parse_api(w, v, &((struct dctx *)o)->c->api);
}

/* ---- uids -----------------------------------------------------------------
 */

static int u_range(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	cleanup_free char *s = NULL;
	struct wd_err e = {0};
	struct wd_uid_range r;
	if (wd_y_str(w, v, "'uids.range'", &s) < 0)
		return -EINVAL;
	if (wd_uid_range_parse(s, &r, &e) < 0) {
		wd_y_err(w, v, "'uids.range': %s", e.msg);
		return -EINVAL;
	}
	d->c->uids.first = r.first;
	d->c->uids.count = r.count;
	return 0;
}

static int f_uids(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"range", u_range, true},
	};
	return wd_y_map(w, v, "'uids'", keys, WD_ARRAY_SIZE(keys), o);
}

/* ---- dns ------------------------------------------------------------- */

static int d_upstream(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	cleanup_free char *s = NULL;
	struct wd_err e = {0};
	if (wd_y_str(w, v, "'dns.upstream'", &s) < 0)
		return -EINVAL;
	if (wd_dns_upstream_parse(s, &d->c->dns.upstream, &e) < 0) {
		wd_y_err(w, v, "'dns.upstream': %s", e.msg);
		return -EINVAL;
	}
	d->c->dns.have_upstream = true;
	return 0;
}

static int d_hosts(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct dctx *d = o;
	char *s = NULL;
	if (wd_y_str(w, v, "'dns.hosts'", &s) < 0)
		return -EINVAL;
	if (s[0] != '/' || strlen(s) >= sizeof(d->c->dns.upstream.zone_path)) {
		wd_y_err(w, v, "'dns.hosts': '%s' must be an absolute path", s);
		free(s);
		return -EINVAL;
	}
	free(d->c->dns.hosts);
	d->c->dns.hosts = s;
	return 0;
}

static int f_dns(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"upstream", d_upstream, false},
	    {"hosts", d_hosts, false},
	};
	return wd_y_map(w, v, "'dns'", keys, WD_ARRAY_SIZE(keys), o);
}

static int f_fleet(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_daemon_config_parse_fleet(w, v,
					    &((struct dctx *)o)->c->fleet);
}

static const struct wd_y_key top_keys[] = {
    {"warm_pool", f_warm_pool, false},
    {"trace", f_trace, false},
    {"api", f_api, false},
    {"uids", f_uids, false},
    {"dns", f_dns, false},
    {"fleet", f_fleet, false},
};

static void load_doc(struct wd_ywalk *w, yaml_node_t *root, void *arg)
{
	struct dctx *d = arg;
	if (++d->docs > 1) {
		wd_y_err(w, root, "daemon config must hold one document");
		return;
	}
	wd_y_map(w, root, "daemon config", top_keys, WD_ARRAY_SIZE(top_keys),
		 d);
}

/* ---- API --------------------------------------------------------------- */

struct wd_daemon_config *wd_daemon_config_new(void)
{
	struct wd_daemon_config *c = wd_calloc(1, sizeof(*c));
	c->warm_pool.idle_s = 300;
	wd_api_limits_defaults(&c->api);
	c->fleet.capacity = -1;
	c->fleet.when_down = -1;
	for (int i = 0; i < 3; i++)
		c->fleet.tier_capacity[i] = -1;
	c->redact = wd_calloc(1, sizeof(char *));
	return c;
}

int wd_daemon_config_load_str(const char *file, const char *text, size_t len,
			      struct wd_daemon_config **out,
			      struct wd_diag *diag)
{
	struct wd_diag local = {0};
	struct wd_diag *dg = diag ? diag : &local;
	int before = dg->n + dg->dropped;
	struct dctx d = {.c = wd_daemon_config_new()};
	*out = NULL;
	d.c->source = wd_strdup(file ? file : "<input>");
	/* a file of comments only is the defaults, written down */
	int rc = wd_y_load(d.c->source, text, len, dg, load_doc, &d);
	bool bad = rc < 0 || dg->n + dg->dropped != before;
	wd_diag_free(&local);
	if (bad) {
		wd_daemon_config_free(d.c);
		return -EINVAL;
	}
	*out = d.c;
	return 0;
}

int wd_daemon_config_load_file(const char *path, struct wd_daemon_config **out,
			       struct wd_diag *diag)
{
	char *text;
	size_t len;
	*out = NULL;
	int rc = wd_y_read_path(path, &text, &len, diag);
	if (rc < 0)
		return rc;
	rc = wd_daemon_config_load_str(path, text, len, out, diag);
	free(text);
	return rc;
}

int wd_daemon_config_load_dir(const char *dir, struct wd_daemon_config **out,
			      struct wd_err *err)
{
	cleanup_free char *path =
	    wd_asprintf("%s/%s", dir, WD_DAEMON_CONFIG_FILE);
	*out = NULL;
	if (access(path, F_OK) < 0) {
		if (errno != ENOENT)
			return wd_err_set(err, -errno, "%s: %s", path,
					  strerror(errno));
		*out = wd_daemon_config_new();
		return 0;
	}
	struct wd_diag dg = {0};
	int rc = wd_daemon_config_load_file(path, out, &dg);
	if (rc) {
		struct wd_buf b = {0};
		for (int i = 0; i < dg.n; i++)
			wd_buf_printf(&b, "%s%s", i ? "\n" : "", dg.msgs[i]);
		if (dg.dropped)
			wd_buf_printf(&b, "\n(%d more)", dg.dropped);
		wd_err_set(err, rc, "%s", b.data ? b.data : path);
		wd_buf_free(&b);
	}
	wd_diag_free(&dg);
	return rc;
}

void wd_daemon_config_free(struct wd_daemon_config *c)
{
	if (!c)
		return;
	free(c->source);
	free(c->otlp.endpoint);
	free(c->otlp.service_name);
	wd_y_strv_free(c->redact, c->n_redact);
	free(c->dns.hosts);
	wd_fleet_config_free(&c->fleet);
	free(c);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

void wd_daemon_config_diff(const struct wd_daemon_config *a,
			   const struct wd_daemon_config *b, struct wd_buf *out)
{
#define DIFF(cond, name)                                                       \
	do {                                                                   \
		if (cond)                                                      \
			wd_buf_printf(out, "%s%s", out->len ? ", " : "",       \
				      name);                                   \
	} while (0)
	DIFF(a->warm_pool.size != b->warm_pool.size, "warm_pool.size");
	DIFF(a->warm_pool.per_tenant != b->warm_pool.per_tenant,
	     "warm_pool.per_tenant");
	DIFF(a->warm_pool.idle_s != b->warm_pool.idle_s, "warm_pool.idle_s");
	DIFF(a->warm_pool.key_idle_s != b->warm_pool.key_idle_s,
	     "warm_pool.key_idle_s");
	DIFF(a->warm_pool.max_keys != b->warm_pool.max_keys,
	     "warm_pool.max_keys");
	DIFF(!str_eq(a->otlp.endpoint, b->otlp.endpoint),
	     "trace.otlp.endpoint");
	DIFF(!str_eq(a->otlp.service_name, b->otlp.service_name),
	     "trace.otlp.service_name");
	DIFF(a->otlp.queue != b->otlp.queue, "trace.otlp.queue");
	DIFF(a->otlp.batch != b->otlp.batch, "trace.otlp.batch");
	DIFF(a->otlp.timeout_ms != b->otlp.timeout_ms, "trace.otlp.timeout_ms");
	bool rx = a->n_redact != b->n_redact;
	for (int i = 0; !rx && i < a->n_redact; i++)
		rx = strcmp(a->redact[i], b->redact[i]) != 0;
	DIFF(rx, "trace.redact");
	DIFF(a->uids.first != b->uids.first || a->uids.count != b->uids.count,
	     "uids.range");
	DIFF(a->dns.have_upstream != b->dns.have_upstream ||
		 memcmp(a->dns.upstream.server4, b->dns.upstream.server4, 4) ||
		 a->dns.upstream.server_port != b->dns.upstream.server_port,
	     "dns.upstream");
	DIFF(!str_eq(a->dns.hosts, b->dns.hosts), "dns.hosts");
#undef DIFF
	wd_api_limits_diff(&a->api, &b->api, out);
	wd_fleet_config_diff(&a->fleet, &b->fleet, out);
}
