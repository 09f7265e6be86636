#include "api/request.h"
#include "trace/trace.h"

#include <ctype.h>
#include <string.h>
#include <time.h>

#define BODY_MAX   (1u << 20)
#define TASK_MAX   (256u << 10)
#define AGENT_MAX  128
#define REASON_MAX 1024

bool wd_api_id_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		unsigned char c = s[n];
		if (!isalnum(c) && c != '_' && c != '-')
			return false;
		if (n >= WD_API_ID_MAX)
			return false;
	}
	return n > 0;
}

int wd_api_parse_since(const char *s, uint64_t now_wall_ns, uint64_t *out_ns)
{
	/* a date, an age or seconds all start with a digit: no blank or
	 * sign (strtoull and strptime would skip them) */
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end != s && !errno) {
		uint64_t unit = 0;
		if (!*end)
			unit = 0; /* epoch seconds */
		else if (!strcmp(end, "s"))
			unit = 1;
		else if (!strcmp(end, "m"))
			unit = 60;
		else if (!strcmp(end, "h"))
			unit = 3600;
		else if (!strcmp(end, "d"))
			unit = 86400;
		else
			goto date;
		/* a count of seconds that fits in 64 bits of nanoseconds:
		 * past it the product would wrap (213504d is not 25 min) */
		if (v > 1ull << 32 ||
		    (unit && v > UINT64_MAX / (unit * 1000000000ull)))
			return -EINVAL;
		if (!unit) {
			*out_ns = (uint64_t)v * 1000000000ull;
			return 0;
		}
		uint64_t back = (uint64_t)v * unit * 1000000000ull;
		*out_ns = back > now_wall_ns ? 0 : now_wall_ns - back;
		return 0;
	}
date:;
	struct tm tm = {0};
	const char *r = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!r) {
		memset(&tm, 0, sizeof(tm));
		r = strptime(s, "%Y-%m-%d", &tm);
	}
	if (!r || (*r && strcmp(r, "Z")))
		return -EINVAL;
	time_t t = timegm(&tm);
	if (t < 0)
		return -EINVAL;
	*out_ns = (uint64_t)t * 1000000000ull;
	return 0;
}

static int body_obj(const char *body, size_t len, json_t **out,
		    struct wd_err *err)
{
	json_error_t je;
	if (len > BODY_MAX)
		return wd_err_set(err, 413, "request body too large");
	if (!body || !len) {
		*out = json_object();
		return 0;
	}
	*out = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!*out)
		return wd_err_set(err, 400, "body is not JSON: %s (col %d)",
				  je.text, je.column);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return wd_err_set(err, 400, "body must be a JSON object");
	}
	return 0;
}

/* Every key of `o` must be in `allowed` (a typo is an error, not a
 * silently ignored field). */
static int only_keys(json_t *o, const char *const *allowed, struct wd_err *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		bool ok = false;
		for (int i = 0; allowed[i]; i++)
			ok |= !strcmp(k, allowed[i]);
		if (!ok)
			return wd_err_set(err, 400, "unknown field '%s'", k);
	}
	return 0;
}

static int str_field(json_t *o, const char *key, bool required, size_t max,
		     char **out, struct wd_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required)
			return wd_err_set(err, 400, "missing field '%s'", key);
		return 0;
	}
	if (!json_is_string(v))
		return wd_err_set(err, 400, "field '%s' must be a string", key);
	size_t n = json_string_length(v);
	if (n > max)
		return wd_err_set(err, 400, "field '%s' longer than %zu bytes",
				  key, max);
	if (strlen(json_string_value(v)) != n)
		return wd_err_set(err, 400, "field '%s' contains NUL", key);
	if (required && !n)
		return wd_err_set(err, 400, "field '%s' is empty", key);
	*out = wd_strndup(json_string_value(v), n);
	return 0;
}

static int parse_run_create(json_t *o, struct wd_api_req *r, struct wd_err *err)
{
	static const char *const keys[] = {"agent", "task", NULL};
	int rc;
	if ((rc = only_keys(o, keys, err)) ||
	    (rc = str_field(o, "agent", true, AGENT_MAX, &r->agent, err)) ||
	    (rc = str_field(o, "task", true, TASK_MAX, &r->task, err)))
		return rc;
	for (const char *p = r->agent; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' &&
		    *p != '.')
			return wd_err_set(err, 400, "bad agent name");
	return 0;
}

