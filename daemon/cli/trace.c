/* `warden trace ls|show|payload|verify|grep|reindex|gc|export|html|diff|
 * failures`. With --state DIR (or $WARDEN_STATE) it reads the store
 * directly, no daemon needed (root on the node); without, the reading
 * subcommands go through wardend, which answers only the runs the caller
 * may read and records every payload read (trace_src.c). */
#include "cli/cli.h"
#include "cli/trace_int.h"
#include "common/log.h"
#include "trace/otlp.h"
#include "trace/records.h"
#include "trace/trace.h"

#include <getopt.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: warden trace SUBCOMMAND [OPTIONS] [--state DIR]\n"
	       "  ls [--agent A] [--team T] [--user U] [--tool T] [--status "
	       "S] [--since TIME] [--json]\n"
	       "  show RUN [--json]        timeline: steps, model calls, "
	       "tools, denials, costs\n"
	       "  payload RUN STEP [--type T] [--json]  the step's recorded "
	       "payloads (prompts,\n"
	       "                           model responses, tool args and "
	       "results), hash checked\n"
	       "  payload RUN --policy [--json]  the definitions the run "
	       "recorded (agent,\n"
	       "                           manifests, scopes, route) by "
	       "sha256, hash checked\n"
	       "  grep --prompt-hash H | --result-hash H | --tool T [--status "
	       "S] [--json]\n"
	       "  verify [RUN...] [--json] chain, framing, blobs; exit 1 on "
	       "damage\n"
	       "  reindex                  rebuild the index from the "
	       "segments\n"
	       "  gc [--now TIME] [--metadata-days N]  drop payloads past "
	       "their run's retention\n"
	       "                           (not of failed/flagged runs) and "
	       "whole segments of\n"
	       "                           metadata older than N days "
	       "(default 395, all runs)\n"
	       "  verify|gc --fleet ...    the same for the shipped trace "
	       "(warden fleet verify|gc)\n"
	       "  export --otlp URL [RUN... | --since TIME --agent A --team T "
	       "--user U\n"
	       "                           --tool T --status S]  send spans "
	       "to an OTLP/HTTP collector\n"
	       "  html RUN [-o FILE]       the run as one self-contained HTML "
	       "page (timeline,\n"
	       "                           payloads, denials at their step, "
	       "budget chart)\n"
	       "  diff A B [--html] [--json] [-o FILE]  two runs aligned step "
	       "by step, first\n"
	       "                           divergence marked\n"
	       "  failures [--since TIME] [--agent A] [--json]  failed or "
	       "denied tool results\n"
	       "                           by (tool, result hash), failed runs "
	       "by last error\n"

	       "TIME: 2024-05-01[T12:00:00], @EPOCH, or an age like 7d, 12h, "
	       "30m\n"
	       "An option a subcommand does not read is refused, not "
	       "ignored.\n"
	       "--state DIR (or $WARDEN_STATE): read the store directly; "
	       "without it ls, show,\n"
	       "payload, grep, html, diff and failures ask wardend "
	       "(--socket PATH or\n"
	       "$WARDEN_SOCKET), which shows a run to its user, its team's "
	       "group and the\n"
	       "auditors group and records each payload read; verify, "
	       "reindex, gc and export\n"
	       "use /var/lib/warden\n");
}

/* A plain decimal, digits with an optional fraction ("1.5"): no sign,
 * blank, exponent, hex, inf or nan (strtod takes them all). The number, or
 * -1 when s is not one. */
static double plain_decimal(const char *s, const char **end)
{
	const char *p = s;
	double v = 0, scale = 1;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	if (p == s)
		return -1;
	if (*p == '.') {
		const char *f = ++p;
		for (; *p >= '0' && *p <= '9'; p++)
			v += (*p - '0') * (scale /= 10);
		if (p == f)
			return -1;
	}
	*end = p;
	return v;
}

/* 0 on failure */
uint64_t ts_parse_time(const char *s)
{
	const char *end = NULL;
	if (s[0] == '@') {
		double v = plain_decimal(s + 1, &end);
		/* past 2^64 ns (year 2554) is no time of ours */
		return v < 0 || *end || v * 1e9 >= 18e18 ? 0
							 : (uint64_t)(v * 1e9);
	}
	double v = plain_decimal(s, &end);
	if (v >= 0 && *end && !end[1]) {
		uint64_t mul = 0;
		switch (*end) {
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		}
		if (mul) {
			/* an age past the epoch is everything (computed in
			 * double: the ns of 300000d do not fit 64 bits) */
			double ago = v * (double)mul * 1e9;
			uint64_t now = wd_wall_ns();
			return ago < (double)now ? now - (uint64_t)ago : 1;
		}
	}
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p || (*p && strcmp(p, "Z"))) {
		memset(&tm, 0, sizeof(tm));
		p = strptime(s, "%Y-%m-%d", &tm);
		if (!p || *p)
			return 0;
	}
	time_t t = timegm(&tm);
	return t > 0 ? (uint64_t)t * 1000000000ull : 0;
}

