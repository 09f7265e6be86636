/* Agent definitions: YAML -> struct wd_agent, strictly (ywalk.h). */
#include "policy/agent.h"
#include "fleet/fleet.h"
#include "policy/ywalk.h"

#include <jansson.h>

#include <string.h>

#define A(obj) ((struct wd_agent *)(obj))

static int f_name(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_name(w, v, "'name'", &A(o)->name);
}
static int f_team(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_name(w, v, "'team'", &A(o)->team);
}
static int f_description(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_str(w, v, "'description'", &A(o)->description);
}

static int f_model(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	char *s = NULL;
	if (wd_y_str(w, v, "'model'", &s) < 0)
		return -EINVAL;
	bool ok = *s && strlen(s) <= 128;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_-./:", *p)))
			ok = false;
	if (!ok) {
		wd_y_err(w, v, "'model': '%s' is not a model alias", s);
		free(s);
		return -EINVAL;
	}
	free(A(o)->model);
	A(o)->model = s;
	A(o)->model_line = (int)v->start_mark.line + 1;
	A(o)->model_col = (int)v->start_mark.column + 1;
	return 0;
}

static int f_system_prompt(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	if (wd_y_str(w, v, "'system_prompt'", &A(o)->system_prompt) < 0)
		return -EINVAL;
	if (strlen(A(o)->system_prompt) > 100000) {
		wd_y_err(w, v, "'system_prompt' is longer than 100000 bytes");
		return -EINVAL;
	}
	return 0;
}

static int tool_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		      void *arg)
{
	struct wd_agent *a = arg;
	if (!wd_y_valid_name(s)) {
		wd_y_err(w, item, "'tools': '%s' is not a tool name", s);
		return -EINVAL;
	}
	if (!strncmp(s, WD_SUBAGENT_TOOL_PREFIX,
		     strlen(WD_SUBAGENT_TOOL_PREFIX))) {
		wd_y_err(w, item,
			 "'tools': names starting with '%s' are reserved for "
			 "sub-agents; list the agent under 'subagents'",
			 WD_SUBAGENT_TOOL_PREFIX);
		return -EINVAL;
	}
	(void)a;
	return 0;
}

/* Positions of a string list's items, for cross-file diagnostics. */
static void item_marks(struct wd_ywalk *w, yaml_node_t *v, int n, int **line,
		       int **col)
{
	free(*line);
	free(*col);
	*line = wd_calloc((size_t)n + 1, sizeof(int));
	*col = wd_calloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		yaml_node_t *it = yaml_document_get_node(
		    w->doc, v->data.sequence.items.start[i]);
		(*line)[i] = (int)it->start_mark.line + 1;
		(*col)[i] = (int)it->start_mark.column + 1;
	}
}

static int subagent_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
			  void *arg)
{
	(void)arg;
	if (!wd_y_valid_name(s)) {
		wd_y_err(w, item, "'subagents': '%s' is not an agent name", s);
		return -EINVAL;
	}
	return 0;
}

static int f_subagents(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_agent *a = A(o);
	if (wd_y_strlist(w, v, "'subagents'", &a->subagents, &a->n_subagents,
			 subagent_check, a) < 0)
		return -EINVAL;
	item_marks(w, v, a->n_subagents, &a->subagent_line, &a->subagent_col);
	int rc = 0;
	for (int i = 0; i < a->n_subagents; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(a->subagents[i], a->subagents[j])) {
				wd_y_err(
				    w,
				    wd_y_get(w,
					     v->data.sequence.items.start[i]),
				    "'subagents': '%s' listed twice",
				    a->subagents[i]);
				rc = -EINVAL;
			}
	return rc;
}

static int f_tools(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_agent *a = A(o);
	if (wd_y_strlist(w, v, "'tools'", &a->tools, &a->n_tools, tool_check,
			 a) < 0)
		return -EINVAL;
	int rc = 0;
	item_marks(w, v, a->n_tools, &a->tool_line, &a->tool_col);
	for (int i = 0; i < a->n_tools; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(a->tools[i], a->tools[j])) {
				wd_y_err(
				    w,
				    wd_y_get(w,
					     v->data.sequence.items.start[i]),
				    "'tools': '%s' listed twice", a->tools[i]);
				rc = -EINVAL;
			}
	return rc;
}

