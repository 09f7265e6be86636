/* Trace reads through wardend (DESIGN §4: `warden trace ...` without --state
 * goes through the daemon, which authorises the caller). A trace holds whole
 * prompts and customer data, so reading one is a data-governance decision
 * made here, from the caller's SO_PEERCRED uid and policy/users.yaml
 * (wd_users_may_read_run): the run's user, its team's group, auditors.
 *
 * Every payload handed out is first recorded in the run's own trace as a
 * `payload_read` record (who, why allowed, which records and hashes): the
 * record is written before the payload leaves, so a read that cannot be
 * recorded does not happen (fail closed, like the broker's tool_attempt).
 * A hash_only run's payloads are never handed out, even when a blob with
 * the same hash exists because another (full) run stored the same text. */
#include "policy/users.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"
#include "trace/records.h"
#include "events/event.h"

#include <string.h>

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* The caller as runs name their user: users.yaml's name for the uid when
 * listed (runtime.c rt_run_new), else the passwd name. */
static const char *caller_name(struct wd_pset *ps, const struct wd_caller *c)
{
	const char *n = wd_pset_user_name(ps, c->uid);
	return n ? n : c->user;
}

/* The decision for one run, from its run_start or its index row (both
 * carry the uid that started it; none: no one's own run). */
static bool may_read(struct wd_pset *ps, const struct wd_caller *c, json_t *st,
		     const char **why)
{
	json_t *u = json_object_get(st, "uid");
	return wd_users_may_read_run(
	    ps->users, c->uid, json_is_integer(u) ? json_integer_value(u) : -1,
	    jstr(st, "team"), why);
}

static struct wd_pset *cur_pset(struct wd_rt *rt)
{
	pthread_mutex_lock(&rt->mu);
	struct wd_pset *ps = wd_pset_ref(rt->ps);
	pthread_mutex_unlock(&rt->mu);
	return ps;
}

bool rt_may_read_run_locked(struct wd_rt *rt, const struct wd_caller *c,
			    const struct wd_run *r)
{
	return wd_users_may_read_run(rt->ps->users, c->uid, r->caller.uid,
				     r->team, NULL);
}

bool wd_rt_event_visible(struct wd_rt *rt, const struct wd_caller *c,
			 const struct wd_event *ev)
{
	if (c->uid == 0)
		return true;
	pthread_mutex_lock(&rt->mu);
	struct wd_run *r =
	    ev->run_id[0] ? rt_find_run_locked(rt, ev->run_id) : NULL;
	bool ok =
	    r ? rt_may_read_run_locked(rt, c, r)
	      : wd_users_may_read_run(rt->ps->users, c->uid, -1,
				      ev->run_id[0] ? ev->team : "", NULL);
	pthread_mutex_unlock(&rt->mu);
	return ok;
}

int wd_rt_note_event_read(struct wd_rt *rt, const struct wd_caller *c,
			  const struct wd_event *ev, struct wd_err *err)
{
	/* every event of the run, not only those with a target: the
	 * caller (server.c event_visible) asks once per run and keeps the
	 * answer for the run's next events */
	if (!ev->run_id[0])
		return 0;
	struct rt_view_read v = {.run_id = ev->run_id,
				 .team = ev->team,
				 .run_uid = -1,
				 .step = ev->step >= 0 ? ev->step : 0,
				 .what = "events",
				 .content = ""};
	pthread_mutex_lock(&rt->mu);
	struct wd_run *r = rt_find_run_locked(rt, ev->run_id);
	/* a hash_only run's targets are hashes (broker.c hide_target):
	 * no payload in its events */
	bool hash_only = r && r->hash_only;
	if (r)
		v.run_uid = r->caller.uid;
	pthread_mutex_unlock(&rt->mu);
	if (hash_only)
		return 0;
	/* the run's events from here on are handed out as this one is:
	 * its fields are what the reader gets */
	json_t *evj = wd_event_to_json(ev);
	/* as wd_stream_render writes the line: the event, its type and
	 * its seq (the event stream's, not a record's: not listed) */
	json_object_set_new(evj, "type", json_string("event"));
	json_object_set_new(evj, "seq", json_null());
	v.returned = evj;
	int rc = rt_note_view_read(rt, c, &v,
				   json_pack("[{s:s,s:s,s:s}]", "field",
					     "target", "kind", ev->kind,
					     "call_id", ev->call_id),
				   err);
	json_decref(evj);
	return rc;
}