static const struct option lo[] = {
    {"state", required_argument, 0, 's'},
    {"agent", required_argument, 0, 'a'},
    {"team", required_argument, 0, 'T'},
    {"user", required_argument, 0, 'u'},
    {"tool", required_argument, 0, 't'},
    {"status", required_argument, 0, 'S'},
    {"since", required_argument, 0, 'i'},
    {"now", required_argument, 0, 'n'},
    {"prompt-hash", required_argument, 0, 'p'},
    {"result-hash", required_argument, 0, 'r'},
    {"otlp", required_argument, 0, 'X'},
    {"type", required_argument, 0, 'y'},
    {"metadata-days", required_argument, 0, 'M'},
    {"json", no_argument, 0, 'j'},
    {"policy", no_argument, 0, 'P'},
    {"html", no_argument, 0, 'H'},
    {"output", required_argument, 0, 'O'},
    {"socket", required_argument, 0, 'k'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* each option's bit in trace_opts.given, by its letter ('o' is -o of
 * --output) */
static const char opt_letters[] = "saTutSinprXyMjPHOk";

static int opt_bit(int c)
{
	const char *p = strchr(opt_letters, c == 'o' ? 'O' : c);
	return c && p ? (int)(p - opt_letters) : -1;
}

static int parse(int argc, char **argv, struct trace_opts *o)
{
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
		if (opt_bit(c) >= 0)
			o->given |= 1u << opt_bit(c);
		switch (c) {
		case 's':
			o->state = optarg;
			break;
		case 'a':
			o->agent = optarg;
			break;
		case 'T':
			o->team = optarg;
			break;
		case 'u':
			o->user = optarg;
			break;
		case 't':
			o->tool = optarg;
			break;
		case 'S':
			o->status = optarg;
			break;
		case 'p':
			o->prompt_hash = optarg;
			break;
		case 'r':
			o->result_hash = optarg;
			break;
		case 'X':
			o->otlp = optarg;
			break;
		case 'y':
			o->type = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'P':
			o->policy = true;
			break;
		case 'H':
			o->html = true;
			break;
		case 'O':
		case 'o':
			o->out = optarg;
			break;
		case 'k':
			o->socket = optarg;
			break;
		case 'M': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !*optarg || !v || v > 100000) {
				fprintf(stderr,
					"warden trace: --metadata-days wants "
					"a number of days >= 1, not '%s'\n",
					optarg);
				return WD_EXIT_USAGE;
			}
			o->metadata_days = v;
			break;
		}
		case 'i':
		case 'n':
			if (!(c == 'i' ? (o->since_ns = ts_parse_time(optarg))
				       : (o->now_ns = ts_parse_time(optarg)))) {
				fprintf(stderr, "warden trace: bad time '%s'\n",
					optarg);
				return WD_EXIT_USAGE;
			}
			break;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	/* only --state reads the store straight: the reads (ls, show,
	 * payload, ...) go through wardend otherwise, so that a user who has
	 * $WARDEN_STATE set (as wardend's environment does) still sees what
	 * the daemon lets them see; $WARDEN_STATE names the store for the
	 * maintenance verbs (verify, reindex, gc) */
	o->state_given = o->state != NULL;
	if (!o->state) {
		o->state = getenv("WARDEN_STATE");
		if (!o->state || !*o->state)
			o->state = NULL;
	}
	if (!o->state)
		o->state = "/var/lib/warden";
	o->argc = argc - optind;
	o->argv = argv + optind;
	return 0;
}

static void print_json(json_t *v)
{
	wd_cli_print_json(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER, "null");
}

static const char *short_ref(const char *ref, char *buf, size_t n)
{
	if (!strncmp(ref, "sha256:", 7) && strlen(ref) > 19)
		snprintf(buf, n, "%.19s…", ref);
	else
		snprintf(buf, n, "%s", ref);
	return buf;
}

/* The runs the filter options select (ls, export). */
static struct wd_trace_query runs_query(const struct trace_opts *o)
{
	return (struct wd_trace_query){.agent = o->agent,
				       .team = o->team,
				       .user = o->user,
				       .tool = o->tool,
				       .status = o->status,
				       .since_ns = o->since_ns};
}