static int b_steps(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'bounds.max_steps'", 1, 1000, &x) < 0)
		return -EINVAL;
	A(o)->bounds.max_steps = (uint32_t)x;
	return 0;
}
static int b_tokens(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_uint(w, v, "'bounds.token_budget'", 1, 1000000000ull,
			 &A(o)->bounds.token_budget);
}
static int b_wall(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'bounds.wall_clock_s'", 1, 7 * 86400, &x) < 0)
		return -EINVAL;
	A(o)->bounds.wall_clock_s = (uint32_t)x;
	return 0;
}
static int b_cost(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_double(w, v, "'bounds.cost_cap_usd'", 0, 1e6,
			   &A(o)->bounds.cost_cap_usd);
}
static int b_ttl(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'bounds.approval_ttl_s'", 1, 30 * 86400, &x) < 0)
		return -EINVAL;
	A(o)->bounds.approval_ttl_s = (uint32_t)x;
	return 0;
}

static int f_bounds(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"max_steps", b_steps, true},     {"token_budget", b_tokens, true},
	    {"wall_clock_s", b_wall, true},   {"cost_cap_usd", b_cost, true},
	    {"approval_ttl_s", b_ttl, false},
	};
	return wd_y_map(w, v, "'bounds'", keys, WD_ARRAY_SIZE(keys), o);
}

static int c_budget(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_uint(w, v, "'context.budget_tokens'", 256, 10000000,
			 &A(o)->context.budget_tokens);
}
static int c_strategy(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"sliding_window", "summarize",
					    "externalize"};
	int i;
	if (wd_y_enum(w, v, "'context.strategy'", words, 3, &i) < 0)
		return -EINVAL;
	if (i != WD_CTX_SLIDING_WINDOW) {
		/* runtime/context.c fits every conversation one way (older
		 * tool results to the trace, then the oldest turns dropped):
		 * accepting another word would be a setting that does
		 * nothing */
		wd_y_err(w, v,
			 "'context.strategy': %s is not built; use "
			 "sliding_window (older tool results move to the "
			 "run's trace, then the oldest turns are dropped)",
			 words[i]);
		return -EINVAL;
	}
	A(o)->context.strategy = (enum wd_context_strategy)i;
	return 0;
}
static int f_context(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"budget_tokens", c_budget, false},
	    {"strategy", c_strategy, false},
	};
	return wd_y_map(w, v, "'context'", keys, WD_ARRAY_SIZE(keys), o);
}

static int t_payloads(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"full", "hash_only"};
	int i;
	if (wd_y_enum(w, v, "'trace.payloads'", words, 2, &i) < 0)
		return -EINVAL;
	A(o)->trace.payloads = (enum wd_trace_payloads)i;
	return 0;
}
static int t_retention(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'trace.retention_days'", 1, 36500, &x) < 0)
		return -EINVAL;
	A(o)->trace.retention_days = (uint32_t)x;
	return 0;
}
static int t_unrecorded(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"refuse", "allow"};
	int i;
	if (wd_y_enum(w, v, "'trace.unrecorded_read_only'", words, 2, &i) < 0)
		return -EINVAL;
	A(o)->trace.unrecorded_read_only = (enum wd_trace_unrecorded)i;
	return 0;
}
static int f_trace(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"payloads", t_payloads, false},
	    {"retention_days", t_retention, false},
	    {"unrecorded_read_only", t_unrecorded, false},
	};
	return wd_y_map(w, v, "'trace'", keys, WD_ARRAY_SIZE(keys), o);
}

static int f_temperature(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	double d;
	/* 0 is a valid temperature: range check by hand */
	if (wd_y_double(w, v, "'temperature'", -1e300, 1e300, &d) < 0)
		return -EINVAL;
	if (d < 0 || d > 2) {
		wd_y_err(w, v, "'temperature' must be between 0 and 2");
		return -EINVAL;
	}
	A(o)->temperature = d;
	A(o)->temperature_line = (int)v->start_mark.line + 1;
	A(o)->temperature_col = (int)v->start_mark.column + 1;
	return 0;
}

/* Fleet (fleet/fleet.h): a run whose node is lost is interrupted (never,
 * the default) or, if_read_only, queued again and run from its task on
 * another node -- only for agents that can do nothing twice
 * (wd_agents_check_resume). */
static int f_resume(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"never", "if_read_only"};
	int i;
	if (wd_y_enum(w, v, "'resume'", words, 2, &i) < 0)
		return -EINVAL;
	A(o)->resume_if_read_only = i == 1;
	A(o)->resume_line = (int)v->start_mark.line + 1;
	A(o)->resume_col = (int)v->start_mark.column + 1;
	return 0;
}
/* placement: {label: value}: each pair a node label as --fleet-label
 * takes it (fleet/fleet.h wd_fleet_label_check). */
