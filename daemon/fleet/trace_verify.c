/* `warden fleet verify [RUN]`: each node's hash chain recomputed from the
 * lines it shipped (warden.trace_lines), by the rule `warden trace verify`
 * applies to the node's segments (wd_trace_chain_next, trace/verify.c):
 * every seq present once and in order, each line well framed, each prev
 * the hash of the line before. The whole fleet: every node with a cursor,
 * from its first shipped seq (1, or the one after the days gc dropped:
 * warden.trace_gc) to its cursor (lines up to it are all shipped: the
 * cursor moves in their transaction). One run: the lines of its node from
 * the record before its first to its last.
 *
 * It reads every node's lines: root and the auditors group only. On a
 * connection of its own (a long walk must not hold the API's), in one
 * REPEATABLE READ transaction: a cursor and the lines read agree. A line
 * past a node's cursor is a problem too (the shipper never wrote it). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_int.h"
#include "trace/trace.h"

#define VERIFY_PAGE	    5000
#define VERIFY_MAX_PROBLEMS 1000

struct vnode {
	const char *node;
	json_t *problems;
	size_t n_problems;
	/* the first line checked, when its prev did not chain: a node
	 * whose own metadata gc dropped its first segments before they were
	 * shipped starts after them (a shipped `gc` record names the last
	 * dropped record, as the node's verify accepts) */
	int64_t start_seq;
	char start_prev[80];
	json_t *gc_starts; /* last_hash -> last_seq */
};

static void vproblem(struct vnode *v, int64_t seq, const char *kind,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void vproblem(struct vnode *v, int64_t seq, const char *kind,
		     const char *fmt, ...)
{
	v->n_problems++;
	if (json_array_size(v->problems) >= VERIFY_MAX_PROBLEMS)
		return;
	va_list ap;
	char msg[300];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_array_append_new(v->problems,
			      json_pack("{s:s, s:I, s:s, s:s}", "node", v->node,
					"seq", (json_int_t)seq, "kind", kind,
					"message", msg));
}

/* One line of the walk. */
static void check_line(struct vnode *v, struct wd_trace_chain *ch,
		       int64_t row_seq, const char *line, size_t len,
		       bool first, bool may_start)
{
	uint64_t want = ch->next_seq;
	json_t *rec = NULL;
	unsigned bad = wd_trace_chain_next(ch, line, len, &rec);
	if (bad & WD_CHAIN_FRAME) {
		vproblem(v, row_seq, "frame",
			 "bad framing or checksum (line of %zu bytes)", len);
		return;
	}
	int64_t seq = json_integer_value(json_object_get(rec, "seq"));
	const char *prev = json_string_value(json_object_get(rec, "prev"));
	const char *type = json_string_value(json_object_get(rec, "type"));
	if (type && !strcmp(type, "gc")) {
		const char *lh =
		    json_string_value(json_object_get(rec, "last_hash"));
		json_t *ls = json_object_get(rec, "last_seq");
		if (lh && json_is_integer(ls))
			json_object_set(v->gc_starts, lh, ls);
	}
	if (seq != row_seq)
		vproblem(v, row_seq, "row",
			 "the row of seq %lld holds the record of seq %lld",
			 (long long)row_seq, (long long)seq);
	if (first && may_start && (bad & WD_CHAIN_PREV) && seq > 1) {
		v->start_seq = seq;
		snprintf(v->start_prev, sizeof(v->start_prev), "%s",
			 prev ? prev : "");
		bad &= ~(WD_CHAIN_PREV | WD_CHAIN_SEQ);
	}
	if (bad & WD_CHAIN_PREV)
		vproblem(v, seq, "chain",
			 "prev does not match the hash of the previous record");
	if (bad & WD_CHAIN_SEQ)
		vproblem(v, seq, "seq", "seq %lld where %llu was expected",
			 (long long)seq, (unsigned long long)want);
	json_decref(rec);
}

static int q(PGconn *c, const char *sql, int n, const char **pv, PGresult **out,
	     struct wd_err *err)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_COMMAND_OK)
		return fl_pg_err(r, c, "fleet verify", err);
	*out = r;
	return 0;
}