static int parse_decision(json_t *o, struct wd_api_req *r, struct wd_err *err)
{
	static const char *const keys[] = {"decision", "reason", NULL};
	cleanup_free char *d = NULL;
	int rc;
	if ((rc = only_keys(o, keys, err)) ||
	    (rc = str_field(o, "decision", true, 16, &d, err)) ||
	    (rc = str_field(o, "reason", false, REASON_MAX, &r->reason, err)))
		return rc;
	if (!strcmp(d, "approve") || !strcmp(d, "approved"))
		r->approve = true;
	else if (!strcmp(d, "deny") || !strcmp(d, "denied"))
		r->approve = false;
	else
		return wd_err_set(err, 400,
				  "decision must be \"approve\" or \"deny\"");
	return 0;
}

/* POST /v1/fleet/trace/gc {metadata_days?} */
static int parse_gc(json_t *o, struct wd_api_req *r, struct wd_err *err)
{
	static const char *const keys[] = {"metadata_days", NULL};
	int rc = only_keys(o, keys, err);
	if (rc)
		return rc;
	json_t *d = json_object_get(o, "metadata_days");
	if (!d)
		return 0;
	if (!json_is_integer(d) || json_integer_value(d) < 1 ||
	    json_integer_value(d) > 36500)
		return wd_err_set(err, 400,
				  "metadata_days must be an integer 1..36500");
	r->days = (unsigned)json_integer_value(d);
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* GET /v1/cost and /v1/fleet/cost: by=team|agent|user, since=WHEN */
static int cost_query(const char *(*query)(void *, const char *), void *qarg,
		      struct wd_api_req *req, struct wd_err *err)
{
	const char *by = query(qarg, "by");
	if (!by)
		by = "team";
	if (strcmp(by, "team") && strcmp(by, "agent") && strcmp(by, "user"))
		return wd_err_set(err, 400, "by must be team, agent or user");
	wd_strlcpy(req->by, by, sizeof(req->by));
	const char *since = query(qarg, "since");
	if (since && wd_api_parse_since(since, wd_wall_ns(), &req->since_ns))
		return wd_err_set(err, 400, "bad since (YYYY-MM-DD, 24h, 7d)");
	return 0;
}

/* GET /v1/fleet/runs?state=queued|running|done|interrupted&limit=N */
static int fleet_runs_query(const char *(*query)(void *, const char *),
			    void *qarg, struct wd_api_req *req,
			    struct wd_err *err)
{
	static const char *const states[] = {"queued", "running", "done",
					     "interrupted"};
	const char *st = query(qarg, "state");
	if (st) {
		size_t i = 0;
		while (i < WD_ARRAY_SIZE(states) && strcmp(st, states[i]))
			i++;
		if (i == WD_ARRAY_SIZE(states))
			return wd_err_set(err, 400,
					  "state must be queued, running, done "
					  "or interrupted");
		req->tq[WD_TQ_STATUS] = wd_strdup(st);
	}
	req->limit = 100;
	const char *l = query(qarg, "limit");
	uint64_t v;
	if (l && (parse_u64(l, &v) || v < 1 || v > 1000))
		return wd_err_set(err, 400, "limit must be 1..1000");
	if (l)
		req->limit = (unsigned)v;
	return 0;
}

/* Split "/v1/runs/ID/stream" into at most 5 segments, each bounded. */
static int split_path(const char *path, char seg[5][WD_API_ID_MAX + 1], int *n)
{
	*n = 0;
	if (path[0] != '/')
		return -EINVAL;
	const char *p = path + 1;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (*n >= 5 || l > WD_API_ID_MAX || l == 0)
			return -EINVAL;
		memcpy(seg[*n], p, l);
		seg[*n][l] = 0;
		(*n)++;
		p += l;
		if (*p == '/')
			p++;
	}
	return 0;
}

/* The trace filters: names, statuses and hashes, bounded and printable
 * (they end up in SQL parameters, never in SQL text). */