static int refuse(struct wd_pset *ps, const struct wd_caller *c,
		  const char *run_id, const char *team, struct wd_err *err)
{
	/* the same answer whether or not the run exists would hide run
	 * ids; they are not secret (the event stream names them), what
	 * the runs hold is */
	return wd_err_set(err, -EACCES,
			  "%s may not read run %s (team %s): only its user, "
			  "members of group '%s' and group '%s' may",
			  caller_name(ps, c), run_id, team ? team : "?",
			  team ? team : "?", WD_AUDITORS_GROUP);
}

int rt_check_read_locked(struct wd_rt *rt, const struct wd_caller *c,
			 const struct wd_run *r, struct wd_err *err)
{
	return rt_may_read_run_locked(rt, c, r)
		   ? 0
		   : refuse(rt->ps, c, r->id, r->team, err);
}

int rt_check_read_records(struct wd_rt *rt, const struct wd_caller *c,
			  const char *run_id, json_t *recs, struct wd_err *err)
{
	json_t *st = json_array_get(recs, 0);
	if (wd_rec_type_json(st) != WD_REC_RUN_START)
		return wd_err_set(err, -ENOENT, "no run '%s'", run_id);
	struct wd_pset *ps = cur_pset(rt);
	int rc = may_read(ps, c, st, NULL)
		     ? 0
		     : refuse(ps, c, run_id, jstr(st, "team"), err);
	wd_pset_unref(ps);
	return rc;
}

/* The run's records (from src, or this node's store when NULL) if the
 * caller may read them: -ENOENT no such run, -EACCES not allowed (err says
 * who may). node: the run's node when src names one, else "". */
static int authorised_records(struct wd_rt *rt, const struct wd_caller *c,
			      const char *run_id,
			      const struct wd_rt_trace_src *src, json_t **out,
			      const char **why, char reader[64], char node[64],
			      struct wd_err *err)
{
	json_t *a = NULL;
	node[0] = 0;
	int rc = src ? src->records(src->ctx, run_id, &a, node, err)
		     : wd_trace_run_records(rt->trace, run_id, &a, err);
	if (rc)
		return rc;
	json_t *st = json_array_get(a, 0);
	if (wd_rec_type_json(st) != WD_REC_RUN_START) {
		json_decref(a);
		return wd_err_set(err, -ENOENT, "no run '%s'", run_id);
	}
	struct wd_pset *ps = cur_pset(rt);
	if (!may_read(ps, c, st, why))
		rc = refuse(ps, c, run_id, jstr(st, "team"), err);
	if (reader)
		wd_strlcpy(reader, caller_name(ps, c), 64);
	wd_pset_unref(ps);
	if (rc) {
		json_decref(a);
		return rc;
	}
	*out = a;
	return 0;
}

bool wd_rt_trace_holds(struct wd_rt *rt, const char *run_id)
{
	json_t *a = NULL;
	if (wd_trace_run_records(rt->trace, run_id, &a, NULL))
		return false;
	bool ok = wd_rec_type_json(json_array_get(a, 0)) == WD_REC_RUN_START;
	json_decref(a);
	return ok;
}

/* A read of another node's run is recorded here, naming that node. */
static json_t *node_extra(const char *node)
{
	return *node ? json_pack("{s:s}", "run_node", node) : NULL;
}

/* Every member path of o ("event.target": an object's members are named
 * too, arrays are values) into set. */
static void member_paths(json_t *o, const char *prefix, json_t *set, int depth)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		cleanup_free char *p =
		    *prefix ? wd_asprintf("%s.%s", prefix, k) : wd_strdup(k);
		json_object_set_new(set, p, json_true());
		if (json_is_object(v) && depth < 4)
			member_paths(v, p, set, depth + 1);
	}
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What a read handed out, field by field: [{fields: [path...], seqs:
 * [seq...], count}], one entry per set of fields, the objects (records,
 * payload entries, a view, an approval, an event) with that set counted
 * and, when they have one, their seqs listed. `objs`: an array of the
 * objects, or one object. So the payload_read names exactly what was
 * returned, not only the members known to hold payload. */
