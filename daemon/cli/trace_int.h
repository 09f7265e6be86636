/* Shared by the `warden trace` files (trace.c: the verb, ls/show/payload/
 * grep/verify/...; trace_html.c, trace_diff.c, trace_failures.c): the
 * options, JSON accessors, and where the records come from. */
#ifndef WD_CLI_TRACE_INT_H
#define WD_CLI_TRACE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/util.h"
#include "trace/trace.h"

struct trace_opts {
	const char *state, *agent, *team, *user, *tool, *status;
	const char *prompt_hash, *result_hash, *otlp, *type;
	const char *out;    /* html/diff -o FILE */
	const char *socket; /* --socket */
	uint64_t since_ns, now_ns;
	unsigned metadata_days;
	bool json;
	bool html;	  /* diff --html */
	bool policy;	  /* payload --policy: the run's recorded definitions */
	bool state_given; /* --state or $WARDEN_STATE: read the store */
	uint32_t given;	  /* the options given: 1 << opt_bit() */
	int argc;	  /* positional args after options */
	char **argv;
};

/* Where `warden trace` reads: the store itself (--state, root on the
 * node) or wardend, which authorises the caller per run and records every
 * payload read (DESIGN §4). Same shapes either way (trace.h). */
struct tsrc {
	struct wd_trace *t; /* direct, or NULL: through wardend at sock */
	const char *sock;
};
int ts_runs(struct tsrc *s, const struct wd_trace_query *q, json_t **out,
	    struct wd_err *err);
int ts_records(struct tsrc *s, const char *run, json_t **out,
	       struct wd_err *err);
int ts_payloads(struct tsrc *s, const char *run, int64_t step, const char *type,
		json_t **out, struct wd_err *err);
int ts_grep(struct tsrc *s, const struct wd_trace_query *q, json_t **out,
	    struct wd_err *err);

const char *ts_js(json_t *o, const char *k);		     /* "" if absent */
const char *ts_js2(json_t *o, const char *a, const char *b); /* a, else b */
double ts_num(json_t *o, const char *k); /* number or numeric string */
double ts_num2(json_t *o, const char *a, const char *b);
/* "2024-05-01[T12:00:00]", "@EPOCH", "7d"/"12h"/"30m"; 0 when bad. */
uint64_t ts_parse_time(const char *s);

/* How a replay (its index row: status, replay_converged,
 * replay_diverged_at) ended: "converged", "diverged at step N",
 * "(running)", or its status. Allocated. */
char *trace_replay_outcome(json_t *run_row);

/* The subcommands in their own files. */
int trace_html_cmd(struct tsrc *s, struct trace_opts *o);
int trace_diff_cmd(struct tsrc *s, struct trace_opts *o);
int trace_failures_cmd(struct tsrc *s, struct trace_opts *o);
/* The HTML page of one run (its records) on f: 0 or -EIO. */
int trace_html_page(struct tsrc *s, const char *run_id, json_t *recs, FILE *f);

/* -o FILE (stdout when NULL or "-"): written to a new 0600 file beside
 * FILE, renamed over it by ts_out_close(ok) (trace_src.c says why). */
struct ts_out {
	FILE *f;
	const char *path;
	char *tmp;
};
/* 0, or -errno with a message on stderr. */
int ts_out_open(const char *verb, const char *path, struct ts_out *o);
/* Flush and (ok, a file) put it in place, else drop it: 0 or -errno. */
int ts_out_close(struct ts_out *o, bool ok);

#endif