static int trace_filters(const char *(*query)(void *arg, const char *key),
			 void *qarg, struct wd_api_req *req, struct wd_err *err)
{
	static const char *const keys[WD_TQ__COUNT] = {
	    [WD_TQ_AGENT] = "agent",
	    [WD_TQ_TEAM] = "team",
	    [WD_TQ_USER] = "user",
	    [WD_TQ_TOOL] = "tool",
	    [WD_TQ_STATUS] = "status",
	    [WD_TQ_PROMPT_HASH] = "prompt_hash",
	    [WD_TQ_RESULT_HASH] = "result_hash",
	    [WD_TQ_TYPE] = "type",
	    [WD_TQ_REPLAY_OF] = "replay_of",
	};
	for (int i = 0; i < WD_TQ__COUNT; i++) {
		const char *v = query(qarg, keys[i]);
		if (!v)
			continue;
		/* a filter an endpoint does not apply is refused, not
		 * ignored (it would answer more than was asked) */
		if (i == WD_TQ_REPLAY_OF && req->ep != WD_EP_TRACE_RUNS)
			return wd_err_set(err, 400,
					  "replay_of: only /v1/trace/runs "
					  "takes it");
		if ((i == WD_TQ_TYPE) != (req->ep == WD_EP_RUN_PAYLOAD))
			return wd_err_set(
			    err, 400, "%s: %s", keys[i],
			    i == WD_TQ_TYPE
				? "only /v1/runs/ID/payload/STEP takes it"
				: "a step's payloads take only type");
		size_t l = strlen(v);
		if (!l || l > 128)
			return wd_err_set(err, 400, "bad %s", keys[i]);
		for (size_t k = 0; k < l; k++)
			if (!isgraph((unsigned char)v[k]))
				return wd_err_set(err, 400, "bad %s", keys[i]);
		req->tq[i] = wd_strndup(v, l);
	}
	const char *since = query(qarg, "since");
	if (since && req->ep == WD_EP_RUN_PAYLOAD)
		return wd_err_set(err, 400,
				  "since: a step's payloads take only type");
	if (since && wd_api_parse_since(since, wd_wall_ns(), &req->since_ns))
		return wd_err_set(err, 400, "bad since (YYYY-MM-DD, 24h, 7d)");
	return 0;
}

/* GET /v1/trace/runs pages: limit=N (1..WD_TRACE_RUNS_MAX, default
 * WD_TRACE_RUNS_PAGE) runs after=CURSOR (the previous page's next_after,
 * "START.RUN_ID": the last run's start in microseconds and its id). */
static int runs_page(const char *l, const char *a, struct wd_api_req *req,
		     struct wd_err *err)
{
	uint64_t v = WD_TRACE_RUNS_PAGE;
	if (l && (parse_u64(l, &v) || v < 1 || v > WD_TRACE_RUNS_MAX))
		return wd_err_set(err, 400,
				  "limit must be 1 to %u runs a page "
				  "(page on with after=next_after)",
				  WD_TRACE_RUNS_MAX);
	req->limit = (unsigned)v;
	if (!a)
		return 0;
	const char *dot = strchr(a, '.');
	char num[24];
	if (!dot || (size_t)(dot - a) >= sizeof(num) || !wd_api_id_ok(dot + 1))
		goto bad;
	memcpy(num, a, (size_t)(dot - a));
	num[dot - a] = 0;
	if (parse_u64(num, &req->after_seq))
		goto bad;
	wd_strlcpy(req->after_run, dot + 1, sizeof(req->after_run));
	return 0;
bad:
	return wd_err_set(err, 400,
			  "after must be the previous page's next_after "
			  "(START.RUN_ID)");
}

/* GET /v1/trace/records pages: limit=N (1..WD_TRACE_RECORDS_MAX, default
 * WD_TRACE_RECORDS_PAGE) records with seq > after=SEQ (the previous page's
 * next_after; in a fleet NODE.SEQ once the pages reach other nodes'
 * records). /v1/trace/runs pages by runs (runs_page). */