static int cmd_ls(struct tsrc *s, struct trace_opts *o)
{
	struct wd_trace_query q = runs_query(o);
	json_t *a;
	struct wd_err err = {0};
	if (ts_runs(s, &q, &a, &err) < 0) {
		wd_error("trace ls: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	if (o->json) {
		print_json(a);
	} else {
		/* in a fleet each run names the node it ran on */
		bool fleet = json_object_get(json_array_get(a, 0), "node");
		printf("%-24s %-16s %-10s %-10s %-10s %5s %10s %9s  %s\n",
		       "RUN", "AGENT", "TEAM", "USER", "STATUS", "STEPS",
		       "TOKENS", "COST",
		       fleet ? "STARTED                     NODE" : "STARTED");
		size_t i;
		json_t *r;
		json_array_foreach(a, i, r)
		{
			printf("%-24s %-16s %-10s %-10s %-10s %5lld %10lld "
			       "%9.4f  %s%s%s%s\n",
			       ts_js(r, "run_id"), ts_js(r, "agent"),
			       ts_js(r, "team"), ts_js(r, "user"),
			       ts_js(r, "status"),
			       (long long)ts_num(r, "steps"),
			       (long long)(ts_num(r, "input_tokens") +
					   ts_num(r, "output_tokens")),
			       ts_num(r, "cost_usd"), ts_js(r, "started"),
			       fleet ? " " : "", ts_js(r, "node"),
			       ts_num(r, "flagged") ? " flagged" : "");
		}
	}
	json_decref(a);
	return WD_EXIT_OK;
}

static void show_line(json_t *r)
{
	const char *type = ts_js(r, "type");
	char rb[64];
	const char *ts = ts_js(r, "ts");
	printf("%6lld %4lld  %-15.15s %-17s ",
	       (long long)json_integer_value(json_object_get(r, "seq")),
	       (long long)json_integer_value(json_object_get(r, "step")),
	       strlen(ts) > 11 ? ts + 11 : ts, type);
	enum wd_rec_type rt = wd_rec_type_of(type);
	if (rt == WD_REC_RUN_START) {
		json_t *tr = json_object_get(r, "trace");
		printf("agent=%s team=%s user=%s model=%s payloads=%s "
		       "retention=%lldd",
		       ts_js(r, "agent"), ts_js(r, "team"), ts_js(r, "user"),
		       ts_js2(r, "gen_ai.request.model", "model"),
		       *ts_js(tr, "payloads") ? ts_js(tr, "payloads") : "full",
		       (long long)ts_num(tr, "retention_days"));
		if (*ts_js(r, "parent_run_id"))
			printf(" parent=%s@step%lld", ts_js(r, "parent_run_id"),
			       (long long)ts_num(r, "parent_step"));
	} else if (rt == WD_REC_MODEL_CALL) {
		printf("%s in=%lld out=%lld cost=$%.4f %lldms",
		       ts_js2(r, "gen_ai.request.model", "model"),
		       (long long)ts_num2(r, "gen_ai.usage.input_tokens",
					  "input_tokens"),
		       (long long)ts_num2(r, "gen_ai.usage.output_tokens",
					  "output_tokens"),
		       ts_num(r, "cost_usd"),
		       (long long)ts_num(r, "latency_ms"));
		const char *p = ts_js2(r, "prompt_hash", "prompt_ref");
		if (*p)
			printf(" prompt=%s", short_ref(p, rb, sizeof(rb)));
	} else if (rt == WD_REC_TOOL_ATTEMPT) {
		printf("%s call=%s side_effects=%s",
		       ts_js2(r, "gen_ai.tool.name", "tool"),
		       ts_js2(r, "gen_ai.tool.call.id", "call_id"),
		       *ts_js(r, "side_effects") ? ts_js(r, "side_effects")
						 : "?");
		if (*ts_js(r, "child_run_id"))
			printf(" child=%s", ts_js(r, "child_run_id"));
	} else if (rt == WD_REC_TOOL_RESULT) {
		printf("%s %s", ts_js2(r, "gen_ai.tool.name", "tool"),
		       ts_js(r, "status"));
		if (json_object_get(r, "exit_code"))
			printf(" exit=%lld", (long long)ts_num(r, "exit_code"));
		printf(" %lldms", (long long)ts_num(r, "latency_ms"));
		const char *p = ts_js2(r, "result_hash", "result_ref");
		if (*p)
			printf(" result=%s", short_ref(p, rb, sizeof(rb)));
		if (*ts_js(r, "replay"))
			printf(" replay=%s", ts_js(r, "replay"));
		if (*ts_js(r, "child_run_id"))
			printf(" child=%s%s%s", ts_js(r, "child_run_id"),
			       *ts_js(r, "reason") ? " reason=" : "",
			       ts_js(r, "reason"));
	} else if (rt == WD_REC_DENIAL) {
		json_t *e = json_object_get(r, "event");
		printf("DENIED %s %s %s %s",
		       ts_js2(r, "gen_ai.tool.name", "tool"), ts_js(e, "kind"),
		       *ts_js(e, "syscall") ? ts_js(e, "syscall") : "",
		       ts_js(e, "target"));
		if (*ts_js(e, "source"))
			printf(" (%s)", ts_js(e, "source"));
	} else if (rt == WD_REC_BUDGET_STOP) {
		printf("bound=%s %s", ts_js(r, "bound"), ts_js(r, "reason"));
	} else if (rt == WD_REC_RUN_END) {
		printf("status=%s", ts_js(r, "status"));
		if (json_object_get(r, "cost_usd"))
			printf(" cost=$%.4f", ts_num(r, "cost_usd"));
		if (*ts_js(r, "reason"))
			printf(" reason=%s", ts_js(r, "reason"));
		json_t *tot = json_object_get(r, "total");
		if (json_array_size(json_object_get(r, "subagent_runs")))
			printf(" total: steps=%lld tokens=%lld cost=$%.4f "
			       "(with %zu sub-agent runs)",
			       (long long)ts_num(tot, "steps"),
			       (long long)(ts_num(tot, "input_tokens") +
					   ts_num(tot, "output_tokens")),
			       ts_num(tot, "cost_usd"),
			       json_array_size(
				   json_object_get(r, "subagent_runs")));
	} else if (rt == WD_REC_REPLAY_STEP) {
		printf("from the record of %s seq %lld (prompt %s)",
		       ts_js(r, "of_run_id"), (long long)ts_num(r, "of_seq"),
		       short_ref(ts_js(r, "prompt_hash"), rb, sizeof(rb)));
	} else if (rt == WD_REC_REPLAY_REFUSED) {
		printf("%s side_effects=%s: %s",
		       ts_js2(r, "gen_ai.tool.name", "tool"),
		       ts_js(r, "side_effects"), ts_js(r, "reason"));
	} else if (rt == WD_REC_REPLAY_DIVERGENCE) {
		printf("%s", ts_js(r, "message"));
	} else if (rt == WD_REC_APPROVAL_REQUEST ||
		   rt == WD_REC_APPROVAL_DECISION) {
		printf("%s %s", ts_js2(r, "gen_ai.tool.name", "tool"),
		       ts_js(r, "decision"));
	} else if (rt == WD_REC_PAYLOAD_READ) {
		printf("by %s (uid %lld, %s): %zu payload(s)",
		       ts_js(r, "reader"), (long long)ts_num(r, "uid"),
		       ts_js(r, "access"),
		       json_array_size(json_object_get(r, "read")));
	} else if (rt == WD_REC_GC) {
		printf("%zu payload blobs dropped (%s)",
		       json_array_size(json_object_get(r, "refs")),
		       ts_js(r, "reason"));
	}
	printf("\n");
}

/* The sub-agent runs a run started (tool_attempt.child_run_id), each
 * with its own timeline, indented by depth. */
static void show_children(struct tsrc *s, json_t *recs, int depth)
{
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const char *child = ts_js(r, "child_run_id");
		if (strcmp(ts_js(r, "type"), "tool_attempt") || !*child ||
		    depth > 8)
			continue;
		json_t *c = NULL;
		struct wd_err err = {0};
		printf("\n%*ssub-agent run %s (agent %s, parent step %lld)\n",
		       2 * (depth - 1), "", child, ts_js(r, "subagent"),
		       (long long)ts_num(r, "step"));
		if (ts_records(s, child, &c, &err) < 0 || !json_array_size(c)) {
			printf("%*s(no records)\n", 2 * (depth - 1), "");
			json_decref(c);
			continue;
		}
		size_t k;
		json_t *x;
		json_array_foreach(c, k, x)
		{
			printf("%*s", 2 * (depth - 1), "");
			show_line(x);
		}
		show_children(s, c, depth + 1);
		json_decref(c);
	}
}