static int f_placement(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	if (v->type != YAML_MAPPING_NODE || !v->data.mapping.pairs.top ||
	    v->data.mapping.pairs.top == v->data.mapping.pairs.start) {
		wd_y_err(w, v,
			 "'placement' must be a non-empty mapping of node "
			 "labels {key: value}");
		return -EINVAL;
	}
	json_t *m = json_object();
	int rc = 0;
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
	     p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *k = wd_y_get(w, p->key),
			    *x = wd_y_get(w, p->value);
		const char *ks = k ? wd_y_scalar(k) : NULL;
		const char *xs = x ? wd_y_scalar(x) : NULL;
		struct wd_err e = {0};
		cleanup_free char *kv =
		    wd_asprintf("%s=%s", ks ? ks : "", xs ? xs : "");
		if (!ks || !xs || json_object_size(m) >= WD_FLEET_LABELS_MAX ||
		    json_object_get(m, ks) || wd_fleet_label_check(kv, &e)) {
			wd_y_err(w, k ? k : v, "'placement': %s",
				 !ks || !xs ? "keys and values are words"
				 : json_object_get(m, ks)
				     ? "a label given twice"
				 : e.msg[0] ? e.msg
					    : "too many labels");
			rc = -EINVAL;
			break;
		}
		json_object_set_new(m, ks, json_string(xs));
	}
	if (!rc) {
		free(A(o)->placement);
		A(o)->placement = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
	}
	json_decref(m);
	return rc;
}

static const struct wd_y_key agent_keys[] = {
    {"name", f_name, true},
    {"description", f_description, false},
    {"team", f_team, true},
    {"model", f_model, true},
    {"system_prompt", f_system_prompt, true},
    {"tools", f_tools, true},
    {"subagents", f_subagents, false},
    {"bounds", f_bounds, true},
    {"context", f_context, false},
    {"trace", f_trace, false},
    {"temperature", f_temperature, false},
    {"resume", f_resume, false},
    {"placement", f_placement, false},
};

struct load_state {
	const char *file;
	struct wd_agent **v;
	int n;
};

static void load_doc(struct wd_ywalk *w, yaml_node_t *root, void *arg)
{
	struct load_state *st = arg;
	struct wd_agent *a = wd_calloc(1, sizeof(*a));
	a->source = wd_strdup(st->file);
	a->line = (int)root->start_mark.line + 1;
	a->context.budget_tokens = WD_AGENT_DEFAULT_CONTEXT_TOKENS;
	a->context.strategy = WD_CTX_SLIDING_WINDOW;
	a->trace.payloads = WD_TRACE_FULL;
	a->trace.retention_days = WD_AGENT_DEFAULT_RETENTION_DAYS;
	a->trace.unrecorded_read_only = WD_TRACE_UNRECORDED_REFUSE;
	a->bounds.approval_ttl_s = WD_AGENT_DEFAULT_APPROVAL_TTL_S;
	a->temperature = -1;
	int errs = w->nerr;
	wd_y_map(w, root, "agent", agent_keys, WD_ARRAY_SIZE(agent_keys), a);
	if (a->name && w->nerr == errs)
		for (int i = 0; i < st->n; i++)
			if (!strcmp(st->v[i]->name, a->name))
				wd_y_err(w, root,
					 "duplicate agent name '%s' (also at "
					 "line %d)",
					 a->name, st->v[i]->line);
	if (w->nerr != errs) {
		wd_agent_free(a);
		return;
	}
	if (!a->tools)
		a->tools = wd_calloc(1, sizeof(char *));
	if (!a->tool_line) {
		a->tool_line = wd_calloc(1, sizeof(int));
		a->tool_col = wd_calloc(1, sizeof(int));
	}
	if (!a->subagents)
		a->subagents = wd_calloc(1, sizeof(char *));
	if (!a->subagent_line) {
		a->subagent_line = wd_calloc(1, sizeof(int));
		a->subagent_col = wd_calloc(1, sizeof(int));
	}
	if (!a->description)
		a->description = wd_strdup("");
	st->v = wd_realloc(st->v, (size_t)(st->n + 1) * sizeof(*st->v));
	st->v[st->n++] = a;
}

