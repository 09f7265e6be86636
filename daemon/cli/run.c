/* warden run AGENT "TASK" [--follow] [--json] [--socket PATH]
 * (options anywhere, GNU style; `--` before a TASK that starts with '-')
 * Starts a run on wardend (as the calling user: the daemon reads the uid
 * from the socket) and, with --follow (the default on a terminal... and
 * otherwise too unless --detach), streams its steps as they happen. */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"
#include "common/log.h"
#include "trace/records.h"

struct follow_ctx {
	bool json;
	const char *status;
	char final[24];
	int exit_code;
};

void wd_cli_print_step(const json_t *r)
{
	const char *type = json_string_value(json_object_get(r, "type"));
	long long step = json_integer_value(json_object_get(r, "step"));
	const char *tool =
	    json_string_value(json_object_get(r, "gen_ai.tool.name"));
	if (!type)
		return;
	printf("[step %lld] %-17s", step, type);
	enum wd_rec_type rt = wd_rec_type_of(type);
	if (rt == WD_REC_RUN_START) {
		printf(" agent=%s team=%s user=%s model=%s",
		       json_string_value(json_object_get(r, "agent")),
		       json_string_value(json_object_get(r, "team")),
		       json_string_value(json_object_get(r, "user")),
		       json_string_value(
			   json_object_get(r, "gen_ai.request.model")));
		json_t *ro = json_object_get(r, "replay_of");
		if (ro)
			printf("\n           replay of %s from step %lld "
			       "(determinism %s, tools %s)",
			       json_string_value(json_object_get(ro, "run_id")),
			       json_integer_value(
				   json_object_get(ro, "from_step")),
			       json_string_value(
				   json_object_get(ro, "determinism")),
			       json_string_value(json_object_get(ro, "tools")));
	} else if (rt == WD_REC_MODEL_CALL) {
		json_t *resp = json_object_get(r, "response");
		printf(" %s in=%lld out=%lld $%.6f %lldms",
		       json_string_value(
			   json_object_get(r, "gen_ai.response.model"))
			   ?: json_string_value(
				  json_object_get(r, "gen_ai.request.model")),
		       json_integer_value(
			   json_object_get(r, "gen_ai.usage.input_tokens")),
		       json_integer_value(
			   json_object_get(r, "gen_ai.usage.output_tokens")),
		       json_number_value(json_object_get(r, "cost_usd")),
		       json_integer_value(json_object_get(r, "latency_ms")));
		const char *t =
		    json_string_value(json_object_get(resp, "text"));
		if (t && *t)
			printf("\n           model: %.300s", t);
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(resp, "tool_calls"), i, c)
		{
			char *a = json_dumps(json_object_get(c, "arguments"),
					     JSON_COMPACT | JSON_ENCODE_ANY);
			printf("\n           call %s(%.200s)",
			       json_string_value(json_object_get(c, "name")),
			       a ? a : "");
			free(a);
		}
		const char *e = json_string_value(json_object_get(r, "error"));
		if (e)
			printf(" error: %s", e);
	} else if (rt == WD_REC_TOOL_ATTEMPT &&
		   json_object_get(r, "child_run_id")) {
		printf(" %s sub-agent run %s", tool,
		       json_string_value(json_object_get(r, "child_run_id")));
	} else if (rt == WD_REC_TOOL_ATTEMPT) {
		printf(" %s tier=%lld side_effects=%s for uid %lld", tool,
		       json_integer_value(json_object_get(r, "tier")),
		       json_string_value(json_object_get(r, "side_effects")),
		       json_integer_value(json_object_get(r, "user_uid")));
	} else if (rt == WD_REC_TOOL_RESULT) {
		const char *st =
		    json_string_value(json_object_get(r, "status"));
		printf(" %s status=%s", tool, st ? st : "?");
		const char *rp =
		    json_string_value(json_object_get(r, "replay"));
		if (rp)
			printf(" (replay: %s, not executed)", rp);
		const char *why =
		    json_string_value(json_object_get(r, "reason"));
		if (why)
			printf(" (%s)", why);
		if (json_object_get(r, "latency_ms"))
			printf(
			    " %lldms denials=%lld",
			    json_integer_value(
				json_object_get(r, "latency_ms")),
			    json_integer_value(json_object_get(r, "denials")));
		if (json_object_get(r, "run_as_uid"))
			printf(" as uid %lld",
			       json_integer_value(
				   json_object_get(r, "run_as_uid")));
	} else if (rt == WD_REC_DENIAL) {
		json_t *e = json_object_get(r, "event");
		printf(" %s: %s %s %s (%s)", tool,
		       json_string_value(json_object_get(e, "verdict")),
		       json_string_value(json_object_get(e, "kind")),
		       json_string_value(json_object_get(e, "target")) ?: "",
		       json_string_value(json_object_get(e, "source")));
	} else if (rt == WD_REC_APPROVAL_REQUEST) {
		printf(" %s: %s\n           approve with: warden approvals "
		       "approve %s",
		       tool, json_string_value(json_object_get(r, "reason")),
		       json_string_value(json_object_get(r, "approval_id")));
	} else if (rt == WD_REC_APPROVAL_DECISION) {
		printf(" %s %s by %s", tool,
		       json_string_value(json_object_get(r, "decision")),
		       json_string_value(json_object_get(r, "by")));
	} else if (rt == WD_REC_BUDGET_STOP) {
		printf(" %s: limit %g, used %g",
		       json_string_value(json_object_get(r, "bound")),
		       json_number_value(json_object_get(r, "limit")),
		       json_number_value(json_object_get(r, "used")));
	} else if (rt == WD_REC_REPLAY_STEP) {
		printf(" from the record of %s (prompt %.23s, no model call, "
		       "no tool run)",
		       json_string_value(json_object_get(r, "of_run_id")),
		       json_string_value(json_object_get(r, "prompt_hash"))
			   ?: "");
	} else if (rt == WD_REC_REPLAY_REFUSED) {
		printf(" %s side_effects=%s: %s", tool,
		       json_string_value(json_object_get(r, "side_effects")),
		       json_string_value(json_object_get(r, "reason")));
	} else if (rt == WD_REC_REPLAY_DIVERGENCE) {
		printf(" %s (%s %s)",
		       json_string_value(json_object_get(r, "message")),
		       json_string_value(json_object_get(r, "kind")),
		       json_string_value(json_object_get(r, "what")));
	} else if (rt == WD_REC_RUN_END) {
		const char *why =
		    json_string_value(json_object_get(r, "reason"));
		printf(" status=%s steps=%lld cost=$%.6f%s%s",
		       json_string_value(json_object_get(r, "status")),
		       json_integer_value(json_object_get(r, "steps")),
		       json_number_value(json_object_get(r, "cost_usd")),
		       why ? " reason: " : "", why ? why : "");
		const char *out =
		    json_string_value(json_object_get(r, "output"));
		if (out)
			printf("\n\n%s", out);
		json_t *rs = json_object_get(r, "replay");
		if (rs)
			printf(
			    "\n\nreplay of %s from step %lld: %s",
			    json_string_value(json_object_get(rs, "of_run_id")),
			    json_integer_value(
				json_object_get(rs, "from_step")),
			    json_string_value(json_object_get(rs, "summary")));
	}
	printf("\n");
	fflush(stdout);
}

