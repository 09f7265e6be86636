/* A policy snapshot: everything loaded from policy/ at one time (tools,
 * agents, users, gateway), immutable and reference counted. A reload builds
 * a new one and swaps it in; a run holds the snapshot it started with. */
#ifndef WD_PSET_H
#define WD_PSET_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/util.h"
#include "policy/manifest.h"

struct wd_gateway;

struct wd_agent_def {
	char *name, *team, *model, *system_prompt;
	char *description; /* "" when absent */
	char **tools;
	int n_tools;
	char **
	    subagents; /* agent names it may delegate to (runtime/subagent.c) */
	int n_subagents;
	int max_steps;
	long long token_budget;
	double wall_clock_s;
	double cost_cap_usd;
	long long context_budget_tokens; /* 0 = no fitting */
	char strategy[32];		 /* "sliding_window" ... */
	bool hash_only;			 /* trace.payloads: hash_only */
	bool unrecorded_read_only;	 /* trace.unrecorded_read_only: allow */
	int retention_days;
	unsigned approval_ttl_s;
	double temperature; /* < 0 = provider default */
	char *placement;    /* policy/agent.h; NULL = any node */
	bool resume;	    /* resume: if_read_only */
	/* the text of the file the definition came from (a run's run_start
	 * names it by sha256, replay parses it back) */
	char *def_text;
};

struct wd_pset {
	int refs;
	char *dir;
	struct wd_manifest **tools;
	char **tool_texts; /* per tool: the text of its file (see def_text) */
	int n_tools;
	struct wd_agent_def *agents;
	int n_agents;
	struct wd_gateway *gw;
	void *users; /* policy/users.h object */
	/* a replay's set (runtime/replay_defs.c): agents and tools of its
	 * own, users and gateway borrowed from `base`, which it holds */
	struct wd_pset *base;
};

/* Load policy_dir/{tools,agents}/ *.yaml, users.yaml, gateway.yaml.
 * -EINVAL with every problem in err on a bad file (nothing is loaded). */
int wd_pset_load(const char *dir, struct wd_pset **out, struct wd_err *err);
struct wd_pset *wd_pset_ref(struct wd_pset *p);
void wd_pset_unref(struct wd_pset *p);

const struct wd_manifest *wd_pset_tool(const struct wd_pset *p,
				       const char *name);
const struct wd_agent_def *wd_pset_agent(const struct wd_pset *p,
					 const char *name);
/* The uid's scope grants from users.yaml (NULL-terminated copies, free
 * with wd_pset_strv_free); none for a uid not listed. */
char **wd_pset_user_scopes(const struct wd_pset *p, uid_t uid, int *n);
/* The uid's name in users.yaml, NULL if not listed. */
const char *wd_pset_user_name(const struct wd_pset *p, uid_t uid);
/* May the uid run agents (listed in users.yaml)? Sets why when not. */
bool wd_pset_may_run(const struct wd_pset *p, uid_t uid,
		     const struct wd_agent_def *a, char *why, size_t len);
/* Is the uid an approver (users.yaml approvers)? */
bool wd_pset_is_approver(const struct wd_pset *p, uid_t uid);
void wd_pset_strv_free(char **v, int n);
/* A definition's runtime form (copies; def_text stays NULL); free with
 * wd_agent_def_free. */
struct wd_agent;
void wd_agent_def_from(struct wd_agent_def *d, const struct wd_agent *a);
void wd_agent_def_free(struct wd_agent_def *d);

#endif
