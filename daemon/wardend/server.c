#include "wardend/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "api/request.h"
#include "common/log.h"
#include "events/stream.h"
#include "fleet/fleet.h"
#include "trace/trace.h"
#include "wardend/conn.h"
#include "wardend/trace_api.h"

#define BODY_LIMIT (1u << 20)
/* A parked run stream is looked at this often (the latency a follower
 * sees for a new step: the runtime offers no wake-up to wait on from
 * outside; events wake the pump at once, see events_waiter), and every
 * parked stream is written to at least every HEARTBEAT_NS
 * (keep-alive: a follower of a quiet run is not an idle connection, and a
 * vanished one is found by the failing write). */
#define PUMP_TICK_MS 20
#define HEARTBEAT_NS (10ull * 1000000000ull)

struct stream_cb;

struct wd_server {
	struct wd_rt *rt;
	struct wd_fleet *fleet; /* NULL: one node */
	bool stopping; /* ends open streams so MHD_stop_daemon can join */
	struct MHD_Daemon *d, *metrics;
	struct wd_gate *mgate; /* the TCP listener's front door */
	struct wd_gate *gate;
	struct wd_api_limits lim;
	char path[108];
	/* parked streams (suspended connections waiting for data) */
	pthread_mutex_t pmu;
	pthread_cond_t pcond;
	pthread_t pump, waiter;
	bool pump_running, waiter_running, pump_stop;
	struct stream_cb *parked;
	unsigned parked_events; /* parked streams of /v1/events */
};

/* Per-request state across MHD's access-handler calls. */
struct req_state {
	struct wd_buf body;
	bool too_big;
};

/* unavailable (may be NULL): what the answer lacks (a fleet node whose
 * database is away answers for itself), in a Warden-Unavailable header
 * that the CLI prints (api/client.h) -- never silently partial */