static int trace_page(const char *(*query)(void *arg, const char *key),
		      void *qarg, struct wd_api_req *req, struct wd_err *err)
{
	const char *l = query(qarg, "limit"), *a = query(qarg, "after");
	if (req->ep == WD_EP_TRACE_RUNS)
		return runs_page(l, a, req, err);
	if (req->ep != WD_EP_TRACE_RECORDS) {
		if (l || a)
			return wd_err_set(err, 400,
					  "%s: only /v1/trace/records and "
					  "/v1/trace/runs are paged",
					  l ? "limit" : "after");
		return 0;
	}
	uint64_t v = WD_TRACE_RECORDS_PAGE;
	if (l && (parse_u64(l, &v) || v < 1 || v > WD_TRACE_RECORDS_MAX))
		return wd_err_set(err, 400,
				  "limit must be 1 to %u records a page "
				  "(page on with after=next_after)",
				  WD_TRACE_RECORDS_MAX);
	req->limit = (unsigned)v;
	/* in a fleet, the other nodes' records follow this node's, by
	 * (node, seq): their cursor names the node */
	const char *dot = a ? strchr(a, '.') : NULL;
	char node[WD_API_ID_MAX + 1];
	if (dot && (size_t)(dot - a) >= sizeof(node))
		goto bad;
	if (dot) {
		/* ".0": from the first of them */
		memcpy(node, a, (size_t)(dot - a));
		node[dot - a] = 0;
		if (*node && !wd_api_id_ok(node))
			goto bad;
		wd_strlcpy(req->after_run, node, sizeof(req->after_run));
		req->after_fleet = true;
	}
	if (a && parse_u64(dot ? dot + 1 : a, &req->after_seq))
		goto bad;
	return 0;
bad:
	return wd_err_set(err, 400,
			  "after must be the previous page's next_after (a "
			  "record's seq, or NODE.SEQ)");
}

/* GET /v1/runs/ID/trace, /v1/runs/ID/payload/STEP[?type=T] */
static int parse_trace_run(char seg[5][WD_API_ID_MAX + 1], int n,
			   const char *(*query)(void *arg, const char *key),
			   void *qarg, struct wd_api_req *req,
			   struct wd_err *err)
{
	if (!wd_api_id_ok(seg[2]))
		return wd_err_set(err, 400, "bad run id");
	memcpy(req->id, seg[2], sizeof(req->id));
	if (!strcmp(seg[3], "trace")) {
		req->ep = WD_EP_RUN_TRACE;
		return n == 4 ? 0 : wd_err_set(err, 404, "no such endpoint");
	}
	req->ep = WD_EP_RUN_PAYLOAD;
	uint64_t step;
	if (n != 5 || parse_u64(seg[4], &step) || step > INT32_MAX)
		return wd_err_set(err, 400, "payload wants /payload/STEP");
	req->step = (int64_t)step;
	return trace_filters(query, qarg, req, err);
}

