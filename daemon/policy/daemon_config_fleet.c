/* policy/daemon.yaml, block `fleet:` -- the same settings as wardend's
 * --fleet flags (fleet/fleet.h), which override them one by one:
 *
 *   fleet:
 *     url: "@/etc/warden/fleet.url"   # libpq URL or key=value string, or
 *                                     # @FILE / an absolute path holding it
 *     capacity: 8                     # fleet runs held at once (0: queue
 *                                     # only); default wardend's workers
 *                                     # -- in each tier the node can run;
 *                                     # or [T1, T2, T3]: runs using tier
 *                                     # 1, 2, 3 at once (--fleet-capacity)
 *     lease_ms: 10000                 # see fleet.h "Leases"
 *     labels: ["zone=a"]              # KEY=VALUE, recorded in the node's row
 *     when_down: refuse               # the database unreachable: refuse a
 *                                     # submission (503), or run_here
 *
 * The URL's syntax and file are checked when wardend starts (with libpq);
 * here only its form. */
#include <string.h>

#include "fleet/fleet.h"
#include "policy/daemon_config.h"
#include "policy/ywalk.h"

#define FC(o) ((struct wd_fleet_config *)(o))

static int k_url(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	char *s = NULL;
	if (wd_y_str(w, v, "'fleet.url'", &s) < 0)
		return -EINVAL;
	if (!*s || (s[0] == '@' && s[1] != '/')) {
		wd_y_err(w, v,
			 "'fleet.url': a connection string, or @FILE with an "
			 "absolute path");
		free(s);
		return -EINVAL;
	}
	free(FC(o)->url);
	FC(o)->url = s;
	return 0;
}

static int k_capacity(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (v->type != YAML_SEQUENCE_NODE) {
		if (wd_y_uint(w, v, "'fleet.capacity'", 0, 1000000, &x) < 0)
			return -EINVAL;
		FC(o)->capacity = (int)x;
		return 0;
	}
	/* [T1, T2, T3]: each tier's room, the node's the largest */
	yaml_node_item_t *it = v->data.sequence.items.start;
	if (v->data.sequence.items.top - it != 3) {
		wd_y_err(w, v,
			 "'fleet.capacity': a number, or [T1, T2, T3] (runs "
			 "using tier 1, 2, 3)");
		return -EINVAL;
	}
	FC(o)->capacity = 0;
	for (int i = 0; i < 3; i++) {
		yaml_node_t *n = yaml_document_get_node(w->doc, it[i]);
		if (!n ||
		    wd_y_uint(w, n, "'fleet.capacity'", 0, 1000000, &x) < 0)
			return -EINVAL;
		FC(o)->tier_capacity[i] = (int)x;
		if ((int)x > FC(o)->capacity)
			FC(o)->capacity = (int)x;
	}
	return 0;
}

static int k_lease(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'fleet.lease_ms'", WD_FLEET_LEASE_MS_MIN, 1000000,
		      &x) < 0)
		return -EINVAL;
	FC(o)->lease_ms = (unsigned)x;
	return 0;
}

static int k_when_down(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	char *s = NULL;
	if (wd_y_str(w, v, "'fleet.when_down'", &s) < 0)
		return -EINVAL;
	int m = wd_fleet_when_down_parse(s);
	free(s);
	if (m < 0) {
		wd_y_err(w, v, "'fleet.when_down': refuse or run_here");
		return -EINVAL;
	}
	FC(o)->when_down = m;
	return 0;
}

static int label_ok(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		    void *arg)
{
	struct wd_err e = {0};
	if (wd_fleet_label_check(s, &e) == 0)
		return 0;
	wd_y_err(w, item, "'fleet.labels': %s", e.msg);
	return -EINVAL;
}

static int k_labels(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	wd_y_strv_free(FC(o)->labels, FC(o)->n_labels);
	FC(o)->labels = NULL;
	FC(o)->n_labels = 0;
	int rc = wd_y_strlist(w, v, "'fleet.labels'", &FC(o)->labels,
			      &FC(o)->n_labels, label_ok, NULL);
	if (rc == 0 && FC(o)->n_labels > WD_FLEET_LABELS_MAX) {
		wd_y_err(w, v, "'fleet.labels': at most %d",
			 WD_FLEET_LABELS_MAX);
		return -EINVAL;
	}
	return rc;
}

int wd_daemon_config_parse_fleet(struct wd_ywalk *w, yaml_node_t *v,
				 struct wd_fleet_config *f)
{
	static const struct wd_y_key keys[] = {
	    {"url", k_url, true},
	    {"capacity", k_capacity, false},
	    {"lease_ms", k_lease, false},
	    {"labels", k_labels, false},
	    {"when_down", k_when_down, false},
	};
	return wd_y_map(w, v, "'fleet'", keys, WD_ARRAY_SIZE(keys), f);
}

void wd_fleet_config_free(struct wd_fleet_config *f)
{
	free(f->url);
	wd_y_strv_free(f->labels, f->n_labels);
	memset(f, 0, sizeof(*f));
	f->capacity = -1;
	f->when_down = -1;
	for (int i = 0; i < 3; i++)
		f->tier_capacity[i] = -1;
}

void wd_fleet_config_diff(const struct wd_fleet_config *a,
			  const struct wd_fleet_config *b, struct wd_buf *out)
{
	bool lab = a->n_labels != b->n_labels;
	for (int i = 0; !lab && i < a->n_labels; i++)
		lab = strcmp(a->labels[i], b->labels[i]) != 0;
	const struct {
		bool differ;
		const char *name;
	} d[] = {
	    {!(a->url == b->url ||
	       (a->url && b->url && !strcmp(a->url, b->url))),
	     "fleet.url"},
	    {a->capacity != b->capacity ||
		 memcmp(a->tier_capacity, b->tier_capacity,
			sizeof(a->tier_capacity)),
	     "fleet.capacity"},
	    {a->lease_ms != b->lease_ms, "fleet.lease_ms"},
	    {lab, "fleet.labels"},
	    {a->when_down != b->when_down, "fleet.when_down"},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(d); i++)
		if (d[i].differ)
			wd_buf_printf(out, "%s%s", out->len ? ", " : "",
				      d[i].name);
}

int wd_fleet_when_down_parse(const char *s)
{
	return !strcmp(s, "refuse") ? 0 : !strcmp(s, "run_here") ? 1 : -1;
}

/* here, not in fleet/: the CLI (policy check) judges labels and is linked
 * without the fleet box (libpq) */
int wd_fleet_label_check(const char *kv, struct wd_err *err)
{
	const char *eq = strchr(kv, '=');
	size_t kn = eq ? (size_t)(eq - kv) : 0;
	if (!eq || !kn || kn > 63 ||
	    strspn(kv, "abcdefghijklmnopqrstuvwxyz0123456789_.-/") != kn ||
	    strlen(eq + 1) > 255)
		return wd_err_set(err, -EINVAL,
				  "--fleet-label %s: want KEY=VALUE (key of "
				  "[a-z0-9_./-], 1..63; value up to 255)",
				  kv);
	return 0;
}
