#include "runtime/pset.h"

#include <dirent.h>
#include <string.h>

#include "common/log.h"
#include "gateway/gateway.h"
#include "policy/agent.h"
#include "policy/gateway_config.h"
#include "policy/users.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.yaml / *.yml / *.json files of a directory, sorted (a missing
 * directory is an empty list). */
static char **yaml_files(const char *dir, int *n)
{
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char **v = NULL;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *dot = strrchr(de->d_name, '.');
		if (de->d_name[0] == '.' || !dot ||
		    (strcmp(dot, ".yaml") && strcmp(dot, ".yml") &&
		     strcmp(dot, ".json")))
			continue;
		v = wd_realloc(v, (size_t)(*n + 1) * sizeof(char *));
		v[(*n)++] = wd_asprintf("%s/%s", dir, de->d_name);
	}
	closedir(d);
	if (*n)
		qsort(v, (size_t)*n, sizeof(char *), cmp_str);
	return v;
}

static void diag_into(struct wd_diag *dg, struct wd_buf *msg)
{
	for (int i = 0; i < dg->n; i++)
		wd_buf_printf(msg, "%s\n", dg->msgs[i]);
	if (dg->dropped)
		wd_buf_printf(msg, "(%d more)\n", dg->dropped);
}

static char **strv_dup(char **v, int n)
{
	char **o = wd_calloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		o[i] = wd_strdup(v[i]);
	return o;
}

void wd_agent_def_from(struct wd_agent_def *d, const struct wd_agent *a)
{
	d->name = wd_strdup(a->name);
	d->team = wd_strdup(a->team);
	d->description = wd_strdup(a->description ? a->description : "");
	d->model = wd_strdup(a->model);
	d->system_prompt = wd_strdup(a->system_prompt ? a->system_prompt : "");
	d->tools = strv_dup(a->tools, a->n_tools);
	d->n_tools = a->n_tools;
	d->subagents = strv_dup(a->subagents, a->n_subagents);
	d->n_subagents = a->n_subagents;
	d->placement = a->placement ? wd_strdup(a->placement) : NULL;
	d->resume = a->resume_if_read_only;
	d->max_steps = (int)a->bounds.max_steps;
	d->token_budget = (long long)a->bounds.token_budget;
	d->wall_clock_s = a->bounds.wall_clock_s;
	d->cost_cap_usd = a->bounds.cost_cap_usd;
	d->approval_ttl_s = a->bounds.approval_ttl_s
				? a->bounds.approval_ttl_s
				: WD_AGENT_DEFAULT_APPROVAL_TTL_S;
	d->context_budget_tokens = (long long)a->context.budget_tokens;
	snprintf(d->strategy, sizeof(d->strategy), "%s",
		 wd_context_strategy_name(a->context.strategy));
	d->hash_only = a->trace.payloads == WD_TRACE_HASH_ONLY;
	d->retention_days = (int)a->trace.retention_days;
	d->unrecorded_read_only =
	    a->trace.unrecorded_read_only == WD_TRACE_UNRECORDED_ALLOW;
	d->temperature = a->temperature;
}

void wd_agent_def_free(struct wd_agent_def *d)
{
	free(d->name);
	free(d->team);
	free(d->description);
	free(d->model);
	free(d->system_prompt);
	wd_pset_strv_free(d->tools, d->n_tools);
	wd_pset_strv_free(d->subagents, d->n_subagents);
	free(d->placement);
	free(d->def_text);
}

static void pset_free(struct wd_pset *p)
{
	wd_manifest_free_all(p->tools, p->n_tools);
	wd_pset_strv_free(p->tool_texts, p->n_tools);
	for (int i = 0; i < p->n_agents; i++)
		wd_agent_def_free(&p->agents[i]);
	free(p->agents);
	wd_gateway_unref(p->gw);
	if (p->base) /* borrowed users */
		wd_pset_unref(p->base);
	else
		wd_users_free(p->users);
	free(p->dir);
	free(p);
}