int wd_agent_load_all_str(const char *name, const char *text, size_t len,
			  struct wd_agent ***out, int *n, struct wd_diag *diag)
{
	struct load_state st = {.file = name ? name : "<input>"};
	*out = NULL;
	*n = 0;
	if (wd_y_load_docs(st.file, text, len, "no agent definition in file",
			   diag, load_doc, &st) < 0) {
		wd_agent_free_all(st.v, st.n);
		return -EINVAL;
	}
	*out = st.v;
	*n = st.n;
	return 0;
}

int wd_agent_load_str(const char *name, const char *text, size_t len,
		      struct wd_agent **out, struct wd_diag *diag)
{
	struct wd_agent **v;
	int n;
	*out = NULL;
	int rc = wd_agent_load_all_str(name, text, len, &v, &n, diag);
	if (rc < 0)
		return rc;
	*out = v[0];
	for (int i = 1; i < n; i++)
		wd_agent_free(v[i]);
	free(v);
	return 0;
}

int wd_agent_load_file(const char *path, struct wd_agent **out,
		       struct wd_diag *diag)
{
	char *text;
	size_t len;
	*out = NULL;
	int rc = wd_y_read_path(path, &text, &len, diag);
	if (rc < 0)
		return rc;
	rc = wd_agent_load_str(path, text, len, out, diag);
	free(text);
	return rc;
}

void wd_agent_free(struct wd_agent *a)
{
	if (!a)
		return;
	free(a->source);
	free(a->name);
	free(a->description);
	free(a->team);
	free(a->model);
	free(a->system_prompt);
	free(a->placement);
	wd_y_strv_free(a->tools, a->n_tools);
	free(a->tool_line);
	free(a->tool_col);
	wd_y_strv_free(a->subagents, a->n_subagents);
	free(a->subagent_line);
	free(a->subagent_col);
	free(a);
}

void wd_agent_free_all(struct wd_agent **v, int n)
{
	for (int i = 0; i < n; i++)
		wd_agent_free(v[i]);
	free(v);
}

bool wd_agent_has_tool(const struct wd_agent *a, const char *tool)
{
	for (int i = 0; i < a->n_tools; i++)
		if (!strcmp(a->tools[i], tool))
			return true;
	return false;
}

const char *wd_context_strategy_name(enum wd_context_strategy s)
{
	switch (s) {
	case WD_CTX_SLIDING_WINDOW:
		return "sliding_window";
	case WD_CTX_SUMMARIZE:
		return "summarize";
	case WD_CTX_EXTERNALIZE:
		return "externalize";
	}
	return "?";
}

/* ---- sub-agent graph ---- */

static int agent_index(struct wd_agent *const *v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (v[i] && v[i]->name && !strcmp(v[i]->name, name))
			return i;
	return -1;
}

/* Longest delegation chain below agent i (0 = no sub-agents), by DFS with
 * colours; a back edge is a cycle, reported once at the entry closing
 * it. depth[] caches finished agents (-1 = unknown). */
struct graph {
	struct wd_agent *const *v;
	int n;
	char *colour; /* 0 white, 1 on the path, 2 done */
	int *depth;
	int *path; /* agent indices on the current path */
	int plen;
	struct wd_diag *diag;
	int problems;
};

static int walk(struct graph *g, int i)
{
	if (g->colour[i] == 2)
		return g->depth[i];
	g->colour[i] = 1;
	g->path[g->plen++] = i;
	const struct wd_agent *a = g->v[i];
	int best = 0;
	for (int k = 0; k < a->n_subagents; k++) {
		int j = agent_index(g->v, g->n, a->subagents[k]);
		if (j < 0 || j == i)
			continue; /* reported by the caller */
		if (g->colour[j] == 1) {
			/* the cycle: from j along the path back to j */
			struct wd_buf cyc = {0};
			int from = 0;
			while (g->path[from] != j)
				from++;
			for (int p = from; p < g->plen; p++)
				wd_buf_printf(&cyc, "%s -> ",
					      g->v[g->path[p]]->name);
			wd_buf_printf(&cyc, "%s", g->v[j]->name);
			wd_diag_add(g->diag, a->source, a->subagent_line[k],
				    a->subagent_col[k],
				    "agent '%s': sub-agent '%s' makes a cycle "
				    "(%s)",
				    a->name, a->subagents[k], cyc.data);
			wd_buf_free(&cyc);
			g->problems++;
			continue;
		}
		int d = walk(g, j) + 1;
		if (d > best)
			best = d;
	}
	g->plen--;
	g->colour[i] = 2;
	g->depth[i] = best;
	return best;
}