json_t *rt_fields_returned(json_t *objs)
{
	json_t *groups = json_object();
	json_t *one = json_is_array(objs) ? NULL : json_pack("[O]", objs);
	size_t i;
	json_t *x;
	json_array_foreach(one ? one : objs, i, x)
	{
		if (!json_is_object(x))
			continue;
		json_t *set = json_object();
		member_paths(x, "", set, 0);
		size_t n = json_object_size(set), j = 0;
		const char **names = wd_calloc(n + 1, sizeof(*names));
		const char *k;
		json_t *v;
		json_object_foreach(set, k, v) names[j++] = k;
		qsort(names, n, sizeof(*names), str_cmp);
		json_t *fields = json_array();
		for (j = 0; j < n; j++)
			json_array_append_new(fields, json_string(names[j]));
		free(names);
		json_decref(set);
		char *key = json_dumps(fields, JSON_COMPACT);
		json_t *g = json_object_get(groups, key ? key : "");
		if (!g) {
			g = json_pack("{s:O,s:[],s:I}", "fields", fields,
				      "seqs", "count", (json_int_t)0);
			json_object_set_new(groups, key ? key : "", g);
		}
		free(key);
		json_decref(fields);
		json_t *seq = json_object_get(x, "seq");
		if (json_is_integer(seq))
			json_array_append(json_object_get(g, "seqs"), seq);
		json_object_set_new(
		    g, "count",
		    json_integer(
			json_integer_value(json_object_get(g, "count")) + 1));
	}
	json_decref(one);
	json_t *out = json_array();
	const char *k;
	json_object_foreach(groups, k, x) json_array_append(out, x);
	json_decref(groups);
	return out;
}

/* Append a payload_read (who, why allowed, what: `read` the payload
 * members with their hashes, `returned` every field handed out) and wait
 * until it is written: a read that cannot be recorded does not happen
 * (-EAGAIN). `returned` (borrowed): the objects handed out. */
static int record_read(struct wd_rt *rt, const struct wd_caller *c,
		       const char *run_id, int64_t step, const char *reader,
		       const char *why, const char *what, json_t *read,
		       json_t *returned, json_t *extra, struct wd_err *err)
{
	json_t *rec = json_pack("{s:s,s:I,s:s,s:s,s:i,s:s,s:s?,s:o}", "run_id",
				run_id, "step", (json_int_t)step, "type",
				wd_rec_type_name(WD_REC_PAYLOAD_READ), "reader",
				reader, "uid", (int)c->uid, "access", why,
				"payload_type", what, "read", read);
	if (returned)
		json_object_set_new(rec, "returned",
				    rt_fields_returned(returned));
	if (extra)
		json_object_update_missing(rec, extra);
	uint64_t seq = 0;
	int rc = wd_trace_append(rt->trace, rec, false, &seq, err);
	if (!rc && (rc = wd_trace_wait_written(rt->trace, seq)))
		wd_err_set(err, rc, "%s", strerror(-rc));
	json_decref(rec);
	if (rc)
		return wd_err_set(err, -EAGAIN,
				  "the read could not be recorded (%s): no "
				  "payload is handed out",
				  err->msg);
	return 0;
}

/* Payload a full run's records hold inline (the rest is by reference,
 * read through wd_rt_trace_payload): the task, tool arguments, the model's
 * response, a result's preview, the output. */
static const char *const inline_fields[] = {"task", "args", "response",
					    "preview", "output"};

/* [{seq, field}] of the payload `recs` hold inline (payload_read records
 * themselves hold none). */
static json_t *inline_reads(json_t *recs)
{
	json_t *read = json_array();
	size_t i;
	json_t *x;
	json_array_foreach(recs, i, x)
	{
		if (wd_rec_type_json(x) == WD_REC_PAYLOAD_READ)
			continue;
		for (size_t k = 0; k < WD_ARRAY_SIZE(inline_fields); k++)
			if (json_object_get(x, inline_fields[k]))
				json_array_append_new(
				    read, json_pack("{s:O,s:s}", "seq",
						    json_object_get(x, "seq"),
						    "field", inline_fields[k]));
	}
	return read;
}

/* A hash_only run's denial targets are hashes from the broker on
 * (wd_event_hide_target); a record an older build wrote with the target
 * verbatim is handed out with it hashed the same way. */
void rt_hash_old_targets(json_t *recs)
{
	size_t i;
	json_t *x;
	json_array_foreach(recs, i, x)
	{
		json_t *ev = json_object_get(x, "event");
		const char *tg = jstr(ev, "target");
		if (wd_rec_type_json(x) != WD_REC_DENIAL || !tg || !*tg)
			continue;
		char h[128];
		wd_event_hashed_target(tg, jstr(ev, "source"), jstr(ev, "kind"),
				       h, sizeof(h));
		json_object_set_new(ev, "target", json_string(h));
	}
}