static enum MHD_Result send_json_partial(struct MHD_Connection *con, int status,
					 json_t *o, const char *unavailable)
{
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		text = wd_strdup("{\"error\":\"internal\"}");
	size_t n = strlen(text);
	char *full = wd_realloc(text, n + 2);
	full[n] = '\n';
	full[n + 1] = 0;
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(n + 1, full, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (unavailable) {
		/* one line of printable ASCII: a header value */
		char h[512];
		size_t i = 0;
		for (; unavailable[i] && i < sizeof(h) - 1; i++)
			h[i] = unavailable[i] >= 0x20 && unavailable[i] < 0x7f
				   ? unavailable[i]
				   : ' ';
		h[i] = 0;
		MHD_add_response_header(r, "Warden-Unavailable", h);
	}
	enum MHD_Result ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *con, int status,
				 json_t *o)
{
	return send_json_partial(con, status, o, NULL);
}

static enum MHD_Result send_err(struct MHD_Connection *con, int status,
				const char *msg)
{
	return send_json(con, status, json_pack("{s:s}", "error", msg));
}

int wd_http_status(int rc)
{
	switch (rc) {
	case -ENOENT:
		return 404;
	case -EACCES:
	case -EPERM:
		return 403;
	case -EINVAL:
		return 400;
	case -EALREADY:
		return 409;
	case -EBUSY:
	case -EAGAIN:
	case -EIO:
	case -ENOSPC:
		/* busy, or the store could not write (a read that is not
		 * recorded is not answered): try again later */
		return 503;
	}
	return 500;
}

static const char *query_get(void *arg, const char *key)
{
	return MHD_lookup_connection_value(arg, MHD_GET_ARGUMENT_KIND, key);
}

struct key_check {
	enum wd_api_ep ep;
	bool bad;
	char key[64]; /* the first key the endpoint does not read, printable */
};

static enum MHD_Result key_check(void *cls, enum MHD_ValueKind kind,
				 const char *key, const char *value)
{
	struct key_check *k = cls;
	(void)kind;
	(void)value;
	if (wd_api_query_key_ok(k->ep, key))
		return MHD_YES;
	/* "?&x=1" has an empty key: refused as well, and named '' */
	k->bad = true;
	size_t i = 0;
	for (; key && key[i] && i + 1 < sizeof(k->key); i++)
		k->key[i] = key[i] >= 0x20 && key[i] < 0x7f ? key[i] : '?';
	k->key[i] = 0;
	return MHD_NO;
}

/* ---- streaming (runs and events) ----
 *
 * MHD runs a few epoll workers, so a stream's reader must never wait: it
 * hands MHD what is there, and when nothing is, suspends its connection
 * and parks the stream; the pump thread looks at parked streams every
 * PUMP_TICK_MS and resumes each one that has data, has ended, or is due a
 * keep-alive line (an empty line on a run stream, which clients skip; the
 * loss line on the events stream, see events/stream.h). A suspended
 * connection holds no worker and is exempt from MHD's idle timeout. */

struct stream_cb {
	struct wd_server *srv;
	struct MHD_Connection *con;
	struct wd_rt_stream *rs;
	struct wd_stream *ev; /* events endpoint */
	struct wd_stream_cursor cur;
	struct wd_caller who; /* the events reader (its filter) */
	/* its last decision: a burst of denials is one run's, judged once
	 * instead of under the runtime's lock per event */
	char seen_run[40];
	bool seen_ok;
	uint64_t gen; /* the policy generation seen_ok was judged under */
	bool follow;
	struct wd_buf buf;
	size_t off;
	bool done, failed;
	bool parked; /* under srv->pmu */
	struct stream_cb *pprev, *pnext;
	uint64_t last_ns; /* last bytes handed to MHD */
};

static bool srv_stopping(struct wd_server *srv)
{
	return __atomic_load_n(&srv->stopping, __ATOMIC_ACQUIRE);
}

static bool event_visible(const struct wd_event *ev, void *arg)
{
	struct stream_cb *s = arg;
	/* a reload (users.yaml changed) may have taken the reader's access
	 * away: the run's next event is judged again */
	uint64_t gen = wd_rt_policy_gen(s->srv->rt);
	if (gen != s->gen) {
		s->gen = gen;
		s->seen_run[0] = 0;
	}
	if (ev->run_id[0] && !strcmp(ev->run_id, s->seen_run))
		return s->seen_ok;
	bool ok = wd_rt_event_visible(s->srv->rt, &s->who, ev);
	/* a full run's denial target is payload: handed out only once the
	 * read is recorded in the run (wd_rt_note_event_read); else the
	 * run's events are left out and the stream says so, once per run
	 * (this callback appends to the buffer wd_stream_render fills, so
	 * the line sits where the events would have been) */
	struct wd_err err = {0};
	if (ok && wd_rt_note_event_read(s->srv->rt, &s->who, ev, &err)) {
		ok = false;
		json_t *o = json_pack("{s:s,s:s,s:s}", "type", "withheld",
				      "run_id", ev->run_id, "error", err.msg);
		char *line = json_dumps(o, JSON_COMPACT);
		if (line) {
			wd_buf_append(&s->buf, line, strlen(line));
			wd_buf_append(&s->buf, "\n", 1);
		}
		free(line);
		json_decref(o);
	}
	if (ev->run_id[0]) {
		wd_strlcpy(s->seen_run, ev->run_id, sizeof(s->seen_run));
		s->seen_ok = ok;
	}
	return ok;
}

/* Append what is available now, without waiting. */
static void stream_fill(struct stream_cb *s, bool keepalive)
{
	if (s->rs) {
		int rc = wd_rt_stream_next(s->rs, 0, &s->buf);
		if (rc <= 0)
			s->done = true;
		if (rc < 0)
			s->failed = true;
		if (keepalive && !s->buf.len && !s->done)
			wd_buf_append(&s->buf, "\n", 1);
		return;
	}
	if (keepalive)
		s->cur.last_line_ns = 0; /* makes render write its loss line */
	int n = wd_stream_render(s->ev, &s->cur, &s->buf, 256, 0);
	/* without follow: what is held now, then the end; with follow:
	 * until the stream shuts down */
	if (n < 0 || (!s->follow && n == 0))
		s->done = true;
}

static void park_unlink_locked(struct wd_server *srv, struct stream_cb *s)
{
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		srv->parked = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	s->pprev = s->pnext = NULL;
	s->parked = false;
	if (s->ev)
		srv->parked_events--;
}

/* From the reader, on MHD's worker: suspend (the only place MHD allows
 * it) and park. False when stopping: the stream ends instead. */
static bool stream_park(struct stream_cb *s)
{
	struct wd_server *srv = s->srv;
	pthread_mutex_lock(&srv->pmu);
	if (srv->pump_stop) {
		pthread_mutex_unlock(&srv->pmu);
		return false;
	}
	/* suspended before it is visible to the pump, so the pump's resume
	 * always follows this suspend */
	MHD_suspend_connection(s->con);
	s->parked = true;
	s->pprev = NULL;
	s->pnext = srv->parked;
	if (srv->parked)
		srv->parked->pprev = s;
	srv->parked = s;
	if (s->ev)
		srv->parked_events++;
	pthread_cond_signal(&srv->pcond); /* the pump may sleep untimed */
	pthread_mutex_unlock(&srv->pmu);
	return true;
}

/* Wakes the pump as soon as an event is published, so a parked events
 * follower sees it without waiting for a tick (denial -> `warden events
 * --follow` latency, tests/bench/bench_events_follow.sh). Its cursor only
 * waits: it is set to the newest event after every wake-up, so it is never
 * overrun and never adds to the stream's overrun count. */
static void *events_waiter(void *arg)
{
	struct wd_server *srv = arg;
	struct wd_stream *ev = wd_rt_events(srv->rt);
	struct wd_stream_cursor c;
	struct wd_stream_stats st;
	struct wd_stream_entry e;
	wd_stream_stats(ev, &st);
	wd_stream_cursor_init(&c, st.published);
	while (!srv_stopping(srv)) {
		int n = wd_stream_read(ev, &c, &e, 1, 200);
		if (n < 0)
			break; /* the stream is shut down */
		if (n == 0)
			continue;
		pthread_mutex_lock(&srv->pmu);
		if (srv->parked_events)
			pthread_cond_signal(&srv->pcond);
		pthread_mutex_unlock(&srv->pmu);
		wd_stream_stats(ev, &st);
		wd_stream_cursor_init(&c, st.published);
	}
	return NULL;
}

static void *pump_main(void *arg)
{
	struct wd_server *srv = arg;
	pthread_mutex_lock(&srv->pmu);
	while (!srv->pump_stop) {
		uint64_t now = wd_now_ns();
		for (struct stream_cb *s = srv->parked, *nx; s; s = nx) {
			nx = s->pnext;
			/* the connection is suspended: nothing else touches s
			 */
			stream_fill(s, now - s->last_ns >= HEARTBEAT_NS);
			if (s->buf.len > s->off || s->done) {
				park_unlink_locked(srv, s);
				MHD_resume_connection(s->con);
			}
		}
		if (!srv->parked) { /* woken by stream_park or the stop */
			pthread_cond_wait(&srv->pcond, &srv->pmu);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += PUMP_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&srv->pcond, &srv->pmu, &ts);
	}
	/* MHD_stop_daemon must find no suspended connection */
	while (srv->parked) {
		struct stream_cb *s = srv->parked;
		park_unlink_locked(srv, s);
		MHD_resume_connection(s->con);
	}
	pthread_mutex_unlock(&srv->pmu);
	return NULL;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream_cb *s = cls;
	if (s->off >= s->buf.len) {
		s->buf.len = 0;
		s->off = 0;
		if (!s->done && !srv_stopping(s->srv))
			stream_fill(s, false);
		if (!s->buf.len) {
			if (s->failed)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (s->done || srv_stopping(s->srv) || !stream_park(s))
				return MHD_CONTENT_READER_END_OF_STREAM;
			return 0; /* suspended; the pump resumes it */
		}
	}
	size_t n = WD_MIN(max, s->buf.len - s->off);
	memcpy(out, s->buf.data + s->off, n);
	s->off += n;
	s->last_ns = wd_now_ns();
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream_cb *s = cls;
	pthread_mutex_lock(&s->srv->pmu);
	if (s->parked)
		park_unlink_locked(s->srv, s);
	pthread_mutex_unlock(&s->srv->pmu);
	if (s->rs)
		wd_rt_stream_close(s->rs);
	wd_buf_free(&s->buf);
	free(s);
}

static enum MHD_Result send_stream(struct MHD_Connection *con,
				   struct stream_cb *s)
{
	s->con = con;
	s->last_ns = wd_now_ns();
	struct MHD_Response *r = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 16384, stream_reader, s, stream_free);
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	enum MHD_Result ret = MHD_queue_response(con, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- health and metrics ---- */

/* 503 with the reason while the trace store cannot write (wd_rt_health:
 * the same reading /v1/status and the warden_trace_healthy gauge give):
 * every run is refused then, so a liveness or readiness probe must see
 * it; 200 again once the store's probe found it writable. */
static enum MHD_Result healthz(struct wd_server *srv,
			       struct MHD_Connection *con)
{
	char why[256];
	if (wd_rt_health(srv->rt, why, sizeof(why)))
		return send_json(con, 503,
				 json_pack("{s:s,s:s}", "status", "unhealthy",
					   "reason", why));
	return send_json(con, 200, json_pack("{s:s}", "status", "ok"));
}

static char *metrics_text(struct wd_server *srv)
{
	cleanup_free char *m = wd_rt_metrics(srv->rt);
	struct wd_gate_stats st = {0};
	if (srv->gate)
		wd_gate_stats(srv->gate, &st);
	struct wd_buf b = {0};
	wd_buf_printf(
	    &b,
	    "%s"
	    "# HELP warden_api_connections Connections open on the API "
	    "socket.\n"
	    "# TYPE warden_api_connections gauge\n"
	    "warden_api_connections %u\n"
	    "# HELP warden_api_connections_max Connection limits "
	    "(daemon.yaml api:).\n"
	    "# TYPE warden_api_connections_max gauge\n"
	    "warden_api_connections_max{scope=\"total\"} %u\n"
	    "warden_api_connections_max{scope=\"per_uid\"} %u\n"
	    "# HELP warden_api_connections_refused_total Connections answered "
	    "503 at accept.\n"
	    "# TYPE warden_api_connections_refused_total counter\n"
	    "warden_api_connections_refused_total{reason=\"per_uid\"} "
	    "%llu\n"
	    "warden_api_connections_refused_total{reason=\"total\"} %llu\n"
	    "# HELP warden_api_request_timeouts_total Connections closed for "
	    "not sending a whole request in time.\n"
	    "# TYPE warden_api_request_timeouts_total counter\n"
	    "warden_api_request_timeouts_total %llu\n",
	    m ? m : "", st.open, srv->lim.max_connections,
	    srv->lim.max_connections_per_uid,
	    (unsigned long long)st.refused_uid,
	    (unsigned long long)st.refused_total,
	    (unsigned long long)st.request_timeouts);
	if (srv->fleet)
		wd_fleet_metrics(srv->fleet, &b);
	return b.data ? b.data : wd_strdup("");
}

/* ---- dispatch ---- */

static enum MHD_Result dispatch(struct wd_server *srv,
				struct MHD_Connection *con,
				const struct wd_caller *who,
				struct wd_api_req *q)
{
	struct wd_err err = {0};
	char id[64];
	json_t *o;
	int rc;
	switch (q->ep) {
	case WD_EP_HEALTHZ:
		return healthz(srv, con);
	case WD_EP_METRICS: {
		char *m = metrics_text(srv);
		/* the unix socket's callers see their own teams' series
		 * (scope.c); the TCP listener (uid -1) is the operator's */
		if (who->uid != (uid_t)-1) {
			char *s = wd_rt_metrics_for(srv->rt, who, m);
			free(m);
			m = s;
		}
		struct MHD_Response *r = MHD_create_response_from_buffer(
		    strlen(m), m, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(r, "Content-Type",
					"text/plain; version=0.0.4");
		enum MHD_Result ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	case WD_EP_RUN_CREATE:
		if (srv->fleet) {
			/* queued: whichever node has room runs it; the
			 * client follows /v1/fleet/runs/ID */
			rc = wd_fleet_submit(srv->fleet, who, q->agent, q->task,
					     id, &err);
			if (rc < 0)
				return send_err(con, wd_http_status(rc),
						err.msg);
			if (rc == 0)
				return send_json(
				    con, 201,
				    json_pack("{s:s,s:b,s:s}", "run_id", id,
					      "fleet", 1, "follow",
					      "/v1/fleet/runs/ID"));
			/* 1: run here: a hash_only agent's run under the
			 * id its slot here was taken for, or a run while the
			 * database is down (when_down: run_here) */
		}
		char slot[64];
		snprintf(slot, sizeof(slot), "%s", srv->fleet ? id : "");
		rc = wd_rt_run_create_id(srv->rt, who, q->agent, q->task,
					 slot[0] ? slot : NULL, id, &err);
		if (rc && slot[0])
			wd_fleet_local_release(srv->fleet, slot);
		if (rc)
			return send_err(con, wd_http_status(rc), err.msg);
		return send_json(con, 201,
				 json_pack("{s:s,s:s}", "run_id", id, "stream",
					   "/v1/runs/ID/stream"));
	case WD_EP_FLEET_RUN_GET:
	case WD_EP_FLEET_RUNS:
	case WD_EP_FLEET_TRACE_RUNS:
	case WD_EP_FLEET_TRACE_RUN:
	case WD_EP_FLEET_COST:
	case WD_EP_FLEET_TRACE_VERIFY:
	case WD_EP_FLEET_TRACE_GC:
	case WD_EP_FLEET_NODES: {
		int st = wd_fleet_api(srv->fleet, who, q, &o);
		return send_json(con, st, o);
	}
	case WD_EP_RUN_LIST:
		return send_json(con, 200, wd_rt_runs_list(srv->rt, who));
	case WD_EP_RUN_GET:
		o = wd_rt_run_info(srv->rt, who, q->id, &err);
		if (!o)
			return send_err(
			    con, errno == ENOENT ? 404 : wd_http_status(-errno),
			    errno == ENOENT ? "no such run" : err.msg);
		return send_json(con, 200, o);
	case WD_EP_RUN_STREAM: {
		struct wd_rt_stream *rs =
		    wd_rt_stream_open(srv->rt, who, q->id, q->since_seq, &err);
		if (!rs)
			return send_err(con, wd_http_status(-errno), err.msg);
		struct stream_cb *s = wd_calloc(1, sizeof(*s));
		s->rs = rs;
		s->srv = srv;
		return send_stream(con, s);
	}
	case WD_EP_APPROVAL_LIST:
		o = wd_approvals_api(srv->rt, srv->fleet, who, &err);
		return send_json_partial(con, 200, o,
					 err.msg[0] ? err.msg : NULL);
	case WD_EP_APPROVAL_DECIDE:
		rc = wd_rt_approval_decide(srv->rt, who, q->id, q->approve,
					   q->reason, &err);
		if (rc == -ENOENT && srv->fleet) {
			/* held by another node: it applies the decision */
			memset(&err, 0, sizeof(err));
			rc = wd_fleet_approval_decide(srv->fleet, who, q->id,
						      q->approve, q->reason,
						      &err);
		}
		if (rc)
			return send_err(con, wd_http_status(rc), err.msg);
		return send_json(con, 200,
				 json_pack("{s:s,s:s}", "approval", q->id,
					   "decision",
					   q->approve ? "approved" : "denied"));
	case WD_EP_COST:
		rc = wd_cost_api(srv->rt, srv->fleet, who, q, &o);
		return send_json(con, rc, o);
	case WD_EP_EVENTS: {
		struct wd_stream *ev = wd_rt_events(srv->rt);
		if (!ev)
			return send_err(con, 503, "no event stream");
		struct stream_cb *s = wd_calloc(1, sizeof(*s));
		s->ev = ev;
		s->srv = srv;
		s->follow = q->follow;
		wd_stream_cursor_init(&s->cur, q->since_seq);
		/* a denial names its run, tool, team and target: shown to
		 * those who may read that run (root and auditors: all) */
		s->who = *who;
		s->cur.keep = event_visible;
		s->cur.keep_arg = s;
		return send_stream(con, s);
	}
	case WD_EP_POLICY_RELOAD:
		if (who->uid != 0 && who->uid != geteuid())
			return send_err(con, 403,
					"only root may reload the policy");
		rc = wd_rt_reload(srv->rt, &err);
		if (rc)
			return send_err(con, 422, err.msg);
		return send_json(con, 200,
				 json_pack("{s:s}", "status", "reloaded"));
	case WD_EP_STATUS:
		o = wd_rt_status_for(srv->rt, who);
		if (srv->fleet) /* node-wide: names no team */
			json_object_set_new(o, "fleet",
					    wd_fleet_status(srv->fleet));
		return send_json(con, 200, o);
	case WD_EP_RUN_REPLAY: {
		uint64_t pus = 0;
		rc = wd_rt_replay_create(srv->rt, who, q->id, q->replay, id,
					 &pus, &err);
		if (rc)
			return send_err(
			    con, rc == -EBADMSG ? 422 : wd_http_status(rc),
			    err.msg);
		return send_json(con, 201,
				 json_pack("{s:s,s:s,s:I}", "run_id", id,
					   "replay_of", q->id, "prefix_us",
					   (json_int_t)pus));
	}
	case WD_EP_RUN_TRACE:
	case WD_EP_RUN_PAYLOAD:
	case WD_EP_TRACE_RUNS:
	case WD_EP_TRACE_RECORDS:
		rc = wd_trace_api(srv->rt, srv->fleet, who, q, &o);
		return send_json(con, rc, o);
	}
	return send_err(con, 404, "no such endpoint");
}

struct listener {
	struct wd_server *srv;
	bool metrics_only; /* the TCP listener: /metrics and /healthz */
};

static enum MHD_Result handle(void *cls, struct MHD_Connection *con,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct listener *l = cls;
	struct req_state *st = *con_cls;
	if (!st) {
		st = wd_calloc(1, sizeof(*st));
		*con_cls = st;
		return MHD_YES;
	}
	if (*upload_size) {
		if (st->body.len + *upload_size > BODY_LIMIT)
			st->too_big = true;
		else
			wd_buf_append(&st->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (st->too_big)
		return send_err(con, 413, "request body too large");

	wd_gate_request_begin(con);
	struct wd_api_req q;
	struct wd_err err = {0};
	int rc = wd_api_parse(method, url, query_get, con, st->body.data,
			      st->body.len, &q, &err);
	if (rc)
		return send_err(con, rc >= 400 && rc < 600 ? rc : 400, err.msg);
	struct key_check kc = {.ep = q.ep};
	/* the metrics listener's own refusal first: it names no API */
	if (!l->metrics_only)
		MHD_get_connection_values(con, MHD_GET_ARGUMENT_KIND, key_check,
					  &kc);
	if (kc.bad) {
		const char *keys = wd_api_query_keys(q.ep);
		wd_err_set(&err, 400,
			   "query parameter '%s': this endpoint does not read "
			   "it (it reads %s%s)",
			   kc.key, *keys ? "only: " : "none", keys);
		wd_api_req_free(&q);
		return send_err(con, 400, err.msg);
	}
	struct wd_caller who;
	if (l->metrics_only) {
		if (q.ep != WD_EP_METRICS && q.ep != WD_EP_HEALTHZ) {
			wd_api_req_free(&q);
			return send_err(con, 403,
					"only /metrics and /healthz here");
		}
		wd_caller_from_uid((uid_t)-1, (gid_t)-1, &who);
	} else {
		/* Identity: the peer's credentials as the kernel recorded
		 * them at connect(); nothing in the request can change who
		 * the caller is. */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    con, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || wd_caller_from_socket(ci->connect_fd, &who)) {
			wd_api_req_free(&q);
			return send_err(con, 403, "cannot identify caller");
		}
	}
	enum MHD_Result ret = dispatch(l->srv, con, &who, &q);
	wd_api_req_free(&q);
	wd_gate_request_answered(con);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	struct req_state *st = *con_cls;
	if (st) {
		wd_buf_free(&st->body);
		free(st);
		*con_cls = NULL;
	}
	wd_gate_request_done(con);
}

static struct listener unix_listener, tcp_listener;

/* MHD's messages into our log. Handed a socket by MHD_add_connection,
 * MHD cannot know it is AF_UNIX and tries TCP_NODELAY/TCP_CORK on every
 * response; Linux answers EOPNOTSUPP, which 0.9.75 does not take as "not
 * TCP" and reports (three lines per response). There is no Nagle or cork
 * on a unix socket to miss, so those are dropped here. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (cls == &unix_listener &&
	    (strstr(buf, "TCP_NODELAY") || strstr(buf, "TCP_CORK") ||
	     strstr(buf, "Failed to push the data")))
		return;
	size_t n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	wd_warn("http: %s", buf);
}

static void wd_server_free(struct wd_server *s);

int wd_server_start(struct wd_rt *rt, struct wd_fleet *fleet,
		    const char *socket_path, const struct wd_api_limits *lim,
		    struct wd_server **out, struct wd_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (wd_strlcpy(sa.sun_path, socket_path, sizeof(sa.sun_path)))
		return wd_err_set(err, -ENAMETOOLONG,
				  "socket path too long: %s", socket_path);
	cleanup_free char *dir = wd_strdup(socket_path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		wd_mkdir_p(dir, 0755);
	}
	cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return wd_err_set(err, -errno, "socket: %s", strerror(errno));
	/* a stale socket from a killed daemon: replace it only if nobody
	 * answers on it (two daemons on one socket would split the runs) */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return wd_err_set(err, -EADDRINUSE,
				  "another wardend is serving %s", socket_path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return wd_err_set(err, -errno, "socket: %s", strerror(errno));
	unlink(socket_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return wd_err_set(err, -errno, "bind %s: %s", socket_path,
				  strerror(errno));
	/* Everyone may connect; authorisation is per request from the
	 * peer's uid (SO_PEERCRED). */
	if (chmod(socket_path, 0666) < 0)
		return wd_err_set(err, -errno, "chmod %s: %s", socket_path,
				  strerror(errno));
	struct wd_server *s = wd_calloc(1, sizeof(*s));
	s->rt = rt;
	s->fleet = fleet;
	s->lim = *lim;
	pthread_mutex_init(&s->pmu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->pcond, &ca);
	pthread_condattr_destroy(&ca);
	wd_strlcpy(s->path, socket_path, sizeof(s->path));
	int rc = wd_gate_new(fd, lim, &s->gate, err);
	if (rc) {
		wd_server_free(s);
		unlink(socket_path);
		return rc;
	}
	fd = -1; /* the gate owns it now */
	unix_listener.srv = s;
	/* epoll workers, no listening socket of MHD's own: the gate accepts
	 * (conn.h). MHD's own limit sits above the gate's so MHD never
	 * drops a connection the gate counted. */
	s->d = MHD_start_daemon(
	    MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
		MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handle, &unix_listener, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, &unix_listener, MHD_OPTION_THREAD_POOL_SIZE, lim->threads,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, wd_gate_notify, s->gate,
	    MHD_OPTION_CONNECTION_LIMIT,
	    lim->max_connections * 2 + lim->threads * 2,
	    MHD_OPTION_CONNECTION_TIMEOUT, lim->idle_timeout_s, MHD_OPTION_END);
	if (!s->d) {
		wd_server_free(s);
		unlink(socket_path);
		return wd_err_set(err, -EIO, "MHD_start_daemon failed on %s",
				  socket_path);
	}
	rc = pthread_create(&s->pump, NULL, pump_main, s);
	if (rc) {
		wd_server_free(s);
		unlink(socket_path);
		return wd_err_set(err, -rc, "stream thread: %s", strerror(rc));
	}
	s->pump_running = true;
	if (wd_rt_events(rt)) {
		rc = pthread_create(&s->waiter, NULL, events_waiter, s);
		if (rc) {
			wd_server_free(s);
			unlink(socket_path);
			return wd_err_set(err, -rc, "events thread: %s",
					  strerror(rc));
		}
		s->waiter_running = true;
	}
	rc = wd_gate_start(s->gate, s->d, err);
	if (rc) {
		wd_server_free(s);
		unlink(socket_path);
		return rc;
	}
	*out = s;
	return 0;
}

/* the TCP listener's limits: a scraper and a probe or two per address */
#define METRICS_PER_ADDR 16u
#define METRICS_MAX_CONN 128u

int wd_metrics_listen(const char *addr, int *fd_out, struct wd_err *err)
{
	*fd_out = -1;
	const char *colon = strrchr(addr, ':');
	if (!colon)
		return wd_err_set(err, -EINVAL,
				  "--metrics wants ADDR:PORT (IPv4, or :PORT "
				  "for loopback), not '%s'",
				  addr);
	/* the port whole, 1..65535: a typo must not become port 0 (a
	 * random port no scraper knows) or a port modulo 65536 */
	unsigned long long port = 0;
	if (wd_parse_uint(colon + 1, 1, 65535, &port))
		return wd_err_set(err, -EINVAL,
				  "--metrics '%s': the port wants 1..65535",
				  addr);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port)};
	size_t hl = (size_t)(colon - addr);
	char host[INET_ADDRSTRLEN] = "";
	if (hl < sizeof(host))
		memcpy(host, addr, hl);
	if (!hl)
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (hl >= sizeof(host) ||
		 inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return wd_err_set(err, -EINVAL,
				  "--metrics '%s': the address wants IPv4 "
				  "dotted quad (e.g. 127.0.0.1:9464)",
				  addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return wd_err_set(err, -errno, "--metrics: socket: %s",
				  strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* listening at once: with SO_REUSEADDR a bind beside a socket that
	 * is bound but not yet listening succeeds, and the listen fails */
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		return wd_err_set(err, -e, "--metrics: cannot listen on %s: %s",
				  addr, strerror(e));
	}
	*fd_out = fd;
	return 0;
}

int wd_server_start_metrics(struct wd_server *s, int fd, const char *addr,
			    struct wd_err *err)
{
	/* the unix socket's front door, keyed by address: a client holding
	 * idle or slowloris connections is cut at the request deadline and
	 * at METRICS_PER_ADDR, so a probe from another address gets in */
	int rc = wd_gate_new_tcp(fd, &s->lim, METRICS_PER_ADDR,
				 METRICS_MAX_CONN, &s->mgate, err);
	if (rc) {
		close(fd);
		return rc;
	}
	tcp_listener.srv = s;
	tcp_listener.metrics_only = true;
	/* epoll too: the daemon's descriptors pass FD_SETSIZE once the unix
	 * socket holds a thousand connections */
	s->metrics = MHD_start_daemon(
	    MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
		MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handle, &tcp_listener, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, wd_gate_notify, s->mgate,
	    MHD_OPTION_CONNECTION_LIMIT, METRICS_MAX_CONN * 2 + 2,
	    MHD_OPTION_CONNECTION_TIMEOUT, s->lim.idle_timeout_s,
	    MHD_OPTION_END);
	if (!s->metrics)
		return wd_err_set(err, -EIO, "MHD_start_daemon failed on %s",
				  addr);
	return wd_gate_start(s->mgate, s->metrics, err);
}

static void wd_server_free(struct wd_server *s)
{
	if (!s)
		return;
	__atomic_store_n(&s->stopping, true, __ATOMIC_RELEASE);
	wd_gate_stop(s->gate); /* no new connections */
	if (s->pump_running) {
		pthread_mutex_lock(&s->pmu);
		s->pump_stop = true;
		pthread_cond_signal(&s->pcond);
		pthread_mutex_unlock(&s->pmu);
		pthread_join(s->pump, NULL); /* resumes every parked stream */
	}
	if (s->waiter_running)
		pthread_join(s->waiter, NULL); /* sees stopping within 200 ms */
	wd_gate_stop(s->mgate);
	if (s->metrics)
		MHD_stop_daemon(s->metrics);
	wd_gate_free(s->mgate);
	if (s->d)
		MHD_stop_daemon(s->d);
	wd_gate_free(s->gate);
	pthread_cond_destroy(&s->pcond);
	pthread_mutex_destroy(&s->pmu);
	free(s);
}

void wd_server_stop(struct wd_server *s)
{
	if (!s)
		return;
	char path[sizeof(s->path)];
	memcpy(path, s->path, sizeof(path));
	wd_server_free(s);
	unlink(path);
}
