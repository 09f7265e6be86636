/* The query parameters of the API's reads (api/request.c): a filter an
 * endpoint would not apply is refused, not ignored (it would answer more
 * than was asked): type= only on a step's payloads, and nothing else
 * there; since= ages whose nanoseconds would wrap 64 bits refused (213504d
 * had read as 25 minutes); follow= only 1/true/0/false ("yes" was "no");
 * the keys each endpoint reads, any other refused by wardend. */
#include "t.h"
#include "api/request.h"

struct q {
	const char *k[3], *v[3];
};

static const char *qget(void *arg, const char *key)
{
	struct q *q = arg;
	for (int i = 0; i < 3 && q->k[i]; i++)
		if (!strcmp(q->k[i], key))
			return q->v[i];
	return NULL;
}

static int get(const char *path, struct q q, struct wd_api_req *r)
{
	struct wd_err e = {0};
	memset(r, 0, sizeof(*r));
	int rc = wd_api_parse("GET", path, qget, &q, NULL, 0, r, &e);
	if (rc)
		printf("  (%s: %d %s)\n", path, rc, e.msg);
	return rc;
}

#define CASE(name, path, want, ...)                                            \
	do {                                                                   \
		struct wd_api_req r;                                           \
		int rc = get(path, (struct q){__VA_ARGS__}, &r);               \
		T_OK(rc == (want), name, "rc %d, want %d", rc, want);          \
		wd_api_req_free(&r);                                           \
	} while (0)

int main(void)
{
	CASE("payload-type", "/v1/runs/r1/payload/2", 0, {"type"},
	     {"tool_result"});
	CASE("payload-agent-refused", "/v1/runs/r1/payload/2", 400, {"agent"},
	     {"a"});
	CASE("payload-since-refused", "/v1/runs/r1/payload/2", 400, {"since"},
	     {"1d"});
	CASE("runs-type-refused", "/v1/trace/runs", 400, {"type"},
	     {"tool_result"});
	CASE("records-type-refused", "/v1/trace/records", 400, {"type"},
	     {"tool_result"});
	CASE("runs-agent", "/v1/trace/runs", 0, {"agent"}, {"a"});
	CASE("records-tool", "/v1/trace/records", 0, {"tool"}, {"t"});
	CASE("since-age", "/v1/trace/runs", 0, {"since"}, {"213503d"});
	CASE("since-age-wraps-refused", "/v1/trace/runs", 400, {"since"},
	     {"213504d"});
	CASE("since-hours-wrap-refused", "/v1/trace/runs", 400, {"since"},
	     {"5124096h"});
	CASE("since-blank-refused", "/v1/trace/runs", 400, {"since"}, {" 7d"});
	CASE("since-sign-refused", "/v1/trace/runs", 400, {"since"}, {"+7d"});
	CASE("since-date", "/v1/trace/runs", 0, {"since"}, {"2026-11-29"});
	CASE("events-follow-1", "/v1/events", 0, {"follow"}, {"1"});
	CASE("events-follow-false", "/v1/events", 0, {"follow"}, {"false"});
	CASE("events-follow-yes-refused", "/v1/events", 400, {"follow"},
	     {"yes"});
	struct wd_api_req r;
	get("/v1/events", (struct q){{"follow"}, {"true"}}, &r);
	T_OK(r.follow, "events-follow-true", "follow %d", r.follow);
	wd_api_req_free(&r);
	get("/v1/events", (struct q){{"follow"}, {"0"}}, &r);
	T_OK(!r.follow, "events-follow-0", "follow %d", r.follow);
	wd_api_req_free(&r);
	/* 213503 days back is before the epoch: everything */
	get("/v1/trace/runs", (struct q){{"since"}, {"213503d"}}, &r);
	T_OK(r.since_ns == 0, "since-age-before-epoch", "%llu",
	     (unsigned long long)r.since_ns);
	wd_api_req_free(&r);
	/* every other key is refused by wardend (server.c) */
	static const struct {
		enum wd_api_ep ep;
		const char *key;
		bool ok;
	} keys[] = {
	    {WD_EP_TRACE_RUNS, "agent", true},
	    {WD_EP_TRACE_RUNS, "after", true},
	    {WD_EP_TRACE_RUNS, "agen", false},
	    {WD_EP_TRACE_RUNS, "gent", false},
	    {WD_EP_TRACE_RUNS, "", false},
	    {WD_EP_TRACE_RUNS, "type", false},
	    {WD_EP_TRACE_RECORDS, "replay_of", false},
	    {WD_EP_RUN_TRACE, "since", false},
	    {WD_EP_RUN_PAYLOAD, "type", true},
	    {WD_EP_FLEET_TRACE_RUNS, "agent", false},
	    {WD_EP_FLEET_TRACE_RUNS, "limit", true},
	    {WD_EP_EVENTS, "follow", true},
	    {WD_EP_STATUS, "verbose", false},
	    {WD_EP_COST, "by since", false},
	    {WD_EP_COST, "by", true},
	    {WD_EP_METRICS, "name[]", true},
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char name[64];
		snprintf(name, sizeof(name), "key[%d:%s]", (int)keys[i].ep,
			 keys[i].key);
		T_OK(wd_api_query_key_ok(keys[i].ep, keys[i].key) == keys[i].ok,
		     name, "want %s", keys[i].ok ? "read" : "refused");
	}
	return T_DONE();
}
