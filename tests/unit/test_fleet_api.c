/* The fleet's API requests (api/request.c): /v1/fleet/runs[/ID],
 * /v1/fleet/nodes, /v1/fleet/trace/runs[/ID], /v1/fleet/trace/verify,
 * /v1/fleet/trace/gc -- their methods, ids, the state, limit and
 * retention parameters, and what each refuses; the records page's cursor
 * into other nodes' records (NODE.SEQ). */
#include "../t.h"
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

static int parse(const char *method, const char *path, struct q *q,
		 struct wd_api_req *r, struct wd_err *e)
{
	static struct q none;
	memset(r, 0, sizeof(*r));
	memset(e, 0, sizeof(*e));
	return wd_api_parse(method, path, qget, q ? q : &none, NULL, 0, r, e);
}

static int post(const char *path, const char *body, struct wd_api_req *r,
		struct wd_err *e)
{
	static struct q none;
	memset(r, 0, sizeof(*r));
	memset(e, 0, sizeof(*e));
	return wd_api_parse("POST", path, qget, &none, body, strlen(body), r,
			    e);
}

static void trace_upkeep(void)
{
	struct wd_api_req r;
	struct wd_err e;
	int rc = parse("GET", "/v1/fleet/trace/verify", NULL, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_TRACE_VERIFY && !r.id[0],
	     "verify-all", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q q1 = {{"run"}, {"run_1"}};
	rc = parse("GET", "/v1/fleet/trace/verify", &q1, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_TRACE_VERIFY &&
		 !strcmp(r.id, "run_1"),
	     "verify-run", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q q2 = {{"run"}, {"run_1' OR 1=1"}};
	rc = parse("GET", "/v1/fleet/trace/verify", &q2, &r, &e);
	T_OK(rc == 400, "verify-bad-run", "rc %d", rc);
	rc = parse("DELETE", "/v1/fleet/trace/verify", NULL, &r, &e);
	T_OK(rc == 405, "verify-method", "rc %d", rc);

	rc = post("/v1/fleet/trace/gc", "{}", &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_TRACE_GC && r.days == 0,
	     "gc-default", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	rc = post("/v1/fleet/trace/gc", "{\"metadata_days\": 30}", &r, &e);
	T_OK(rc == 0 && r.days == 30, "gc-days", "rc %d days %u: %s", rc,
	     r.days, e.msg);
	wd_api_req_free(&r);
	rc = post("/v1/fleet/trace/gc", "{\"metadata_days\": 0}", &r, &e);
	T_OK(rc == 400 && strstr(e.msg, "1..36500"), "gc-days-0", "rc %d: %s",
	     rc, e.msg);
	rc = post("/v1/fleet/trace/gc", "{\"metadata_days\": \"9\"}", &r, &e);
	T_OK(rc == 400, "gc-days-string", "rc %d", rc);
	rc = post("/v1/fleet/trace/gc", "{\"now\": 1}", &r, &e);
	T_OK(rc == 400, "gc-unknown-field", "rc %d: %s", rc, e.msg);
	rc = parse("GET", "/v1/fleet/trace/gc", NULL, &r, &e);
	T_OK(rc == 405, "gc-method", "rc %d", rc);
}

int main(void)
{
	struct wd_api_req r;
	struct wd_err e;
	int rc =
	    parse("GET", "/v1/fleet/runs/run_0123456789abcdef", NULL, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_RUN_GET &&
		 !strcmp(r.id, "run_0123456789abcdef"),
	     "run-get", "rc %d ep %d: %s", rc, r.ep, e.msg);
	wd_api_req_free(&r);
	rc = parse("GET", "/v1/fleet/runs/..", NULL, &r, &e);
	T_OK(rc == 400, "run-get-bad-id", "rc %d", rc);
	rc = parse("POST", "/v1/fleet/runs/run_1", NULL, &r, &e);
	T_OK(rc == 405, "run-get-post", "rc %d", rc);

	rc = parse("GET", "/v1/fleet/runs", NULL, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_RUNS && r.limit == 100 &&
		 !r.tq[WD_TQ_STATUS],
	     "runs-default", "rc %d limit %u", rc, r.limit);
	wd_api_req_free(&r);
	struct q q1 = {{"state", "limit"}, {"interrupted", "1000"}};
	rc = parse("GET", "/v1/fleet/runs", &q1, &r, &e);
	T_OK(rc == 0 && r.limit == 1000 && r.tq[WD_TQ_STATUS] &&
		 !strcmp(r.tq[WD_TQ_STATUS], "interrupted"),
	     "runs-state-limit", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q q2 = {{"state"}, {"queued' OR 1=1"}};
	rc = parse("GET", "/v1/fleet/runs", &q2, &r, &e);
	T_OK(rc == 400 && strstr(e.msg, "state must be"), "runs-bad-state",
	     "rc %d: %s", rc, e.msg);
	struct q q3 = {{"limit"}, {"0"}};
	rc = parse("GET", "/v1/fleet/runs", &q3, &r, &e);
	T_OK(rc == 400, "runs-limit-0", "rc %d", rc);
	struct q q4 = {{"limit"}, {"1001"}};
	rc = parse("GET", "/v1/fleet/runs", &q4, &r, &e);
	T_OK(rc == 400, "runs-limit-max", "rc %d", rc);

	rc = parse("GET", "/v1/fleet/nodes", NULL, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_NODES, "nodes", "rc %d", rc);
	wd_api_req_free(&r);
	rc = parse("DELETE", "/v1/fleet/nodes", NULL, &r, &e);
	T_OK(rc == 405, "nodes-method", "rc %d", rc);

	struct q q5 = {{"limit"}, {"5"}};
	rc = parse("GET", "/v1/fleet/trace/runs", &q5, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_TRACE_RUNS && r.limit == 5,
	     "trace-runs", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q q6 = {{"state"}, {"done"}};
	rc = parse("GET", "/v1/fleet/trace/runs", &q6, &r, &e);
	T_OK(rc == 400 && strstr(e.msg, "/v1/fleet/runs"),
	     "trace-runs-no-state", "rc %d: %s", rc, e.msg);
	rc = parse("GET", "/v1/fleet/trace/runs/run_1", NULL, &r, &e);
	T_OK(rc == 0 && r.ep == WD_EP_FLEET_TRACE_RUN && !strcmp(r.id, "run_1"),
	     "trace-run", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	rc = parse("GET", "/v1/fleet/trace/runs/a%2fb", NULL, &r, &e);
	T_OK(rc == 400, "trace-run-bad-id", "rc %d", rc);
	/* /v1/trace/records: a seq, or NODE.SEQ (".0": the other nodes'
	 * first) */
	struct q c1 = {{"after"}, {"17"}};
	rc = parse("GET", "/v1/trace/records", &c1, &r, &e);
	T_OK(rc == 0 && r.after_seq == 17 && !r.after_fleet && !r.after_run[0],
	     "records-after-seq", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q c2 = {{"after"}, {"node_0a1b.42"}};
	rc = parse("GET", "/v1/trace/records", &c2, &r, &e);
	T_OK(rc == 0 && r.after_seq == 42 && r.after_fleet &&
		 !strcmp(r.after_run, "node_0a1b"),
	     "records-after-node", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	struct q c3 = {{"after"}, {".0"}};
	rc = parse("GET", "/v1/trace/records", &c3, &r, &e);
	T_OK(rc == 0 && r.after_seq == 0 && r.after_fleet && !r.after_run[0],
	     "records-after-fleet-start", "rc %d: %s", rc, e.msg);
	wd_api_req_free(&r);
	const char *bad[] = {"node'x.1", "node_1.", "node_1.x", "a.b.1",
			     "node_1.-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct q cb = {{"after"}, {bad[i]}};
		rc = parse("GET", "/v1/trace/records", &cb, &r, &e);
		T_OK(rc == 400 && strstr(e.msg, "NODE.SEQ"),
		     "records-after-bad", "%s: rc %d: %s", bad[i], rc, e.msg);
	}
	trace_upkeep();
	return T_DONE();
}
