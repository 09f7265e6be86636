/* `warden events [--follow] [--json] [--since SEQ] [--socket PATH]`:
 * the node-wide denial stream, read from wardend over its unix socket
 * (GET /v1/events, JSON lines; contract in daemon/events/stream.h). */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "api/client.h"
#include "cli/cli.h"
#include "common/util.h"

struct ev_client {
	bool json;
	int events;
	bool bad;
};

static int print_line(void *arg, json_t *o)
{
	struct ev_client *c = arg;
	if (!json_is_object(o)) {
		/* never print what we could not parse as if it were data */
		c->bad = true;
		return 0;
	}
	const char *type = json_string_value(json_object_get(o, "type"));
	if (c->json) {
		char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
		if (s)
			puts(s);
		free(s);
	} else if (type && !strcmp(type, "loss")) {
		/* every count the line has (the stream's sources, then this
		 * reader's overrun), printed once any is non-zero */
		struct wd_buf b = {0};
		bool any = false;
		const char *k;
		json_t *v;
		json_object_foreach(o, k, v)
		{
			if (!json_is_integer(v) || !strcmp(k, "next_seq"))
				continue;
			any |= json_integer_value(v) != 0;
			wd_buf_printf(&b, " %s=%lld", k,
				      (long long)json_integer_value(v));
		}
		if (any)
			printf("# lost:%s\n", b.data);
		wd_buf_free(&b);
	} else {
#define S(k) (json_string_value(json_object_get(o, k)) ?: "")
		printf(
		    "%-6lld %s %-8s %-10s %-7s %s pid=%lld uid=%lld "
		    "errno=%lld",
		    (long long)json_integer_value(json_object_get(o, "seq")),
		    S("ts"), S("source"), S("kind"), S("verdict"),
		    S("target")[0] ? S("target") : "-",
		    (long long)json_integer_value(json_object_get(o, "pid")),
		    (long long)json_integer_value(json_object_get(o, "uid")),
		    (long long)json_integer_value(json_object_get(o, "errno")));
		if (S("syscall")[0])
			printf(" syscall=%s", S("syscall"));
		if (S("call_id")[0])
			printf(" call=%s", S("call_id"));
		if (S("run_id")[0])
			printf(" run=%s step=%lld", S("run_id"),
			       (long long)json_integer_value(
				   json_object_get(o, "step")));
		if (S("tool")[0])
			printf(" tool=%s", S("tool"));
		printf(" cgroup=%lld\n", (long long)json_integer_value(
					     json_object_get(o, "cgroup_id")));
#undef S
	}
	if (type && !strcmp(type, "event"))
		c->events++;
	fflush(stdout);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: warden events [--follow] [--json] [--since SEQ] "
		"[--socket PATH]\n\n"
		"Print the node's denial/audit event stream from wardend.\n"
		"  -f, --follow   keep printing events as they happen\n"
		"  --json         one JSON object per line (type event|loss)\n"
		"  --since SEQ    only events after sequence number SEQ\n"
		"  --socket PATH  wardend socket (default $WARDEN_SOCKET or "
		"%s)\n",
		WD_DEFAULT_SOCKET);
}

static int events_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"follow", no_argument, NULL, 'f'},
	    {"json", no_argument, NULL, 'j'},
	    {"since", required_argument, NULL, 's'},
	    {"socket", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool follow = false;
	const char *sock_flag = NULL;
	unsigned long long since = 0;
	struct ev_client c = {0};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (o) {
		case 'f':
			follow = true;
			break;
		case 'j':
			c.json = true;
			break;
		case 's': {
			unsigned long long v = 0;
			if (wd_parse_uint(optarg, 0, UINT64_MAX, &v)) {
				fprintf(stderr,
					"warden events: bad --since '%s'\n",
					optarg);
				return WD_EXIT_USAGE;
			}
			since = v;
			break;
		}
		case 'S':
			sock_flag = optarg;
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	const char *sock = wd_cli_socket(sock_flag);
	char path[96];
	snprintf(path, sizeof(path), "/v1/events?since=%llu%s", since,
		 follow ? "&follow=1" : "");
	/* the shared client: "not running" told apart from a full backlog
	 * (retried) and a silent daemon (no line, not even the 10 s loss
	 * keep-alive, within $WARDEN_TIMEOUT) */
	struct wd_err err = {0};
	if (wd_api_stream(sock, path, print_line, &c, &err)) {
		fprintf(stderr, "warden events: %s\n", err.msg);
		return WD_EXIT_FAIL;
	}
	if (c.bad) {
		fprintf(stderr,
			"warden events: wardend sent lines that are not JSON "
			"objects\n");
		return WD_EXIT_FAIL;
	}
	if (!c.json && !follow && !c.events)
		fprintf(stderr, "warden events: no events held by wardend\n");
	return WD_EXIT_OK;
}

WD_VERB(events, "events", "print the node's denial event stream (wardend)",
	events_main);