int wd_agents_check_resume(struct wd_agent *const *v, int n,
			   struct wd_manifest *const *tools, int n_tools,
			   struct wd_diag *diag)
{
	int problems = 0;
	for (int i = 0; i < n; i++) {
		const struct wd_agent *a = v[i];
		if (!a->resume_if_read_only)
			continue;
		if (a->n_subagents) {
			wd_diag_add(diag, a->source, a->resume_line,
				    a->resume_col,
				    "agent '%s': 'resume: if_read_only' with "
				    "sub-agents is not built (their runs are "
				    "not run again)",
				    a->name);
			problems++;
		}
		for (int k = 0; k < a->n_tools; k++)
			for (int t = 0; t < n_tools; t++) {
				if (strcmp(tools[t]->name, a->tools[k]) ||
				    tools[t]->side_effects == WD_SE_NONE)
					continue;
				wd_diag_add(
				    diag, a->source, a->resume_line,
				    a->resume_col,
				    "agent '%s': 'resume: if_read_only' but "
				    "tool '%s' has side_effects: %s: running "
				    "the task again could do it twice",
				    a->name, a->tools[k],
				    wd_side_effects_words[tools[t]
							      ->side_effects]);
				problems++;
			}
	}
	return problems;
}

int wd_agents_check_subagents(struct wd_agent *const *v, int n,
			      struct wd_diag *diag)
{
	struct graph g = {.v = v, .n = n, .diag = diag};
	size_t plen = strlen(WD_SUBAGENT_TOOL_PREFIX);
	for (int i = 0; i < n; i++) {
		const struct wd_agent *a = v[i];
		for (int k = 0; k < a->n_subagents; k++) {
			const char *s = a->subagents[k];
			const char *why = NULL;
			if (!strcmp(s, a->name))
				why = "an agent cannot be its own sub-agent";
			else if (agent_index(v, n, s) < 0)
				why = "no agent of that name in the policy";
			else if (plen + strlen(s) > 64)
				why = "the sub-agent's tool name would be "
				      "longer than 64 characters";
			else if (v[agent_index(v, n, s)]->placement)
				/* its runs are the parent's steps */
				why =
				    "the sub-agent has a placement, but a "
				    "sub-agent runs on its parent's node: "
				    "drop it or make the agent top-level only";
			else if (a->trace.payloads == WD_TRACE_HASH_ONLY &&
				 v[agent_index(v, n, s)]->trace.payloads !=
				     WD_TRACE_HASH_ONLY)
				/* its task comes from this agent's
				 * conversation, its answer goes back into it */
				why =
				    "this agent keeps hashes only "
				    "(trace.payloads: hash_only) and the "
				    "sub-agent keeps full payloads: its trace "
				    "would hold what this agent's does not; "
				    "give it hash_only too";
			if (why) {
				wd_diag_add(diag, a->source,
					    a->subagent_line[k],
					    a->subagent_col[k],
					    "agent '%s': sub-agent '%s': %s",
					    a->name, s, why);
				g.problems++;
			}
		}
	}
	g.colour = wd_calloc((size_t)n + 1, 1);
	g.depth = wd_calloc((size_t)n + 1, sizeof(int));
	g.path = wd_calloc((size_t)n + 1, sizeof(int));
	/* roots in name order: the same policy reports the same cycle
	 * whatever order its files were read in */
	int *order = wd_calloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(v[order[j - 1]]->name,
						v[order[j]]->name) > 0;
		     j--) {
			int x = order[j];
			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	for (int i = 0; i < n; i++)
		if (!g.colour[order[i]])
			walk(&g, order[i]);
	free(order);
	/* depth: a chain of more than WD_SUBAGENT_MAX_DEPTH delegations */
	for (int i = 0; i < n; i++) {
		const struct wd_agent *a = v[i];
		for (int k = 0; k < a->n_subagents; k++) {
			int j = agent_index(v, n, a->subagents[k]);
			if (j < 0 || j == i)
				continue;
			if (g.depth[j] + 1 > WD_SUBAGENT_MAX_DEPTH) {
				wd_diag_add(
				    diag, a->source, a->subagent_line[k],
				    a->subagent_col[k],
				    "agent '%s': sub-agent '%s' starts "
				    "a delegation chain %d deep (at "
				    "most %d)",
				    a->name, a->subagents[k], g.depth[j] + 1,
				    WD_SUBAGENT_MAX_DEPTH);
				g.problems++;
			}
		}
	}
	free(g.colour);
	free(g.depth);
	free(g.path);
	return g.problems;
}