int wd_rt_trace_records(struct wd_rt *rt, const struct wd_caller *c,
			const char *run_id, json_t **out, struct wd_err *err)
{
	return wd_rt_trace_records_from(rt, c, run_id, NULL, out, err);
}

int wd_rt_trace_records_from(struct wd_rt *rt, const struct wd_caller *c,
			     const char *run_id,
			     const struct wd_rt_trace_src *src, json_t **out,
			     struct wd_err *err)
{
	const char *why = "";
	char reader[64], node[64];
	json_t *a = NULL;
	int rc =
	    authorised_records(rt, c, run_id, src, &a, &why, reader, node, err);
	if (rc)
		return rc;
	/* what of it is payload is a read like any other: recorded first
	 * (a hash_only run holds none: hashes, stop reasons, counts) */
	json_t *tr = json_object_get(json_array_get(a, 0), "trace");
	bool hash_only =
	    jstr(tr, "payloads") && !strcmp(jstr(tr, "payloads"), "hash_only");
	if (hash_only)
		rt_hash_old_targets(a);
	json_t *read = hash_only ? json_array() : inline_reads(a);
	json_t *extra = node_extra(node);
	if (!json_array_size(read)) {
		json_decref(read);
	} else if ((rc = record_read(
			rt, c, run_id,
			json_integer_value(json_object_get(
			    json_array_get(a, json_array_size(a) - 1), "step")),
			reader, why, "records", read, a, extra, err))) {
		json_decref(extra);
		json_decref(a);
		return rc;
	}
	json_decref(extra);
	*out = a;
	return 0;
}

int wd_rt_trace_payload(struct wd_rt *rt, const struct wd_caller *c,
			const char *run_id, int64_t step, const char *type,
			json_t **out, struct wd_err *err)
{
	return wd_rt_trace_payload_from(rt, c, run_id, step, type, NULL, out,
					err);
}

int wd_rt_trace_payload_from(struct wd_rt *rt, const struct wd_caller *c,
			     const char *run_id, int64_t step, const char *type,
			     const struct wd_rt_trace_src *src, json_t **out,
			     struct wd_err *err)
{
	const char *why = "";
	char reader[64], node[64];
	json_t *recs = NULL;
	int rc = authorised_records(rt, c, run_id, src, &recs, &why, reader,
				    node, err);
	if (rc)
		return rc;
	json_t *a = NULL;
	/* a hash_only run's entries come back with no payload
	 * (wd_trace_records_payloads): nothing of it is a read. Another
	 * node's blobs are read only by the refs its records name at that
	 * step: a ref of some other run is never looked up through this one */
	rc = src ? wd_trace_records_payloads(recs, run_id, step, type,
					     src->blob, src->ctx, &a, err)
		 : wd_trace_step_payloads(rt->trace, run_id, step, type, &a,
					  err);
	json_decref(recs);
	if (rc)
		return rc;
	json_t *read = json_array();
	size_t i;
	json_t *p;
	json_array_foreach(a, i, p)
	{
		if (json_object_get(p, "payload"))
			json_array_append_new(
			    read, json_pack("{s:O,s:O,s:O}", "seq",
					    json_object_get(p, "seq"), "field",
					    json_object_get(p, "field"), "hash",
					    json_object_get(p, "ref")));
	}
	json_t *extra = node_extra(node);
	if (!json_array_size(read)) {
		json_decref(read);
	} else if ((rc = record_read(rt, c, run_id, step, reader, why, type,
				     read, a, extra, err))) {
		json_decref(extra);
		json_decref(a);
		return rc;
	}
	json_decref(extra);
	*out = a;
	return 0;
}

/* A run's view (its output) or stream (its records as they are written)
 * handed to someone other than the run's own user (by uid: a team member,
 * an auditor, root) is a payload read like the records read: recorded
 * first, and not handed out when it cannot be (-EAGAIN, err says why).
 * The run's own user reading their run is not recorded (their own
 * `warden run` follows it). The same reader reading the same content again
 * (a done run's output, a stream of the same records) is recorded once per
 * daemon: polling a finished run must not grow its trace without bound. */
