/* warden replay RUN --from N [patch...] [--follow|--detach] [--json]
 * Asks wardend to replay a recorded run (DESIGN §4 "Replay (execution)"):
 * a new run, as the calling user, whose steps before N come from the
 * record. Patch files are read here, as the caller, and sent as text: the
 * daemon never opens a path a caller names. */
#include <getopt.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"
#include "common/util.h"
#include "trace/records.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: warden replay RUN --from N [--agent FILE] "
	    "[--system-prompt FILE]\n"
	    "         [--model ALIAS] [--tool NAME=MANIFEST] "
	    "[--args STEP.CALL=JSON] [--mock TOOL=FILE]\n"
	    "         [--tools recorded] [--determinism "
	    "divergent|pinned|recorded-model]\n"
	    "         [--live-internal] [--follow|--detach] [--json] "
	    "[--socket PATH]\n"
	    "  Re-runs RUN from step N as a new run linked to it. Steps before "
	    "N come\n"
	    "  from the record (no model call, no tool, no cost); from N on "
	    "tools follow\n"
	    "  their side_effects: none live, internal recorded, external "
	    "recorded or\n"
	    "  mocked, else refused (never run again). Defaults: the recorded "
	    "definitions.\n"
	    "  --determinism divergent       live model, divergence reported "
	    "(default)\n"
	    "                pinned          live model with a seed (OpenAI "
	    "routes only)\n"
	    "                recorded-model  every model response from the "
	    "record\n"
	    "  --live-internal  internal tools whose manifest names a "
	    "replay environment\n"
	    "                   (replay.environment) run live in it, never "
	    "in production\n"
	    "  exit: 0 the replay ended ok, 1 it failed or was refused, 2 "
	    "usage\n");
}

static int read_text(const char *what, const char *path, json_t **out)
{
	char *t = NULL;
	size_t n = 0;
	int rc = wd_read_file(path, &t, &n);
	if (rc) {
		fprintf(stderr, "warden replay: %s %s: %s\n", what, path,
			strerror(-rc));
		return -1;
	}
	*out = json_stringn(t, n);
	free(t);
	if (!*out) {
		fprintf(stderr, "warden replay: %s %s: not UTF-8 text\n", what,
			path);
		return -1;
	}
	return 0;
}

/* NAME=FILE into obj[NAME] = text of FILE (or, json, the parsed value). */
static int kv(const char *opt, const char *arg, json_t *obj, bool json)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1]) {
		fprintf(stderr, "warden replay: %s %s: NAME=%s\n", opt, arg,
			json ? "JSON" : "FILE");
		return -1;
	}
	char name[128];
	snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
	json_t *v = NULL;
	if (json) {
		json_error_t je;
		v = json_loads(eq + 1, JSON_DECODE_ANY, &je);
		if (!v) {
			fprintf(stderr, "warden replay: %s %s: %s\n", opt, arg,
				je.text);
			return -1;
		}
	} else if (read_text(opt, eq + 1, &v)) {
		return -1;
	}
	json_object_set_new(obj, name, v);
	return 0;
}

struct follow {
	bool json;
	char status[24];
};

static int on_line(void *arg, json_t *r)
{
	struct follow *f = arg;
	if (f->json) {
		char *s = json_dumps(r, JSON_COMPACT);
		if (s)
			printf("%s\n", s);
		free(s);
		fflush(stdout);
	} else {
		wd_cli_print_step(r);
	}
	if (wd_rec_type_json(r) == WD_REC_RUN_END)
		snprintf(f->status, sizeof(f->status), "%s",
			 json_string_value(json_object_get(r, "status")) ?: "");
	return 0;
}