/* Replays link both ways: a replay names its original in run_start
 * (replay_of); the original is never written to again, so its replays are
 * found in the index (runs.replay_of), never by reading other runs'
 * records: through wardend each such read is a payload read recorded in
 * that run, and there may be many thousands of them. */
static void show_replay_links(struct tsrc *s, json_t *recs, const char *id)
{
	json_t *ro = json_object_get(json_array_get(recs, 0), "replay_of");
	if (ro)
		printf("replay of %s from step %lld (determinism %s, tools "
		       "%s)\n",
		       ts_js(ro, "run_id"), (long long)ts_num(ro, "from_step"),
		       ts_js(ro, "determinism"), ts_js(ro, "tools"));
	json_t *runs = NULL;
	struct wd_err err = {0};
	if (ts_runs(s, &(struct wd_trace_query){.replay_of = id}, &runs, &err) <
	    0) {
		wd_warn("trace show: the replays of %s: %s", id, err.msg);
		return;
	}
	size_t i;
	json_t *r;
	json_array_foreach(runs, i, r)
	{
		char *out = trace_replay_outcome(r);
		printf("replayed by %s from step %lld: %s\n",
		       ts_js(r, "run_id"), (long long)ts_num(r, "replay_from"),
		       out);
		free(out);
	}
	json_decref(runs);
}