int rt_note_view_read(struct wd_rt *rt, const struct wd_caller *c,
		      const struct rt_view_read *v, json_t *read,
		      struct wd_err *err)
{
	if (!json_array_size(read) && !v->follow) {
		json_decref(read);
		return 0;
	}
	if (v->run_uid >= 0 && (uid_t)v->run_uid == c->uid) {
		json_decref(read);
		return 0;
	}
	cleanup_free char *key =
	    wd_asprintf("%s|%u|%s|%s", v->run_id, (unsigned)c->uid, v->what,
			v->content ? v->content : "");
	pthread_mutex_lock(&rt->mu);
	bool seen = json_object_get(rt->reads_noted, key) != NULL;
	pthread_mutex_unlock(&rt->mu);
	if (seen) {
		json_decref(read);
		return 0;
	}
	struct wd_pset *ps = cur_pset(rt);
	const char *why = "";
	char reader[64];
	if (!wd_users_may_read_run(ps->users, c->uid, v->run_uid, v->team,
				   &why) &&
	    v->access)
		why = v->access;
	wd_strlcpy(reader, caller_name(ps, c), sizeof(reader));
	wd_pset_unref(ps);
	json_t *extra = v->follow ? json_pack("{s:b,s:I}", "follow", 1, "since",
					      (json_int_t)v->since)
				  : NULL;
	if (v->run_node) {
		if (!extra)
			extra = json_object();
		json_object_set_new(extra, "run_node",
				    json_string(v->run_node));
	}
	int rc = record_read(rt, c, v->run_id, v->step, reader, why, v->what,
			     read, v->returned, extra, err);
	json_decref(extra);
	if (rc)
		return rc;
	/* bounded: forgetting only means a repeated read is recorded again */
	pthread_mutex_lock(&rt->mu);
	if (json_object_size(rt->reads_noted) >= 4096)
		json_object_clear(rt->reads_noted);
	json_object_set_new(rt->reads_noted, key, json_true());
	pthread_mutex_unlock(&rt->mu);
	return 0;
}

int rt_note_stream_read(struct wd_rt *rt, const struct wd_caller *c,
			const struct rt_view_read *v, json_t *recs,
			struct wd_err *err)
{
	struct rt_view_read sv = *v;
	sv.returned = recs;
	return rt_note_view_read(rt, c, &sv, inline_reads(recs), err);
}

/* The index's rows of the runs c may read: the rule as a set of runs
 * (wd_users_read_scope) goes into the query, so a page of records is a
 * page of readable records; each run row (it carries uid and team) is
 * judged again by the rule itself. */
static int readable_query(struct wd_rt *rt, const struct wd_caller *c,
			  const struct wd_trace_query *q, bool records,
			  json_t **out, struct wd_err *err)
{
	struct wd_pset *ps = cur_pset(rt);
	struct wd_read_scope sc;
	wd_users_read_scope(ps->users, c->uid, &sc);
	struct wd_trace_reader rd = {
	    .uid = c->uid, .teams = sc.teams, .n_teams = (size_t)sc.n_teams};
	struct wd_trace_query rq = *q;
	rq.reader = sc.all ? NULL : &rd;
	json_t *a = NULL;
	int rc = records ? wd_trace_query_records(rt->trace, &rq, &a, err)
			 : wd_trace_query_runs(rt->trace, &rq, &a, err);
	if (!rc && !records) {
		json_t *ok = json_array();
		size_t i;
		json_t *r;
		json_array_foreach(a, i, r)
		{
			if (may_read(ps, c, r, NULL))
				json_array_append(ok, r);
		}
		json_decref(a);
		a = ok;
	}
	wd_read_scope_free(&sc);
	wd_pset_unref(ps);
	if (!rc)
		*out = a;
	return rc;
}

int rt_readable_runs(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err)
{
	return readable_query(rt, c, q, false, out, err);
}

/* A page of the runs c may read: {runs, more, next_after}. The SQL query
 * holds the read rule, so a page is a page of readable runs; the cursor is
 * the page's last row as the query returned it ("START.RUN_ID"), taken
 * before readable_query judges each row again, so a row that judgement
 * drops never stalls or repeats the paging. */
int wd_rt_trace_runs(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err)
{
	return wd_rt_trace_runs_with(rt, c, q, NULL, out, err);
}

/* page order: (start, run id), an unknown start (0) first */
static int page_cmp(const void *x, const void *y)
{
	json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
	json_int_t sa = json_integer_value(json_object_get(a, "page_started"));
	json_int_t sb = json_integer_value(json_object_get(b, "page_started"));
	if (sa != sb)
		return sa < sb ? -1 : 1;
	const char *ra = jstr(a, "run_id"), *rb = jstr(b, "run_id");
	return strcmp(ra ? ra : "", rb ? rb : "");
}

/* a and extra's rows in page order, a run once (the node's own row
 * first): a new array */