int wd_api_parse(const char *method, const char *path,
		 const char *(*query)(void *arg, const char *key), void *qarg,
		 const char *body, size_t body_len, struct wd_api_req *req,
		 struct wd_err *err)
{
	char seg[5][WD_API_ID_MAX + 1];
	int n, rc;
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	memset(req, 0, sizeof(*req));
	if (split_path(path, seg, &n))
		return wd_err_set(err, 404, "no such endpoint");
	if (n == 1 && !strcmp(seg[0], "healthz")) {
		req->ep = WD_EP_HEALTHZ;
		return get ? 0 : wd_err_set(err, 405, "use GET");
	}
	if (n == 1 && !strcmp(seg[0], "metrics")) {
		req->ep = WD_EP_METRICS;
		return get ? 0 : wd_err_set(err, 405, "use GET");
	}
	if (n < 2 || strcmp(seg[0], "v1"))
		return wd_err_set(err, 404, "no such endpoint");
	const char *res = seg[1];
	json_t *o = NULL;
	if (post && (rc = body_obj(body, body_len, &o, err)))
		return rc;
	rc = wd_err_set(err, 404, "no such endpoint");
	if (!strcmp(res, "runs")) {
		if (n == 2 && post) {
			req->ep = WD_EP_RUN_CREATE;
			rc = parse_run_create(o, req, err);
		} else if (n == 2 && get) {
			req->ep = WD_EP_RUN_LIST;
			rc = 0;
		} else if (n == 4 && post && !strcmp(seg[3], "replay")) {
			req->ep = WD_EP_RUN_REPLAY;
			if (!wd_api_id_ok(seg[2])) {
				rc = wd_err_set(err, 400, "bad run id");
				goto out;
			}
			memcpy(req->id, seg[2], sizeof(req->id));
			req->replay = json_incref(o);
			rc = 0;
		} else if (get && n >= 4 &&
			   (!strcmp(seg[3], "trace") ||
			    !strcmp(seg[3], "payload"))) {
			rc = parse_trace_run(seg, n, query, qarg, req, err);
		} else if (n >= 3 && n <= 4 && get) {
			if (!wd_api_id_ok(seg[2])) {
				rc = wd_err_set(err, 400, "bad run id");
				goto out;
			}
			memcpy(req->id, seg[2], sizeof(req->id));
			if (n == 3) {
				req->ep = WD_EP_RUN_GET;
				rc = 0;
			} else if (!strcmp(seg[3], "stream")) {
				req->ep = WD_EP_RUN_STREAM;
				rc = 0;
				const char *s = query(qarg, "since");
				if (s && parse_u64(s, &req->since_seq))
					rc = wd_err_set(err, 400, "bad since");
			}
		} else if (n <= 4) {
			rc = wd_err_set(err, 405, "method not allowed");
		}
	} else if (!strcmp(res, "trace") && n == 3 &&
		   (!strcmp(seg[2], "runs") || !strcmp(seg[2], "records"))) {
		req->ep = !strcmp(seg[2], "runs") ? WD_EP_TRACE_RUNS
						  : WD_EP_TRACE_RECORDS;
		rc = get ? trace_filters(query, qarg, req, err)
			 : wd_err_set(err, 405, "use GET");
		if (!rc)
			rc = trace_page(query, qarg, req, err);
	} else if (!strcmp(res, "approvals")) {
		if (n == 2 && get) {
			req->ep = WD_EP_APPROVAL_LIST;
			rc = 0;
		} else if (n == 3 && post) {
			req->ep = WD_EP_APPROVAL_DECIDE;
			if (!wd_api_id_ok(seg[2]))
				rc = wd_err_set(err, 400, "bad approval id");
			else {
				memcpy(req->id, seg[2], sizeof(req->id));
				rc = parse_decision(o, req, err);
			}
		} else if (n <= 3) {
			rc = wd_err_set(err, 405, "method not allowed");
		}
	} else if (!strcmp(res, "cost") && n == 2) {
		req->ep = WD_EP_COST;
		rc = get ? cost_query(query, qarg, req, err)
			 : wd_err_set(err, 405, "use GET");
	} else if (!strcmp(res, "events") && n == 2) {
		req->ep = WD_EP_EVENTS;
		rc = get ? 0 : wd_err_set(err, 405, "use GET");
		const char *f = query(qarg, "follow");
		req->follow = f && (!strcmp(f, "1") || !strcmp(f, "true"));
		if (!rc && f && !req->follow && strcmp(f, "0") &&
		    strcmp(f, "false"))
			rc =
			    wd_err_set(err, 400, "follow: 1, true, 0 or false");
		const char *s = query(qarg, "since");
		if (!rc && s && parse_u64(s, &req->since_seq))
			rc = wd_err_set(err, 400, "bad since");
	} else if (!strcmp(res, "policy") && n == 3 &&
		   !strcmp(seg[2], "reload")) {
		req->ep = WD_EP_POLICY_RELOAD;
		rc = post ? 0 : wd_err_set(err, 405, "use POST");
	} else if (!strcmp(res, "fleet") && n == 4 && !strcmp(seg[2], "runs")) {
		req->ep = WD_EP_FLEET_RUN_GET;
		if (!get)
			rc = wd_err_set(err, 405, "use GET");
		else if (!wd_api_id_ok(seg[3]))
			rc = wd_err_set(err, 400, "bad run id");
		else {
			memcpy(req->id, seg[3], sizeof(req->id));
			rc = 0;
		}
	} else if (!strcmp(res, "fleet") && n == 3 && !strcmp(seg[2], "runs")) {
		req->ep = WD_EP_FLEET_RUNS;
		rc = get ? fleet_runs_query(query, qarg, req, err)
			 : wd_err_set(err, 405, "use GET");
	} else if (!strcmp(res, "fleet") && (n == 4 || n == 5) &&
		   !strcmp(seg[2], "trace") && !strcmp(seg[3], "runs")) {
		req->ep =
		    n == 4 ? WD_EP_FLEET_TRACE_RUNS : WD_EP_FLEET_TRACE_RUN;
		if (!get)
			rc = wd_err_set(err, 405, "use GET");
		else if (n == 4) {
			rc = fleet_runs_query(query, qarg, req, err);
			if (!rc && req->tq[WD_TQ_STATUS])
				rc = wd_err_set(err, 400,
						"state is for /v1/fleet/runs");
		} else if (!wd_api_id_ok(seg[4]))
			rc = wd_err_set(err, 400, "bad run id");
		else {
			memcpy(req->id, seg[4], sizeof(req->id));
			rc = 0;
		}
	} else if (!strcmp(res, "fleet") && n == 4 &&
		   !strcmp(seg[2], "trace") && !strcmp(seg[3], "verify")) {
		req->ep = WD_EP_FLEET_TRACE_VERIFY;
		const char *r = query(qarg, "run");
		if (!get)
			rc = wd_err_set(err, 405, "use GET");
		else if (r && !wd_api_id_ok(r))
			rc = wd_err_set(err, 400, "bad run id");
		else {
			snprintf(req->id, sizeof(req->id), "%s", r ? r : "");
			rc = 0;
		}
	} else if (!strcmp(res, "fleet") && n == 4 &&
		   !strcmp(seg[2], "trace") && !strcmp(seg[3], "gc")) {
		req->ep = WD_EP_FLEET_TRACE_GC;
		rc = post ? parse_gc(o, req, err)
			  : wd_err_set(err, 405, "use POST");
	} else if (!strcmp(res, "fleet") && n == 3 && !strcmp(seg[2], "cost")) {
		req->ep = WD_EP_FLEET_COST;
		rc = get ? cost_query(query, qarg, req, err)
			 : wd_err_set(err, 405, "use GET");
	} else if (!strcmp(res, "fleet") && n == 3 &&
		   !strcmp(seg[2], "nodes")) {
		req->ep = WD_EP_FLEET_NODES;
		rc = get ? 0 : wd_err_set(err, 405, "use GET");
	} else if (!strcmp(res, "status") && n == 2) {
		req->ep = WD_EP_STATUS;
		rc = get ? 0 : wd_err_set(err, 405, "use GET");
	}
out:
	json_decref(o);
	if (rc)
		wd_api_req_free(req);
	return rc;
}