static int on_line(void *arg, json_t *r)
{
	struct follow_ctx *f = arg;
	if (f->json) {
		char *s = json_dumps(r, JSON_COMPACT);
		if (s) {
			printf("%s\n", s);
			free(s);
		}
		fflush(stdout);
	} else {
		wd_cli_print_step(r);
	}
	const char *type = json_string_value(json_object_get(r, "type"));
	if (type && !strcmp(type, "run_end")) {
		const char *st =
		    json_string_value(json_object_get(r, "status"));
		snprintf(f->final, sizeof(f->final), "%s", st ? st : "");
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: warden run AGENT TASK [--follow|--detach] [--json] "
		   "[--socket PATH]\n"
		   "  (options may come anywhere; `--` ends them)\n"
		   "  Runs AGENT on TASK in wardend as you (your uid, from the "
		   "socket).\n"
		   "  --follow   stream the steps as they happen (default)\n"
		   "  --detach   print the run id and return\n"
		   "  exit: 0 the run ended ok, 1 it failed or was stopped, "
		   "2 usage\n");
}

static int verb_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"follow", no_argument, 0, 'f'},
	    {"detach", no_argument, 0, 'd'},
	    {"json", no_argument, 0, 'j'},
	    {"socket", required_argument, 0, 's'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	bool follow = true, json = false;
	const char *sock = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "fdjh", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = true;
			break;
		case 'd':
			follow = false;
			break;
		case 'j':
			json = true;
			break;
		case 's':
			sock = optarg;
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	sock = wd_cli_socket(sock);
	json_t *body = json_pack("{s:s,s:s}", "agent", argv[optind], "task",
				 argv[optind + 1]);
	json_t *resp =
	    wd_cli_api("run", sock, "POST", "/v1/runs", body, 201, NULL);
	json_decref(body);
	if (!resp)
		return WD_EXIT_FAIL;
	const char *id = json_string_value(json_object_get(resp, "run_id"));
	char rid[80];
	snprintf(rid, sizeof(rid), "%s", id ? id : "");
	bool fleet = json_is_true(json_object_get(resp, "fleet"));
	json_decref(resp);
	if (!follow) {
		if (json)
			printf("{\"run_id\":\"%s\"}\n", rid);
		else
			printf("%s\n", rid);
		return WD_EXIT_OK;
	}
	if (fleet)
		return wd_cli_run_follow_fleet(sock, rid, json);
	if (!json)
		printf("run %s\n", rid);
	struct follow_ctx f = {.json = json};
	char path[160];
	snprintf(path, sizeof(path), "/v1/runs/%s/stream", rid);
	struct wd_err err = {0};
	if (wd_api_stream(sock, path, on_line, &f, &err)) {
		fprintf(stderr, "warden run: %s\n", err.msg);
		return WD_EXIT_FAIL;
	}
	return wd_cli_run_exit(f.final);
}

/* The exit code says how the run ended (README "Exit codes"): an answer
 * cut short or refused is not a success. */
int wd_cli_run_exit(const char *status)
{
	static const struct {
		const char *status;
		int code;
	} m[] = {
	    {"ok", WD_EXIT_OK},
	    {"truncated", WD_EXIT_TRUNCATED},
	    {"refused", WD_EXIT_REFUSED},
	    {"context_exceeded", WD_EXIT_CONTEXT},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(m); i++)
		if (!strcmp(status, m[i].status))
			return m[i].code;
	return WD_EXIT_FAIL;
}

WD_VERB(run, "run", "run an agent on a task in wardend, streaming its steps",
	verb_run);
