/* Labelled runtime families for /metrics. See metrics.h. */
#include "alert/metrics.h"

#include <pthread.h>
#include <string.h>

#define MAX_LABELS 5
#define LABEL_LEN  64

enum ftype { F_COUNTER, F_HISTOGRAM };

struct family {
	const char *name, *help;
	enum ftype type;
	const char *labels[MAX_LABELS + 1]; /* NULL-terminated */
};

/* The one table of the runtime's labelled families. Histogram names end
 * in the unit (_seconds), counters in _total (Prometheus conventions). */
static const struct family families[WD_M_NR] = {
    [WD_M_RUNS_STARTED] = {"warden_runs_started_total",
			   "Runs started (replays and sub-agent runs "
			   "included).",
			   F_COUNTER,
			   {"team", "agent"}},
    [WD_M_RUNS_ENDED] = {"warden_runs_ended_total",
			 "Runs ended, by run_end status (ok, failed, "
			 "stopped, refused, interrupted, ...).",
			 F_COUNTER,
			 {"team", "agent", "outcome"}},
    [WD_M_BUDGET_STOPS] = {"warden_budget_stops_total",
			   "Runs stopped by one of their four bounds.",
			   F_COUNTER,
			   {"team", "agent", "bound"}},
    [WD_M_STEPS] = {"warden_steps_total",
		    "Agent loop steps completed (model call and its tool "
		    "calls).",
		    F_COUNTER,
		    {"team", "agent"}},
    [WD_M_MODEL_CALLS] = {"warden_model_calls_total",
			  "Model calls made through the gateway.",
			  F_COUNTER,
			  {"team", "agent", "outcome"}},
    [WD_M_TOOL_CALLS] = {"warden_tool_calls_total",
			 "Tool calls run in a sandbox, by tool_result "
			 "status.",
			 F_COUNTER,
			 {"team", "agent", "tool", "tier", "outcome"}},
    [WD_M_TOOL_REFUSALS] = {"warden_tool_refusals_total",
			    "Tool calls the broker refused, by the check "
			    "that refused them (tool is not_granted for a "
			    "name outside the agent's grants).",
			    F_COUNTER,
			    {"team", "agent", "tool", "check"}},
    [WD_M_DENIALS] = {"warden_denials_total",
		      "Kernel denials (verdict denied) and audit-mode events "
		      "(verdict audited: would be denied, was allowed) of "
		      "tool calls, every one the call made: those its result "
		      "could not list included.",
		      F_COUNTER,
		      {"team", "agent", "tool", "tier", "verdict"}},
    [WD_M_DENIALS_UNTRACED] = {"warden_denials_untraced_total",
			       "Denials and audits counted in "
			       "warden_denials_total that the call's result "
			       "and trace do not list (the kernel's event ring "
			       "buffer had no room, or past the 4,096 a result "
			       "keeps).",
			       F_COUNTER,
			       {"team", "agent", "tool", "tier"}},
    [WD_M_STEP_SECONDS] = {"warden_step_duration_seconds",
			   "Wall time of a completed step, from its model "
			   "call to its last tool result (approval waits "
			   "included).",
			   F_HISTOGRAM,
			   {"team", "agent"}},
    [WD_M_MODEL_SECONDS] = {"warden_model_call_duration_seconds",
			    "Model call latency through the gateway "
			    "(retries and failover included).",
			    F_HISTOGRAM,
			    {"team", "agent", "outcome"}},
    [WD_M_TOOL_SECONDS] = {"warden_tool_call_duration_seconds",
			   "Tool call duration: broker execution, sandbox "
			   "set-up and teardown included.",
			   F_HISTOGRAM,
			   {"team", "agent", "tool", "tier"}},
};

static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
				1,     2.5,  5,	    10,	  30,  60,   120};
#define NB WD_ARRAY_SIZE(bounds)

struct series {
	struct series *hnext, *next;
	uint64_t hash;
	char v[MAX_LABELS][LABEL_LEN];
	uint64_t count;	     /* counter value, or observations */
	uint64_t bucket[NB]; /* non-cumulative; +Inf = count */
	double sum;
};

struct fam {
	struct series **tab;
	struct series *first, *last, *other;
	uint32_t n;
};

struct wd_metrics {
	pthread_mutex_t mu;
	uint32_t max, nbuckets;
	struct fam f[WD_M_NR];
};

