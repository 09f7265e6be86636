/* Agent definition: the parsed form of a file in policy/agents/
 * (DESIGN.md §4, seed 000 step 5). Parsed with the same strictness as tool
 * manifests: unknown/duplicate keys and wrong types are errors reported as
 * "file:line:col: message" in a struct wd_diag.
 *
 *   name: analyst
 *   team: data
 *   model: default                 # alias in policy/gateway.yaml
 *   system_prompt: "You are ..."
 *   tools: [run_python, fetch_url]
 *   subagents: [summarizer]        # agents it may delegate to (optional)
 *   bounds: {max_steps: 30, token_budget: 200000, wall_clock_s: 300,
 *            cost_cap_usd: 2.0}
 *   context: {budget_tokens: 32000, strategy: sliding_window}
 *   resume: never                  # fleet: a lost node's run is not run
 *                                  # again; if_read_only: run again from
 *                                  # its task elsewhere (every tool
 *                                  # side_effects: none, no sub-agents)
 *   placement: {gpu: "yes"}        # fleet: only on nodes with these labels
 *   trace: {payloads: full, retention_days: 30,
 *           unrecorded_read_only: refuse}
 *
 * trace.unrecorded_read_only (issue 5, fail closed): when the trace store
 * cannot write (disk full, I/O error), `refuse` (the default) starts no tool
 * at all: the run fails with the store's error before its next tool runs
 * (an unrecorded model_call fails it too). `allow` lets tools with
 * `side_effects: none` run unrecorded (a warning in the log); a tool with
 * side effects is refused and fails the run either way.
 *
 * All four bounds are required: a step cap alone does not bound cost
 * (context grows each step), so an agent missing any of them is refused.
 *
 * Sub-agents: each name in `subagents` is offered to the model as a tool
 * named WD_SUBAGENT_TOOL_PREFIX + name (args {task: string}); a call starts
 * a child run of that agent for the same user, bounded by the minimum of
 * its own bounds and the caller's remaining ones (runtime/subagent.c).
 * Names must be agents of the same policy, the delegation graph must have
 * no cycle and no chain deeper than WD_SUBAGENT_MAX_DEPTH
 * (wd_agents_check_subagents, run at policy load and by `policy check`).
 */
#ifndef WD_AGENT_H
#define WD_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/manifest.h" /* struct wd_diag */

enum wd_context_strategy {
	WD_CTX_SLIDING_WINDOW, /* keep the newest steps that fit */
	WD_CTX_SUMMARIZE,      /* fold older steps into a summary */
	WD_CTX_EXTERNALIZE,    /* keep tool results by reference only */
};

enum wd_trace_payloads {
	WD_TRACE_FULL,	    /* prompts and results stored as blobs */
	WD_TRACE_HASH_ONLY, /* only sha256 of payloads */
};

enum wd_trace_unrecorded {
	WD_TRACE_UNRECORDED_REFUSE, /* no tool runs unrecorded */
	WD_TRACE_UNRECORDED_ALLOW,  /* side_effects: none tools may */
};

struct wd_agent_bounds {
	uint32_t max_steps;
	uint64_t token_budget; /* input + output tokens over the run */
	uint32_t wall_clock_s;
	double cost_cap_usd;
	uint32_t approval_ttl_s; /* a run suspended on approval fails after
				  * this long; default 3600 */
};

struct wd_agent {
	char *source; /* file it came from */
	char *name;   /* [a-z0-9_-]+ */
	char *description;
	char *team;  /* [a-z0-9_-]+, for attribution */
	char *model; /* gateway model alias */
	char *system_prompt;
	char **tools; /* tool names, NULL-terminated */
	int n_tools;
	struct wd_agent_bounds bounds;
	struct {
		uint64_t budget_tokens;		   /* default 32000 */
		enum wd_context_strategy strategy; /* default sliding_window */
	} context;
	struct {
		enum wd_trace_payloads payloads; /* default full */
		uint32_t retention_days;	 /* default 30 */
		/* read-only tools when the store cannot write; default
		 * refuse */
		enum wd_trace_unrecorded unrecorded_read_only;
	} trace;
	double temperature; /* < 0 = provider default (absent) */
	int line;	    /* 1-based line of the document */
	/* where each tool name and the model were written (for cross-file
	 * checks: `warden policy check`) */
	int *tool_line, *tool_col;
	int model_line, model_col;
	int temperature_line, temperature_col; /* 0 when absent */
	char **subagents; /* agent names, NULL-terminated (never NULL) */
	int n_subagents;
	int *subagent_line, *subagent_col;
	/* placement: {label: value, ...}: the fleet runs this agent's
	 * top-level runs only on nodes with all these labels (wardend
	 * --fleet-label); compact JSON, keys sorted; NULL when absent */
	char *placement;
	/* resume: if_read_only (wd_agents_check_resume): a fleet run whose
	 * node is lost is queued again and run from its task on another
	 * node; where it was written */
	bool resume_if_read_only;
	int resume_line, resume_col;
};

/* The tool name a sub-agent is offered under: "agent__<name>" (providers
 * allow only [a-zA-Z0-9_-] in tool names, so no "agent:"). Tool names with
 * this prefix are reserved: an agent's `tools` may not list one. */
#define WD_SUBAGENT_TOOL_PREFIX "agent__"
/* Longest delegation chain: a top-level run is depth 0, its sub-agents'
 * runs depth 1, ... */
#define WD_SUBAGENT_MAX_DEPTH 4

#define WD_AGENT_DEFAULT_CONTEXT_TOKENS 32000
#define WD_AGENT_DEFAULT_RETENTION_DAYS 30
#define WD_AGENT_DEFAULT_APPROVAL_TTL_S 3600

/* 0, or -EINVAL with messages in diag (and *out NULL), or -errno (I/O).
 * A multi-document file yields its first agent; _all yields every one. */
int wd_agent_load_file(const char *path, struct wd_agent **out,
		       struct wd_diag *diag);
int wd_agent_load_str(const char *name, const char *text, size_t len,
		      struct wd_agent **out, struct wd_diag *diag);
int wd_agent_load_all_str(const char *name, const char *text, size_t len,
			  struct wd_agent ***out, int *n, struct wd_diag *diag);
void wd_agent_free(struct wd_agent *a);
void wd_agent_free_all(struct wd_agent **v, int n);

bool wd_agent_has_tool(const struct wd_agent *a, const char *tool);

/* Cross-definition checks of `subagents` over every agent of a policy:
 * each name is a defined agent, the agent does not list itself, no cycle,
 * no chain deeper than WD_SUBAGENT_MAX_DEPTH, and the tool name fits the
 * providers' 64 characters. Adds "file:line:col: message" diagnostics at
 * the offending list entry; returns the number of problems found. */
int wd_agents_check_subagents(struct wd_agent *const *v, int n,
			      struct wd_diag *diag);
/* resume: if_read_only only where running the task again elsewhere can
 * do nothing twice: every tool of the agent (found in tools[]) has
 * side_effects: none, and it has no sub-agents. Diagnostics at the
 * `resume` value; returns the number of problems. */
struct wd_manifest;
int wd_agents_check_resume(struct wd_agent *const *v, int n,
			   struct wd_manifest *const *tools, int n_tools,
			   struct wd_diag *diag);
const char *wd_context_strategy_name(enum wd_context_strategy s);

#endif