/* Walk node's lines with seq in (lo, hi]; the chain starts as ch says.
 * Fills the node's summary. */
static int walk(PGconn *c, struct vnode *v, int64_t lo, int64_t hi,
		struct wd_trace_chain *ch, bool may_start, json_t *summary,
		struct wd_err *err)
{
	int64_t after = lo, n = 0, first = -1;
	for (;;) {
		char a[24], h[24], lim[16];
		snprintf(a, sizeof(a), "%lld", (long long)after);
		snprintf(h, sizeof(h), "%lld", (long long)hi);
		snprintf(lim, sizeof(lim), "%d", VERIFY_PAGE);
		const char *pv[4] = {v->node, a, h, lim};
		PGresult *r;
		int rc = q(c,
			   "SELECT seq, line FROM warden.trace_lines WHERE "
			   "node_id = $1 AND seq > $2::bigint AND seq <= "
			   "$3::bigint ORDER BY seq, day LIMIT $4::integer",
			   4, pv, &r, err);
		if (rc)
			return rc;
		int rows = PQntuples(r);
		for (int i = 0; i < rows; i++) {
			int64_t seq = strtoll(PQgetvalue(r, i, 0), NULL, 10);
			check_line(v, ch, seq, PQgetvalue(r, i, 1),
				   (size_t)PQgetlength(r, i, 1), n == 0,
				   may_start);
			if (first < 0)
				first = seq;
			n++;
			/* a seq twice (two days): the next page starts
			 * after it, the second copy was just checked */
			after = seq;
		}
		PQclear(r);
		if (rows < VERIFY_PAGE)
			break;
	}
	if (v->start_seq) {
		json_t *ls = json_object_get(v->gc_starts, v->start_prev);
		if (!ls || json_integer_value(ls) + 1 != v->start_seq)
			vproblem(v, v->start_seq, "chain",
				 "the shipped chain starts at seq %lld after a "
				 "record no gc record names as removed",
				 (long long)v->start_seq);
	}
	if (after < hi)
		vproblem(v, hi, "missing",
			 "lines after seq %lld up to %lld (shipped, says the "
			 "node's cursor) are missing",
			 (long long)after, (long long)hi);
	json_object_set_new(summary, "lines", json_integer(n));
	json_object_set_new(summary, "first_seq",
			    first < 0 ? json_null() : json_integer(first));
	json_object_set_new(summary, "last_seq",
			    n ? json_integer(after) : json_null());
	return 0;
}

/* Lines past the node's cursor: none was shipped (the cursor moves in
 * their transaction), so something else wrote them. */
static int beyond_cursor(PGconn *c, struct vnode *v, int64_t hi,
			 struct wd_err *err)
{
	char h[24];
	snprintf(h, sizeof(h), "%lld", (long long)hi);
	const char *pv[2] = {v->node, h};
	PGresult *r;
	int rc = q(c,
		   "SELECT count(*), min(seq) FROM warden.trace_lines WHERE "
		   "node_id = $1 AND seq > $2::bigint",
		   2, pv, &r, err);
	if (rc)
		return rc;
	long long n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	if (n)
		vproblem(v, strtoll(PQgetvalue(r, 0, 1), NULL, 10), "extra",
			 "%lld line(s) after seq %lld, past the node's cursor",
			 n, (long long)hi);
	PQclear(r);
	return 0;
}

/* Each node's row: [node, lo (exclusive), hi, prev of lo+1 or "" (zeros
 * when lo is 0, any when not known), may_start]. */
