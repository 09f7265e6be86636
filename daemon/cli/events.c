/* `warden events [--follow] [--json] [--since SEQ] [--socket PATH]`:
 * the node-wide denial stream, read from wardend over its unix socket
 * (GET /v1/events, JSON lines; contract in daemon/events/stream.h). */
#include <curl/curl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "cli/cli.h"
#include "common/util.h"

struct ev_client {
	CURL *h;
	bool json;
	struct wd_buf errbody; /* body of a non-200 answer */
	struct wd_buf line;    /* partial line between chunks */
	int events;
	bool bad;
};

static void print_line(struct ev_client *c, const char *s, size_t n)
{
	if (!n)
		return;
	json_error_t je;
	json_t *o = json_loadb(s, n, 0, &je);
	if (!o || !json_is_object(o)) {
		/* never print what we could not parse as if it were data */
		c->bad = true;
		json_decref(o);
		return;
	}
	const char *type = json_string_value(json_object_get(o, "type"));
	if (c->json) {
		fwrite(s, 1, n, stdout);
		fputc('\n', stdout);
	} else if (type && !strcmp(type, "loss")) {
		json_int_t b =
		    json_integer_value(json_object_get(o, "bpf_ringbuf"));
		json_int_t src =
		    json_integer_value(json_object_get(o, "source"));
		json_int_t ov =
		    json_integer_value(json_object_get(o, "overrun"));
		if (b || src || ov)
			printf("# lost: bpf_ringbuf=%lld source=%lld "
			       "overrun=%lld\n",
			       (long long)b, (long long)src, (long long)ov);
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
	json_decref(o);
	fflush(stdout);
}

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
	struct ev_client *c = arg;
	size_t n = sz * nm;
	long status = 0;
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		if (c->errbody.len < 4096)
			wd_buf_append(&c->errbody, p, n);
		return n;
	}
	wd_buf_append(&c->line, p, n);
	size_t start = 0;
	for (size_t i = 0; i < c->line.len; i++)
		if (c->line.data[i] == '\n') {
			print_line(c, c->line.data + start, i - start);
			start = i + 1;
		}
	memmove(c->line.data, c->line.data + start, c->line.len - start);
	c->line.len -= start;
	return n;
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
			char *end;
			errno = 0;
			since = strtoull(optarg, &end, 10);
			if (errno || *end || end == optarg) {
				fprintf(stderr,
					"warden events: bad --since '%s'\n",
					optarg);
				return WD_EXIT_USAGE;
			}
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
	char url[128];
	snprintf(url, sizeof(url), "http://localhost/v1/events?since=%llu%s",
		 since, follow ? "&follow=1" : "");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *h = curl_easy_init();
	if (!h) {
		fprintf(stderr, "warden events: cannot initialise libcurl\n");
		return WD_EXIT_FAIL;
	}
	c.h = h;
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(h, CURLOPT_FAILONERROR, 0L);
	CURLcode rc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	int ret = WD_EXIT_OK;
	if (rc == CURLE_COULDNT_CONNECT) {
		fprintf(stderr,
			"warden events: needs wardend: nothing listens on %s "
			"(%s); start wardend or pass --socket / "
			"$WARDEN_SOCKET\n",
			sock, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		ret = WD_EXIT_FAIL;
	} else if (rc != CURLE_OK) {
		fprintf(stderr, "warden events: %s: %s\n", sock,
			errbuf[0] ? errbuf : curl_easy_strerror(rc));
		ret = WD_EXIT_FAIL;
	} else if (status != 200) {
		fprintf(stderr,
			"warden events: wardend answered HTTP %ld%s%.*s\n",
			status, c.errbody.len ? ": " : "",
			(int)WD_MIN(c.errbody.len, 300),
			c.errbody.len ? c.errbody.data : "");
		ret = WD_EXIT_FAIL;
	} else if (c.bad) {
		fprintf(stderr,
			"warden events: wardend sent lines that are not JSON "
			"objects\n");
		ret = WD_EXIT_FAIL;
	}
	if (!c.json && ret == WD_EXIT_OK && !follow && !c.events)
		fprintf(stderr, "warden events: no events held by wardend\n");
	wd_buf_free(&c.line);
	wd_buf_free(&c.errbody);
	curl_global_cleanup();
	return ret;
}

WD_VERB(events, "events", "print the node's denial event stream (wardend)",
	events_main);