static int verb_replay(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"from", required_argument, 0, 'F'},
	    {"agent", required_argument, 0, 'a'},
	    {"system-prompt", required_argument, 0, 'p'},
	    {"model", required_argument, 0, 'm'},
	    {"tool", required_argument, 0, 't'},
	    {"args", required_argument, 0, 'A'},
	    {"mock", required_argument, 0, 'M'},
	    {"tools", required_argument, 0, 'T'},
	    {"determinism", required_argument, 0, 'D'},
	    {"live-internal", no_argument, 0, 'L'},
	    {"follow", no_argument, 0, 'f'},
	    {"detach", no_argument, 0, 'd'},
	    {"json", no_argument, 0, 'j'},
	    {"socket", required_argument, 0, 's'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	json_t *body = json_object(), *tool = json_object(),
	       *args = json_object(), *mock = json_object();
	bool follow = true, json = false, have_from = false;
	const char *sock = NULL;
	int c, ret = WD_EXIT_USAGE;
	optind = 1;
	while ((c = getopt_long(argc, argv, "fdjh", opts, NULL)) != -1) {
		json_t *v = NULL;
		switch (c) {
		case 'F': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 0) {
				fprintf(stderr,
					"warden replay: --from %s: a step "
					"number\n",
					optarg);
				goto out;
			}
			json_object_set_new(body, "from", json_integer(n));
			have_from = true;
			break;
		}
		case 'a':
		case 'p':
			if (read_text(c == 'a' ? "--agent" : "--system-prompt",
				      optarg, &v))
				goto out;
			json_object_set_new(
			    body, c == 'a' ? "agent" : "system_prompt", v);
			break;
		case 'm':
			json_object_set_new(body, "model", json_string(optarg));
			break;
		case 't':
			if (kv("--tool", optarg, tool, false))
				goto out;
			break;
		case 'A':
			if (kv("--args", optarg, args, true))
				goto out;
			break;
		case 'M':
			if (kv("--mock", optarg, mock, false))
				goto out;
			break;
		case 'T':
			json_object_set_new(body, "tools", json_string(optarg));
			break;
		case 'D':
			json_object_set_new(body, "determinism",
					    json_string(optarg));
			break;
		case 'L':
			/* sent: the daemon says why it cannot honour it */
			json_object_set_new(body, "live_internal", json_true());
			break;
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
			ret = WD_EXIT_OK;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (argc - optind != 1 || !have_from) {
		usage(stderr);
		goto out;
	}
	if (json_object_size(tool))
		json_object_set(body, "tool", tool);
	if (json_object_size(args))
		json_object_set(body, "args", args);
	if (json_object_size(mock))
		json_object_set(body, "mock", mock);
	sock = wd_cli_socket(sock);
	char path[160];
	snprintf(path, sizeof(path), "/v1/runs/%s/replay", argv[optind]);
	json_t *resp =
	    wd_cli_api("replay", sock, "POST", path, body, 201, NULL);
	ret = WD_EXIT_FAIL;
	if (!resp)
		goto out;
	char rid[80];
	snprintf(rid, sizeof(rid), "%s",
		 json_string_value(json_object_get(resp, "run_id")) ?: "");
	long long pus = json_integer_value(json_object_get(resp, "prefix_us"));
	json_decref(resp);
	if (!follow) {
		if (json)
			printf("{\"run_id\":\"%s\",\"replay_of\":\"%s\","
			       "\"prefix_us\":%lld}\n",
			       rid, argv[optind], pus);
		else
			printf("%s\n", rid);
		ret = WD_EXIT_OK;
		goto out;
	}
	if (!json)
		printf("run %s (replay of %s)\n", rid, argv[optind]);
	struct follow f = {.json = json};
	snprintf(path, sizeof(path), "/v1/runs/%s/stream", rid);
	struct wd_err err = {0};
	if (wd_api_stream(sock, path, on_line, &f, &err)) {
		fprintf(stderr, "warden replay: %s\n", err.msg);
		goto out;
	}
	ret = !strcmp(f.status, "ok") ? WD_EXIT_OK : WD_EXIT_FAIL;
out:
	json_decref(body);
	json_decref(tool);
	json_decref(args);
	json_decref(mock);
	return ret;
}

WD_VERB(replay, "replay",
	"re-run a recorded run from step N with a change (side effects never "
	"repeated)",
	verb_replay);