struct wd_metrics *wd_metrics_new(uint32_t max_series)
{
	struct wd_metrics *m = wd_calloc(1, sizeof(*m));
	m->max = max_series ? max_series : 2048;
	m->nbuckets = 64;
	while (m->nbuckets < m->max && m->nbuckets < (1u << 20))
		m->nbuckets <<= 1;
	for (int i = 0; i < WD_M_NR; i++)
		m->f[i].tab = wd_calloc(m->nbuckets, sizeof(*m->f[i].tab));
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

void wd_metrics_free(struct wd_metrics *m)
{
	if (!m)
		return;
	for (int i = 0; i < WD_M_NR; i++) {
		struct series *s = m->f[i].first;
		while (s) {
			struct series *n = s->next;
			free(s);
			s = n;
		}
		free(m->f[i].other);
		free(m->f[i].tab);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int nlabels(const struct family *fd)
{
	int n = 0;
	while (n < MAX_LABELS && fd->labels[n])
		n++;
	return n;
}

/* Label values are printable ASCII (policy names are [a-z0-9_-]; this
 * only guards against a caller passing something else). */
static void clean(char *dst, const char *src)
{
	size_t j = 0;
	if (!src || !*src)
		src = "unknown";
	for (; *src && j + 1 < LABEL_LEN; src++) {
		unsigned char c = (unsigned char)*src;
		dst[j++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	dst[j] = 0;
}

/* The series of these labels (created, or the family's "other" series
 * past the cap). m->mu held. */
static struct series *lookup(struct wd_metrics *m, enum wd_metric id,
			     const char *const *labels)
{
	struct fam *f = &m->f[id];
	int nl = nlabels(&families[id]);
	char v[MAX_LABELS][LABEL_LEN];
	uint64_t h = 14695981039346656037ull ^ (uint64_t)id;
	for (int i = 0; i < nl; i++) {
		clean(v[i], labels ? labels[i] : NULL);
		for (const char *p = v[i]; *p; p++) {
			h ^= (unsigned char)*p;
			h *= 1099511628211ull;
		}
		h ^= 0xff;
		h *= 1099511628211ull;
	}
	uint32_t b = (uint32_t)(h & (m->nbuckets - 1));
	for (struct series *s = f->tab[b]; s; s = s->hnext) {
		if (s->hash != h)
			continue;
		int i = 0;
		while (i < nl && !strcmp(s->v[i], v[i]))
			i++;
		if (i == nl)
			return s;
	}
	if (f->n >= m->max) {
		if (!f->other) {
			f->other = wd_calloc(1, sizeof(*f->other));
			for (int i = 0; i < nl; i++)
				snprintf(f->other->v[i], LABEL_LEN, "other");
		}
		return f->other;
	}
	struct series *s = wd_calloc(1, sizeof(*s));
	memcpy(s->v, v, sizeof(v));
	s->hash = h;
	s->hnext = f->tab[b];
	f->tab[b] = s;
	if (f->last)
		f->last->next = s;
	else
		f->first = s;
	f->last = s;
	f->n++;
	return s;
}

void wd_metrics_add(struct wd_metrics *m, enum wd_metric id, uint64_t n,
		    const char *const *labels)
{
	if (!m || (unsigned)id >= WD_M_NR || families[id].type != F_COUNTER)
		return;
	pthread_mutex_lock(&m->mu);
	lookup(m, id, labels)->count += n;
	pthread_mutex_unlock(&m->mu);
}

void wd_metrics_observe(struct wd_metrics *m, enum wd_metric id, double v,
			const char *const *labels)
{
	if (!m || (unsigned)id >= WD_M_NR || families[id].type != F_HISTOGRAM ||
	    !(v >= 0))
		return;
	pthread_mutex_lock(&m->mu);
	struct series *s = lookup(m, id, labels);
	s->count++;
	s->sum += v;
	for (size_t i = 0; i < NB; i++)
		if (v <= bounds[i]) {
			s->bucket[i]++;
			break;
		}
	pthread_mutex_unlock(&m->mu);
}

uint64_t wd_metrics_total(struct wd_metrics *m, enum wd_metric id)
{
	if (!m || (unsigned)id >= WD_M_NR)
		return 0;
	uint64_t t = 0;
	pthread_mutex_lock(&m->mu);
	for (struct series *s = m->f[id].first; s; s = s->next)
		t += s->count;
	if (m->f[id].other)
		t += m->f[id].other->count;
	pthread_mutex_unlock(&m->mu);
	return t;
}

void wd_metrics_label(struct wd_buf *b, const char *name, const char *v,
		      bool first)
{
	wd_buf_printf(b, "%s%s=\"", first ? "" : ",", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			wd_buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			wd_buf_append(b, "\\n", 2);
		else
			wd_buf_append(b, v, 1);
	}
	wd_buf_append(b, "\"", 1);
}

static void labels_of(struct wd_buf *b, const struct family *fd,
		      const struct series *s)
{
	for (int i = 0; i < MAX_LABELS && fd->labels[i]; i++)
		wd_metrics_label(b, fd->labels[i], s->v[i], i == 0);
}

static void render_series(struct wd_buf *b, const struct family *fd,
			  const struct series *s)
{
	if (fd->type == F_COUNTER) {
		wd_buf_printf(b, "%s{", fd->name);
		labels_of(b, fd, s);
		wd_buf_printf(b, "} %llu\n", (unsigned long long)s->count);
		return;
	}
	uint64_t cum = 0;
	for (size_t i = 0; i <= NB; i++) {
		cum = i < NB ? cum + s->bucket[i] : s->count;
		wd_buf_printf(b, "%s_bucket{", fd->name);
		labels_of(b, fd, s);
		if (i < NB)
			wd_buf_printf(b, ",le=\"%g\"} %llu\n", bounds[i],
				      (unsigned long long)cum);
		else
			wd_buf_printf(b, ",le=\"+Inf\"} %llu\n",
				      (unsigned long long)cum);
	}
	wd_buf_printf(b, "%s_sum{", fd->name);
	labels_of(b, fd, s);
	wd_buf_printf(b, "} %.9g\n%s_count{", s->sum, fd->name);
	labels_of(b, fd, s);
	wd_buf_printf(b, "} %llu\n", (unsigned long long)s->count);
}

void wd_metrics_family(struct wd_buf *b, const char *name, const char *type,
		       const char *help)
{
	wd_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
		      type);
}

void wd_metrics_render(struct wd_metrics *m, struct wd_buf *out)
{
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < WD_M_NR; i++) {
		const struct family *fd = &families[i];
		wd_metrics_family(
		    out, fd->name,
		    fd->type == F_COUNTER ? "counter" : "histogram", fd->help);
		for (struct series *s = m->f[i].first; s; s = s->next)
			render_series(out, fd, s);
		if (m->f[i].other)
			render_series(out, fd, m->f[i].other);
	}
	pthread_mutex_unlock(&m->mu);
}