const char *wd_api_query_keys(enum wd_api_ep ep)
{
	switch (ep) {
	case WD_EP_RUN_STREAM:
		return "since";
	case WD_EP_RUN_PAYLOAD:
		return "type";
	case WD_EP_TRACE_RUNS:
		return "agent team user tool status prompt_hash result_hash "
		       "replay_of since limit after";
	case WD_EP_TRACE_RECORDS:
		return "agent team user tool status prompt_hash result_hash "
		       "since limit after";
	case WD_EP_COST:
	case WD_EP_FLEET_COST:
		return "by since";
	case WD_EP_EVENTS:
		return "follow since";
	case WD_EP_FLEET_RUNS:
		return "state limit";
	case WD_EP_FLEET_TRACE_RUNS:
		return "limit";
	case WD_EP_FLEET_TRACE_VERIFY:
		return "run";
	default:
		return "";
	}
}

bool wd_api_query_key_ok(enum wd_api_ep ep, const char *key)
{
	if (ep == WD_EP_METRICS || ep == WD_EP_HEALTHZ)
		return true;
	size_t n = strlen(key);
	const char *k = wd_api_query_keys(ep);
	/* a key is a word: "by since" is none of the words */
	if (!n || strspn(key, "abcdefghijklmnopqrstuvwxyz_") != n)
		return false;
	for (const char *p = k; (p = strstr(p, key)); p += n)
		if ((p == k || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

void wd_api_req_free(struct wd_api_req *req)
{
	free(req->agent);
	free(req->task);
	free(req->reason);
	req->agent = req->task = req->reason = NULL;
	for (int i = 0; i < WD_TQ__COUNT; i++) {
		free(req->tq[i]);
		req->tq[i] = NULL;
	}
	json_decref(req->replay);
	req->replay = NULL;
}