static json_t *merge_page(json_t *a, json_t *extra)
{
	size_t n = json_array_size(a) + json_array_size(extra), k = 0;
	json_t **v = wd_calloc(n + 1, sizeof(*v));
	json_t *seen = json_object();
	size_t i;
	json_t *r;
	json_array_foreach(a, i, r)
	{
		json_object_set(seen, jstr(r, "run_id") ?: "", json_true());
		v[k++] = r;
	}
	json_array_foreach(extra, i, r)
	{
		if (json_is_integer(json_object_get(r, "page_started")) &&
		    !json_object_get(seen, jstr(r, "run_id") ?: ""))
			v[k++] = r;
	}
	qsort(v, k, sizeof(*v), page_cmp);
	json_t *out = json_array();
	for (i = 0; i < k; i++)
		json_array_append_new(out, json_deep_copy(v[i]));
	free(v);
	json_decref(seen);
	return out;
}

/* A page of the runs c may read: {runs, more, next_after}. The SQL query
 * holds the read rule, so a page is a page of readable runs; the cursor is
 * the page's last row as the query returned it ("START.RUN_ID"), taken
 * before readable_query judges each row again, so a row that judgement
 * drops never stalls or repeats the paging. Other nodes' rows (extra)
 * follow the same cursor: both lists hold at most limit + 1 rows after
 * it, so the merged page's first limit + 1 are the fleet's. */
int wd_rt_trace_runs_with(struct wd_rt *rt, const struct wd_caller *c,
			  const struct wd_trace_query *q, json_t *extra,
			  json_t **out, struct wd_err *err)
{
	if (!q->limit || q->limit > WD_TRACE_RUNS_MAX)
		return wd_err_set(err, -EINVAL,
				  "limit must be 1 to %u runs a page",
				  WD_TRACE_RUNS_MAX);
	struct wd_trace_query pq = *q;
	pq.page = true;
	pq.limit = q->limit + 1; /* one more: whether another page follows */
	struct wd_pset *ps = cur_pset(rt);
	struct wd_read_scope sc;
	wd_users_read_scope(ps->users, c->uid, &sc);
	struct wd_trace_reader rd = {
	    .uid = c->uid, .teams = sc.teams, .n_teams = (size_t)sc.n_teams};
	pq.reader = sc.all ? NULL : &rd;
	json_t *a = NULL;
	int rc = wd_trace_query_runs(rt->trace, &pq, &a, err);
	wd_read_scope_free(&sc);
	if (rc) {
		wd_pset_unref(ps);
		return rc;
	}
	if (json_array_size(extra)) {
		json_t *m = merge_page(a, extra);
		json_decref(a);
		a = m;
		while (json_array_size(a) > pq.limit)
			json_array_remove(a, json_array_size(a) - 1);
	}
	bool more = json_array_size(a) > q->limit;
	if (more)
		json_array_remove(a, q->limit);
	json_t *last = json_array_get(a, json_array_size(a) - 1);
	char *cursor =
	    more ? wd_asprintf("%lld.%s",
			       (long long)json_integer_value(
				   json_object_get(last, "page_started")),
			       jstr(last, "run_id") ?: "")
		 : NULL;
	json_t *ok = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(a, i, r)
	{
		json_object_del(r, "page_started");
		if (may_read(ps, c, r, NULL))
			json_array_append(ok, r);
	}
	json_decref(a);
	wd_pset_unref(ps);
	*out = json_pack("{s:o,s:b}", "runs", ok, "more", more);
	if (cursor)
		json_object_set_new(*out, "next_after", json_string(cursor));
	free(cursor);
	return 0;
}

int wd_rt_trace_grep(struct wd_rt *rt, const struct wd_caller *c,
		     const struct wd_trace_query *q, json_t **out,
		     struct wd_err *err)
{
	if (!q->limit || q->limit > WD_TRACE_RECORDS_MAX)
		return wd_err_set(err, -EINVAL,
				  "limit must be 1 to %u records a page",
				  WD_TRACE_RECORDS_MAX);
	/* one more than the page: whether another page follows */
	struct wd_trace_query pq = *q;
	pq.limit = q->limit + 1;
	json_t *a = NULL;
	int rc = readable_query(rt, c, &pq, true, &a, err);
	if (rc)
		return rc;
	bool more = json_array_size(a) > q->limit;
	if (more)
		json_array_remove(a, q->limit);
	json_t *last = json_array_get(a, json_array_size(a) - 1);
	*out = json_pack("{s:o,s:b}", "records", a, "more", more);
	if (more)
		json_object_set(*out, "next_after",
				json_object_get(last, "seq"));
	return 0;
}