static int cmd_show(struct tsrc *s, struct trace_opts *o)
{
	if (o->argc != 1) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct wd_err err = {0};
	json_t *a;
	if (ts_records(s, o->argv[0], &a, &err) < 0) {
		wd_error("trace show: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	if (!json_array_size(a)) {
		json_decref(a);
		wd_error("trace show: no run '%s'", o->argv[0]);
		return WD_EXIT_FAIL;
	}
	if (o->json) {
		print_json(a);
		json_decref(a);
		return WD_EXIT_OK;
	}
	struct wd_trace_query q = {0};
	json_t *runs;
	if (ts_runs(s, &q, &runs, &err) == 0) {
		size_t i;
		json_t *r;
		json_array_foreach(
		    runs, i, r) if (!strcmp(ts_js(r, "run_id"), o->argv[0]))
		{
			printf("run %s  %s%s%sagent=%s team=%s user=%s "
			       "status=%s steps=%lld tokens=%lld/%lld "
			       "cost=$%.4f%s\n",
			       ts_js(r, "run_id"),
			       *ts_js(r, "node") ? "node=" : "",
			       *ts_js(r, "node") ? ts_js(r, "node") : "",
			       *ts_js(r, "node") ? " " : "", ts_js(r, "agent"),
			       ts_js(r, "team"), ts_js(r, "user"),
			       ts_js(r, "status"),
			       (long long)ts_num(r, "steps"),
			       (long long)ts_num(r, "input_tokens"),
			       (long long)ts_num(r, "output_tokens"),
			       ts_num(r, "cost_usd"),
			       ts_num(r, "flagged") ? " flagged" : "");
		}
		json_decref(runs);
	}
	show_replay_links(s, a, o->argv[0]);
	printf("%6s %4s  %-15s %-17s %s\n", "SEQ", "STEP", "TIME", "EVENT",
	       "DETAIL");
	size_t i;
	json_t *r;
	json_array_foreach(a, i, r) show_line(r);
	show_children(s, a, 1);
	json_decref(a);
	return WD_EXIT_OK;
}

static int cmd_grep(struct tsrc *s, struct trace_opts *o)
{
	if (!o->prompt_hash && !o->result_hash && !o->tool) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct wd_trace_query q = {.tool = o->tool,
				   .status = o->status,
				   .prompt_hash = o->prompt_hash,
				   .result_hash = o->result_hash,
				   .agent = o->agent,
				   .team = o->team,
				   .user = o->user,
				   .since_ns = o->since_ns};
	json_t *a;
	struct wd_err err = {0};
	if (ts_grep(s, &q, &a, &err) < 0) {
		wd_error("trace grep: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	if (o->json) {
		print_json(a);
	} else {
		size_t i;
		json_t *r;
		/* in a fleet a seq is its node's: the node is named */
		json_array_foreach(a, i, r)
		    printf("%-24s seq=%lld step=%lld %s %s %s%s%s\n",
			   ts_js(r, "run_id"), (long long)ts_num(r, "seq"),
			   (long long)ts_num(r, "step"), ts_js(r, "type"),
			   ts_js(r, "tool"), ts_js(r, "status"),
			   *ts_js(r, "node") ? " node=" : "", ts_js(r, "node"));
	}
	int rc = json_array_size(a) ? WD_EXIT_OK : WD_EXIT_FAIL;
	json_decref(a);
	return rc;
}

static int cmd_verify(struct wd_trace *t, struct trace_opts *o)
{
	json_t *p = json_array();
	int r = 0;
	/* every run named (none: the whole store), their problems together */
	for (int i = 0; i < (o->argc ? o->argc : 1); i++) {
		json_t *pi = NULL;
		struct wd_err err = {0};
		int ri =
		    wd_trace_verify(t, o->argc ? o->argv[i] : NULL, &pi, &err);
		if (ri < 0 && ri != -EBADMSG) {
			wd_error("trace verify: %s", err.msg);
			json_decref(pi);
			json_decref(p);
			return WD_EXIT_FAIL;
		}
		if (pi)
			json_array_extend(p, pi);
		json_decref(pi);
		if (ri)
			r = ri;
	}
	if (o->json) {
		json_t *out =
		    json_pack("{s:b, s:O}", "ok", r == 0, "problems", p);
		print_json(out);
		json_decref(out);
	} else if (r == 0) {
		printf("trace verify: ok\n");
	} else {
		size_t i;
		json_t *x;
		json_array_foreach(p, i, x)
		{
			printf("%s: %s", ts_js(x, "kind"), ts_js(x, "file"));
			if (json_object_get(x, "offset"))
				printf(" offset %lld",
				       (long long)ts_num(x, "offset"));
			if (json_object_get(x, "line"))
				printf(" line %lld",
				       (long long)ts_num(x, "line"));
			if (json_object_get(x, "seq"))
				printf(" seq %lld",
				       (long long)ts_num(x, "seq"));
			printf(": %s\n", ts_js(x, "message"));
		}
		printf("trace verify: %zu problem(s)\n", json_array_size(p));
	}
	json_decref(p);
	return r == 0 ? WD_EXIT_OK : WD_EXIT_FAIL;
}

/* One recorded definition: its ref and the blob's text. */
static int show_def(struct wd_trace *t, json_t *out, const char *what,
		    const char *ref, bool json)
{
	char *text = NULL;
	size_t len = 0;
	struct wd_err err = {0};
	int rc = ref ? wd_trace_get_blob(t, ref, &text, &len, &err) : -ENOENT;
	if (json) {
		json_t *o = json_pack("{s:s,s:s?}", "what", what, "ref", ref);
		json_object_set_new(
		    o, rc ? "error" : "text",
		    json_string(rc ? (ref ? err.msg : "no ref") : text));
		json_array_append_new(out, o);
	} else {
		printf("== %s %s\n", what, ref ? ref : "(none)");
		if (rc)
			printf("(not available: %s)\n",
			       ref ? err.msg : "no ref");
		else
			printf("%s%s", text,
			       len && text[len - 1] == '\n' ? "" : "\n");
	}
	free(text);
	return rc ? WD_EXIT_FAIL : WD_EXIT_OK;
}

static int cmd_payload_policy(struct tsrc *s, struct trace_opts *o)
{
	if (!s->t) {
		wd_error("trace payload --policy: reads the store: give "
			 "--state DIR (wardend does not serve recorded "
			 "definitions)");
		return WD_EXIT_FAIL;
	}
	json_t *a = NULL;
	struct wd_err err = {0};
	if (ts_records(s, o->argv[0], &a, &err) < 0 || !json_array_size(a)) {
		wd_error("trace payload: no run '%s'", o->argv[0]);
		json_decref(a);
		return WD_EXIT_FAIL;
	}
	json_t *d = json_object_get(json_array_get(a, 0), "definitions");
	if (!d) {
		wd_error("trace payload: run %s recorded no definitions",
			 o->argv[0]);
		json_decref(a);
		return WD_EXIT_FAIL;
	}
	json_t *out = json_array();
	int rc = WD_EXIT_OK;
	char what[200];
	json_t *x = json_object_get(d, "agent");
	snprintf(what, sizeof(what), "agent %s", ts_js(x, "name"));
	rc |= show_def(s->t, out, what,
		       json_string_value(json_object_get(x, "ref")), o->json);
	const char *k;
	json_object_foreach(json_object_get(d, "tools"), k, x)
	{
		snprintf(what, sizeof(what), "tool %s (side_effects %s)", k,
			 ts_js(x, "side_effects"));
		rc |= show_def(s->t, out, what,
			       json_string_value(json_object_get(x, "ref")),
			       o->json);
	}
	x = json_object_get(d, "scopes");
	snprintf(what, sizeof(what), "scopes of %s", ts_js(x, "user"));
	rc |= show_def(s->t, out, what,
		       json_string_value(json_object_get(x, "ref")), o->json);
	x = json_object_get(d, "route");
	snprintf(what, sizeof(what), "route of model %s", ts_js(x, "model"));
	rc |= show_def(s->t, out, what,
		       json_string_value(json_object_get(x, "ref")), o->json);
	if (o->json)
		print_json(out);
	json_decref(out);
	json_decref(a);
	return rc;
}

static int cmd_payload(struct tsrc *s, struct trace_opts *o)
{
	if (o->policy && (o->argc != 1 || o->type)) {
		fprintf(stderr, "warden trace payload: --policy takes RUN "
				"alone (no STEP, no --type)\n");
		return WD_EXIT_USAGE;
	}
	if (o->policy)
		return cmd_payload_policy(s, o);
	char *end = NULL;
	long long step = o->argc == 2 ? strtoll(o->argv[1], &end, 10) : -1;
	if (o->argc != 2 || !*o->argv[1] || *end || step < 0) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct wd_err err = {0};
	json_t *a;
	if (ts_payloads(s, o->argv[0], step, o->type, &a, &err) < 0) {
		wd_error("trace payload: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	int rc = WD_EXIT_OK;
	size_t i;
	json_t *p;
	json_array_foreach(a, i, p)
	{
		if (json_object_get(p, "error"))
			rc = WD_EXIT_FAIL;
		if (o->json)
			continue;
		printf("== seq %lld %s %s %s\n",
		       (long long)json_integer_value(json_object_get(p, "seq")),
		       ts_js(p, "type"), ts_js(p, "field"), ts_js(p, "ref"));
		const char *text =
		    json_string_value(json_object_get(p, "payload"));
		if (text) {
			fputs(text, stdout);
			if (*text && text[strlen(text) - 1] != '\n')
				putchar('\n');
		} else {
			printf("(not available: %s)\n", ts_js(p, "error"));
		}
	}
	if (o->json)
		print_json(a);
	else if (!json_array_size(a))
		printf("(step %lld of %s recorded no payloads)\n", step,
		       o->argv[0]);
	json_decref(a);
	return rc;
}

static int cmd_export(struct wd_trace *t, struct trace_opts *o)
{
	if (!o->otlp) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	if (o->argc &&
	    (o->given & ~(1u << opt_bit('s') | 1u << opt_bit('X')))) {
		fprintf(stderr, "warden trace export: the runs named, or the "
				"runs the filters select: not both\n");
		return WD_EXIT_USAGE;
	}
	struct wd_err err = {0};
	struct wd_otlp *x;
	struct wd_otlp_opts oo = {.endpoint = o->otlp, .queue_max = 1 << 16};
	if (wd_otlp_start(&oo, &x, &err) < 0) {
		wd_error("trace export: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	json_t *runs = NULL;
	if (!o->argc) {
		struct wd_trace_query q = runs_query(o);
		if (wd_trace_query_runs(t, &q, &runs, &err) < 0) {
			wd_otlp_stop(x);
			wd_error("trace export: %s", err.msg);
			return WD_EXIT_FAIL;
		}
	} else {
		runs = json_array();
		for (int i = 0; i < o->argc; i++)
			json_array_append_new(
			    runs, json_pack("{s:s}", "run_id", o->argv[i]));
	}
	int rc = WD_EXIT_OK;
	size_t i;
	json_t *r;
	json_array_foreach(runs, i, r)
	{
		json_t *recs;
		if (wd_trace_run_records(t, ts_js(r, "run_id"), &recs, &err) <
		    0) {
			wd_error("trace export: %s", err.msg);
			rc = WD_EXIT_FAIL;
			break;
		}
		size_t k;
		json_t *rec;
		json_array_foreach(recs, k, rec)
		{
			wd_otlp_feed(x, rec);
			/* the CLI may wait; the daemon never does */
			if (k % 1024 == 1023)
				wd_otlp_flush(x, 30000);
		}
		json_decref(recs);
	}
	json_decref(runs);
	wd_otlp_flush(x, 30000);
	struct wd_otlp_stats s;
	wd_otlp_stats(x, &s);
	wd_otlp_stop(x);
	printf("exported %llu spans (%llu failed, %llu dropped)\n",
	       (unsigned long long)s.sent, (unsigned long long)s.failed,
	       (unsigned long long)s.dropped);
	return s.failed || s.dropped ? WD_EXIT_FAIL : rc;
}

static int trace_reads(struct tsrc *s, const char *sub, struct trace_opts *o)
{
	if (!strcmp(sub, "ls"))
		return cmd_ls(s, o);
	if (!strcmp(sub, "show"))
		return cmd_show(s, o);
	if (!strcmp(sub, "grep"))
		return cmd_grep(s, o);
	if (!strcmp(sub, "payload"))
		return cmd_payload(s, o);
	if (!strcmp(sub, "html"))
		return trace_html_cmd(s, o);
	if (!strcmp(sub, "diff"))
		return trace_diff_cmd(s, o);
	return trace_failures_cmd(s, o);
}

/* What each subcommand reads: an option it would not read, or a RUN it
 * would not look at, is refused, not ignored ("trace ls RUN" listed every
 * run; "trace export --agent A" exported every agent's). */
static const struct {
	const char *sub, *opts; /* opt_letters */
	int min_args, max_args; /* -1: any number */
} subs[] = {
    {"ls", "saTutSijk", 0, 0},	    {"show", "sjk", 1, 1},
    {"payload", "syjPk", 1, 2},	    {"grep", "sprtSaTuijk", 0, 0},
    {"html", "sOk", 1, 1},	    {"diff", "sHjOk", 2, 2},
    {"failures", "saTutijk", 0, 0}, {"verify", "sj", 0, -1},
    {"reindex", "s", 0, 0},	    {"gc", "snMj", 0, 0},
    {"export", "sXiaTutS", 0, -1},
};

static int check_sub(const char *sub, const struct trace_opts *o)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(subs); i++) {
		if (strcmp(subs[i].sub, sub))
			continue;
		for (const char *l = opt_letters; *l; l++) {
			if (!(o->given & (1u << opt_bit(*l))) ||
			    strchr(subs[i].opts, *l))
				continue;
			const char *name = "?";
			for (const struct option *x = lo; x->name; x++)
				if (x->val == *l)
					name = x->name;
			fprintf(stderr,
				"warden trace %s: --%s does not apply to "
				"%s\n",
				sub, name, sub);
			return WD_EXIT_USAGE;
		}
		if (o->argc < subs[i].min_args ||
		    (subs[i].max_args >= 0 && o->argc > subs[i].max_args)) {
			fprintf(stderr,
				"warden trace %s: %s (%d given; see warden "
				"trace --help)\n",
				sub,
				subs[i].max_args == 0 ? "takes no RUN argument"
				: subs[i].max_args == 1 ? "wants one RUN"
				: subs[i].max_args == 2 && subs[i].min_args == 2
				    ? "wants two RUNs"
				    : "wants RUN and STEP",
				o->argc);
			return WD_EXIT_USAGE;
		}
		return 0;
	}
	return WD_EXIT_USAGE;
}

static int verb_trace(int argc, char **argv)
{
	wd_cli_sub_first(argc, argv, lo);
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? WD_EXIT_USAGE : WD_EXIT_OK;
	}
	const char *sub = argv[1];
	if (wd_cli_wants_help(argc, argv)) {
		usage(stdout);
		return WD_EXIT_OK;
	}
	if (wd_cli_trace_fleet_asked(argc, argv, sub))
		return wd_cli_trace_fleet(argc, argv, sub);
	/* the reading subcommands, which wardend serves (authorised) */
	static const char *const reads[] = {"ls",   "show", "payload", "grep",
					    "html", "diff", "failures"};
	static const char *const store[] = {"verify", "reindex", "gc",
					    "export"};
	bool known = false, via_daemon = false;
	for (size_t i = 0; i < WD_ARRAY_SIZE(reads); i++)
		via_daemon |= !strcmp(sub, reads[i]);
	for (size_t i = 0; i < WD_ARRAY_SIZE(store); i++)
		known |= !strcmp(sub, store[i]);
	known |= via_daemon;
	if (!known) {
		fprintf(stderr, "warden trace: unknown subcommand '%s'\n", sub);
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct trace_opts o = {0};
	int rc = parse(argc - 1, argv + 1, &o);
	if (!rc)
		rc = check_sub(sub, &o);
	if (rc)
		return rc;
	struct tsrc src = {.sock = wd_cli_socket(o.socket)};
	if (via_daemon && !o.state_given)
		return trace_reads(&src, sub, &o);
	bool writes = !strcmp(sub, "reindex") || !strcmp(sub, "gc");
	struct wd_trace_opts to = {.read_only = !writes};
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(o.state, &to, &t, &err) < 0) {
		wd_error("trace: %s", err.msg);
		return WD_EXIT_FAIL;
	}
	src.t = t;
	if (via_daemon)
		rc = trace_reads(&src, sub, &o);
	else if (!strcmp(sub, "verify"))
		rc = cmd_verify(t, &o);
	else if (!strcmp(sub, "export"))
		rc = cmd_export(t, &o);
	else if (!strcmp(sub, "reindex")) {
		rc = wd_trace_reindex(t, &err) < 0 ? WD_EXIT_FAIL : WD_EXIT_OK;
		if (rc)
			wd_error("trace reindex: %s", err.msg);
		else
			printf("trace reindex: ok\n");
	} else {
		struct wd_trace_gc_opts go = {.now_ns = o.now_ns,
					      .metadata_days = o.metadata_days};
		struct wd_trace_gc_stats st;
		if (wd_trace_gc_ex(t, &go, &st, &err) < 0) {
			wd_error("trace gc: %s", err.msg);
			rc = WD_EXIT_FAIL;
		} else if (o.json) {
			json_t *j = json_pack(
			    "{s:i, s:i, s:I}", "blobs_deleted", (int)st.blobs,
			    "segments_removed", (int)st.segments,
			    "records_removed", (json_int_t)st.records);
			print_json(j);
			json_decref(j);
		} else {
			printf("trace gc: %u payload blob(s) deleted\n",
			       st.blobs);
			if (st.segments)
				printf("trace gc: %u segment(s) with %llu "
				       "record(s) past metadata retention "
				       "removed\n",
				       st.segments,
				       (unsigned long long)st.records);
		}
	}
	wd_trace_close(t);
	return rc;
}
WD_VERB(trace, "trace", "inspect, verify and maintain the trace store",
	verb_trace);