int wd_pset_load(const char *dir, struct wd_pset **out, struct wd_err *err)
{
	struct wd_pset *p = wd_calloc(1, sizeof(*p));
	struct wd_buf msg = {0};
	struct wd_diag dg = {0};
	int n, rc;
	p->refs = 1;
	p->dir = wd_strdup(dir);

	cleanup_free char *tdir = wd_asprintf("%s/tools", dir);
	char **files = yaml_files(tdir, &n);
	for (int i = 0; i < n; i++) {
		struct wd_manifest **v = NULL;
		int k = 0;
		/* the text is kept: a run records exactly what it ran under */
		char *mtext = NULL;
		size_t mlen = 0;
		if (wd_read_file(files[i], &mtext, &mlen)
			? wd_manifest_load_all(files[i], &v, &k, &dg)
			: wd_manifest_load_all_str(files[i], mtext, mlen, &v,
						   &k, &dg)) {
			diag_into(&dg, &msg);
			wd_diag_free(&dg);
			memset(&dg, 0, sizeof(dg));
		}
		for (int j = 0; j < k; j++) {
			if (wd_pset_tool(p, v[j]->name)) {
				wd_buf_printf(
				    &msg, "%s: tool '%s' is defined twice\n",
				    files[i], v[j]->name);
				wd_manifest_free(v[j]);
				continue;
			}
			p->tools =
			    wd_realloc(p->tools, (size_t)(p->n_tools + 1) *
						     sizeof(*p->tools));
			p->tool_texts =
			    wd_realloc(p->tool_texts, (size_t)(p->n_tools + 2) *
							  sizeof(char *));
			p->tool_texts[p->n_tools] =
			    wd_strdup(mtext ? mtext : "");
			p->tool_texts[p->n_tools + 1] = NULL;
			p->tools[p->n_tools++] = v[j];
		}
		free(mtext);
		free(v);
		free(files[i]);
	}
	free(files);

	cleanup_free char *adir = wd_asprintf("%s/agents", dir);
	files = yaml_files(adir, &n);
	/* every definition, kept until the cross-definition checks ran */
	struct wd_agent **all = NULL;
	int n_all = 0;
	for (int i = 0; i < n; i++) {
		char *text = NULL;
		size_t len = 0;
		struct wd_agent **v = NULL;
		int k = 0;
		if ((rc = wd_read_file(files[i], &text, &len))) {
			wd_buf_printf(&msg, "%s: cannot read: %s\n", files[i],
				      strerror(-rc));
		} else if (wd_agent_load_all_str(files[i], text, len, &v, &k,
						 &dg)) {
			diag_into(&dg, &msg);
			wd_diag_free(&dg);
			memset(&dg, 0, sizeof(dg));
		}
		for (int j = 0; j < k; j++) {
			if (wd_pset_agent(p, v[j]->name)) {
				wd_buf_printf(&msg,
					      "%s: agent '%s' is defined "
					      "twice\n",
					      files[i], v[j]->name);
				wd_agent_free(v[j]);
				continue;
			}
			p->agents =
			    wd_realloc(p->agents, (size_t)(p->n_agents + 1) *
						      sizeof(*p->agents));
			memset(&p->agents[p->n_agents], 0, sizeof(*p->agents));
			wd_agent_def_from(&p->agents[p->n_agents], v[j]);
			p->agents[p->n_agents++].def_text =
			    wd_strndup(text, len);
			all =
			    wd_realloc(all, (size_t)(n_all + 1) * sizeof(*all));
			all[n_all++] = v[j];
		}
		free(text);
		free(v);
		free(files[i]);
	}
	free(files);
	/* sub-agents: defined, no cycle, bounded depth; resume only where
	 * nothing can happen twice */
	if (wd_agents_check_subagents(all, n_all, &dg) +
	    wd_agents_check_resume(all, n_all, p->tools, p->n_tools, &dg)) {
		diag_into(&dg, &msg);
		wd_diag_free(&dg);
		memset(&dg, 0, sizeof(dg));
	}

	cleanup_free char *upath = wd_asprintf("%s/users.yaml", dir);
	struct wd_users *u = NULL;
	if (access(upath, F_OK) == 0) {
		if (wd_users_load_file(upath, &u, &dg)) {
			diag_into(&dg, &msg);
			wd_diag_free(&dg);
			memset(&dg, 0, sizeof(dg));
		}
	} else {
		wd_buf_printf(&msg, "%s: missing (no user may run tools)\n",
			      upath);
	}
	p->users = u;

	cleanup_free char *gpath = wd_asprintf("%s/gateway.yaml", dir);
	struct wd_err gerr = {0};
	p->gw = wd_gateway_open(gpath, &gerr);
	if (!p->gw)
		wd_buf_printf(&msg, "%s\n", gerr.msg);

	/* cross-file checks */
	for (int i = 0; p->gw && i < p->n_agents; i++) {
		const struct wd_agent_def *a = &p->agents[i];
		if (!wd_gateway_has_model(p->gw, a->model))
			wd_buf_printf(&msg,
				      "agent '%s': model '%s' is not an alias "
				      "in %s\n",
				      a->name, a->model, gpath);
		for (int t = 0; t < a->n_tools; t++)
			if (!wd_pset_tool(p, a->tools[t]))
				/* not fatal: the broker refuses calls to it
				 * at the grant check (deny by default) */
				wd_warn("agent '%s': tool '%s' has no manifest "
					"in %s; calls to it will be refused",
					a->name, a->tools[t], tdir);
	}
	/* parameters a route cannot take: a load error naming the route,
	 * not a 400 at every step that fails over to another provider */
	for (int i = 0; p->gw && i < n_all; i++) {
		char why[400];
		if (wd_route_check_params(wd_gateway_config_of(p->gw),
					  all[i]->model, all[i]->temperature,
					  why, sizeof(why)))
			wd_buf_printf(&msg, "%s:%d:%d: agent '%s': %s\n",
				      all[i]->source, all[i]->temperature_line,
				      all[i]->temperature_col, all[i]->name,
				      why);
	}
	wd_agent_free_all(all, n_all);
	if (msg.len) {
		while (msg.len && msg.data[msg.len - 1] == '\n')
			msg.data[--msg.len] = 0;
		rc = wd_err_set(err, -EINVAL, "policy %s: %s", dir, msg.data);
		wd_buf_free(&msg);
		pset_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

struct wd_pset *wd_pset_ref(struct wd_pset *p)
{
	if (p)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_ACQ_REL);
	return p;
}

void wd_pset_unref(struct wd_pset *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		pset_free(p);
}

const struct wd_manifest *wd_pset_tool(const struct wd_pset *p,
				       const char *name)
{
	for (int i = 0; i < p->n_tools; i++)
		if (!strcmp(p->tools[i]->name, name))
			return p->tools[i];
	return NULL;
}

const struct wd_agent_def *wd_pset_agent(const struct wd_pset *p,
					 const char *name)
{
	for (int i = 0; i < p->n_agents; i++)
		if (!strcmp(p->agents[i].name, name))
			return &p->agents[i];
	return NULL;
}

char **wd_pset_user_scopes(const struct wd_pset *p, uid_t uid, int *n)
{
	const char **v = NULL;
	*n = p->users ? wd_users_scopes_for_uid(p->users, uid, &v) : 0;
	if (*n < 0)
		*n = 0;
	char **o = wd_calloc((size_t)*n + 1, sizeof(char *));
	for (int i = 0; i < *n; i++)
		o[i] = wd_strdup(v[i]);
	free(v);
	return o;
}

const char *wd_pset_user_name(const struct wd_pset *p, uid_t uid)
{
	return p->users ? wd_users_name(p->users, uid) : NULL;
}

bool wd_pset_may_run(const struct wd_pset *p, uid_t uid,
		     const struct wd_agent_def *a, char *why, size_t len)
{
	/* deny by default: a uid not in users.yaml runs nothing */
	if (!p->users || !wd_users_by_uid(p->users, uid)) {
		snprintf(why, len,
			 "uid %u is not listed in %s/users.yaml; it may not "
			 "run agents",
			 (unsigned)uid, p->dir);
		return false;
	}
	return true;
}

bool wd_pset_is_approver(const struct wd_pset *p, uid_t uid)
{
	return p->users && wd_users_is_approver(p->users, uid);
}

void wd_pset_strv_free(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}