static int targets(PGconn *c, const char *run, PGresult **out,
		   struct wd_err *err)
{
	if (run) {
		const char *pv[1] = {run};
		/* the line before the run's first is read too (its hash is
		 * the first one's prev); its own prev is not checked */
		return q(c,
			 "SELECT node_id, greatest(min(seq) - 2, 0), "
			 "max(seq), CASE WHEN min(seq) <= 1 THEN '' ELSE '!' "
			 "END, false FROM warden.trace_lines WHERE run_id = $1 "
			 "GROUP BY node_id ORDER BY node_id",
			 1, pv, out, err);
	}
	return q(c,
		 "SELECT n.node_id, coalesce(g.last_seq, 0), coalesce(s.seq, "
		 "g.last_seq, 0), coalesce(g.last_hash, ''), g.node_id IS "
		 "NULL FROM (SELECT node_id FROM warden.trace_ship UNION "
		 "SELECT node_id FROM warden.trace_gc) n LEFT JOIN "
		 "warden.trace_ship s ON s.node_id = n.node_id LEFT JOIN "
		 "warden.trace_gc g ON g.node_id = n.node_id ORDER BY 1",
		 0, NULL, out, err);
}

json_t *wd_fleet_trace_verify(struct wd_fleet *f, const struct wd_caller *c,
			      const char *run, struct wd_err *err)
{
	json_t *sc = wd_rt_read_scope(f->rt, c);
	bool all = json_is_true(json_object_get(sc, "all"));
	json_decref(sc);
	if (!all) {
		wd_err_set(err, -EACCES,
			   "fleet verify reads every node's trace: root and "
			   "the auditors group only");
		errno = EACCES;
		return NULL;
	}
	PGconn *db = fl_connect(f, 0);
	PGresult *r = NULL, *t = NULL;
	json_t *nodes = json_array(), *problems = json_array();
	size_t n_problems = 0;
	int rc = PQstatus(db) == CONNECTION_OK
		     ? 0
		     : fl_pg_err(NULL, db, "fleet database unreachable", err);
	if (!rc)
		rc = q(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0,
		       NULL, &r, err);
	if (!rc) {
		PQclear(r);
		rc = targets(db, run, &t, err);
	}
	for (int i = 0; !rc && i < PQntuples(t); i++) {
		struct vnode v = {.node = PQgetvalue(t, i, 0),
				  .problems = problems,
				  .gc_starts = json_object()};
		int64_t lo = strtoll(PQgetvalue(t, i, 1), NULL, 10);
		int64_t hi = strtoll(PQgetvalue(t, i, 2), NULL, 10);
		const char *prev = PQgetvalue(t, i, 3);
		struct wd_trace_chain ch;
		wd_trace_chain_init(&ch);
		ch.next_seq = (uint64_t)lo + 1;
		if (!strcmp(prev, "!"))
			memcpy(ch.prev, "!", 2);
		else if (*prev) /* after the days gc dropped: "sha256:<hex>" */
			snprintf(ch.prev, sizeof(ch.prev), "%s",
				 strncmp(prev, "sha256:", 7) ? prev : prev + 7);
		json_t *s = json_pack("{s:s, s:I}", "node", v.node, "shipped",
				      (json_int_t)hi);
		if (*prev && strcmp(prev, "!"))
			json_object_set_new(s, "starts_after",
					    json_integer(lo));
		rc = walk(db, &v, lo, hi, &ch, *PQgetvalue(t, i, 4) == 't', s,
			  err);
		if (!rc && !run)
			rc = beyond_cursor(db, &v, hi, err);
		json_object_set_new(s, "problems",
				    json_integer((json_int_t)v.n_problems));
		n_problems += v.n_problems;
		json_array_append_new(nodes, s);
		json_decref(v.gc_starts);
	}
	if (!rc && run && !PQntuples(t)) {
		rc = wd_err_set(err, -ENOENT,
				"no shipped line of run %s in the fleet", run);
	}
	PQclear(t);
	PQfinish(db);
	if (rc) {
		json_decref(nodes);
		json_decref(problems);
		errno = rc == -ENOENT ? ENOENT : EAGAIN;
		return NULL;
	}
	json_t *o = json_pack("{s:b, s:o, s:I, s:o}", "ok", n_problems == 0,
			      "nodes", nodes, "problem_count",
			      (json_int_t)n_problems, "problems", problems);
	if (run)
		json_object_set_new(o, "run", json_string(run));
	return o;
}
