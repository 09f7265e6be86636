#include "wardend/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "api/request.h"
#include "common/log.h"
#include "events/stream.h"

#define BODY_LIMIT (1u << 20)

struct wd_server {
	struct wd_rt *rt;
	bool stopping; /* ends open streams so MHD_stop_daemon can join */
	struct MHD_Daemon *d, *metrics;
	int lfd;
	char path[108];
};

/* Per-request state across MHD's access-handler calls. */
struct req_state {
	struct wd_buf body;
	bool too_big;
};

static enum MHD_Result send_json(struct MHD_Connection *con, int status,
				 json_t *o)
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
	enum MHD_Result ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_err(struct MHD_Connection *con, int status,
				const char *msg)
{
	return send_json(con, status, json_pack("{s:s}", "error", msg));
}

static int errno_status(int rc)
{
	switch (rc) {
	case -ENOENT:
		return 404;
	case -EACCES:
	case -EPERM:
		return 403;
	case -EINVAL:
		return 400;
	case -EBUSY:
	case -EAGAIN:
		return 503;
	case -EALREADY:
		return 409;
	}
	return 500;
}

static const char *query_get(void *arg, const char *key)
{
	return MHD_lookup_connection_value(arg, MHD_GET_ARGUMENT_KIND, key);
}

/* ---- streaming (runs and events) ---- */

struct stream_cb {
	struct wd_server *srv;
	struct wd_rt_stream *rs;
	struct wd_stream *ev; /* events endpoint */
	struct wd_stream_cursor cur;
	bool follow;
	struct wd_buf buf;
	size_t off;
	bool done;
};

static ssize_t stream_reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream_cb *s = cls;
	while (s->off >= s->buf.len) {
		s->buf.len = 0;
		s->off = 0;
		if (s->done ||
		    __atomic_load_n(&s->srv->stopping, __ATOMIC_ACQUIRE))
			return MHD_CONTENT_READER_END_OF_STREAM;
		int rc;
		if (s->rs) {
			rc = wd_rt_stream_next(s->rs, 1000, &s->buf);
		} else {
			int n = wd_stream_render(s->ev, &s->cur, &s->buf, 256,
						 s->follow ? 1000 : 0);
			/* without follow: what is held now, then the end;
			 * with follow: until the stream shuts down */
			rc = n < 0 ? 0 : (!s->follow && n == 0) ? 0 : 1;
		}
		if (rc <= 0)
			s->done = true;
		if (rc < 0 && !s->buf.len)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = WD_MIN(max, s->buf.len - s->off);
	memcpy(out, s->buf.data + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream_cb *s = cls;
	if (s->rs)
		wd_rt_stream_close(s->rs);
	wd_buf_free(&s->buf);
	free(s);
}

static enum MHD_Result send_stream(struct MHD_Connection *con,
				   struct stream_cb *s)
{
	struct MHD_Response *r = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 16384, stream_reader, s, stream_free);
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	enum MHD_Result ret = MHD_queue_response(con, 200, r);
	MHD_destroy_response(r);
	return ret;
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
		return send_json(con, 200, json_pack("{s:s}", "status", "ok"));
	case WD_EP_METRICS: {
		char *m = wd_rt_metrics(srv->rt);
		struct MHD_Response *r = MHD_create_response_from_buffer(
		    strlen(m), m, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(r, "Content-Type",
					"text/plain; version=0.0.4");
		enum MHD_Result ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	case WD_EP_RUN_CREATE:
		rc =
		    wd_rt_run_create(srv->rt, who, q->agent, q->task, id, &err);
		if (rc)
			return send_err(con, errno_status(rc), err.msg);
		return send_json(con, 201,
				 json_pack("{s:s,s:s}", "run_id", id, "stream",
					   "/v1/runs/ID/stream"));
	case WD_EP_RUN_LIST:
		return send_json(con, 200, wd_rt_runs_list(srv->rt));
	case WD_EP_RUN_GET:
		o = wd_rt_run_info(srv->rt, q->id);
		if (!o)
			return send_err(con, 404, "no such run");
		return send_json(con, 200, o);
	case WD_EP_RUN_STREAM: {
		struct wd_rt_stream *rs =
		    wd_rt_stream_open(srv->rt, q->id, q->since_seq, &err);
		if (!rs)
			return send_err(con, errno_status(-errno), err.msg);
		struct stream_cb *s = wd_calloc(1, sizeof(*s));
		s->rs = rs;
		s->srv = srv;
		return send_stream(con, s);
	}
	case WD_EP_APPROVAL_LIST:
		return send_json(con, 200, wd_rt_approvals_list(srv->rt, who));
	case WD_EP_APPROVAL_DECIDE:
		rc = wd_rt_approval_decide(srv->rt, who, q->id, q->approve,
					   q->reason, &err);
		if (rc)
			return send_err(con, errno_status(rc), err.msg);
		return send_json(con, 200,
				 json_pack("{s:s,s:s}", "approval", q->id,
					   "decision",
					   q->approve ? "approved" : "denied"));
	case WD_EP_COST:
		o = wd_rt_cost(srv->rt, q->by, q->since_ns, &err);
		if (!o)
			return send_err(con, 500, err.msg);
		return send_json(con, 200, o);
	case WD_EP_EVENTS: {
		struct wd_stream *ev = wd_rt_events(srv->rt);
		if (!ev)
			return send_err(con, 503, "no event stream");
		struct stream_cb *s = wd_calloc(1, sizeof(*s));
		s->ev = ev;
		s->srv = srv;
		s->follow = q->follow;
		wd_stream_cursor_init(&s->cur, q->since_seq);
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
		return send_json(con, 200, wd_rt_status(srv->rt));
	case WD_EP_RUN_REPLAY: {
		uint64_t pus = 0;
		rc = wd_rt_replay_create(srv->rt, who, q->id, q->replay, id,
					 &pus, &err);
		if (rc)
			return send_err(con,
					rc == -EBADMSG ? 422 : errno_status(rc),
					err.msg);
		return send_json(con, 201,
				 json_pack("{s:s,s:s,s:I}", "run_id", id,
					   "replay_of", q->id, "prefix_us",
					   (json_int_t)pus));
	}
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

	struct wd_api_req q;
	struct wd_err err = {0};
	int rc = wd_api_parse(method, url, query_get, con, st->body.data,
			      st->body.len, &q, &err);
	if (rc)
		return send_err(con, rc >= 400 && rc < 600 ? rc : 400, err.msg);
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
}

static struct listener unix_listener, tcp_listener;

int wd_server_start(struct wd_rt *rt, const char *socket_path,
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
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return wd_err_set(err, -errno, "socket: %s", strerror(errno));
	unlink(socket_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return wd_err_set(err, -errno, "bind %s: %s", socket_path,
				  strerror(errno));
	/* Everyone may connect; authorisation is per request from the
	 * peer's uid (SO_PEERCRED). */
	if (chmod(socket_path, 0666) < 0 || listen(fd, 128) < 0)
		return wd_err_set(err, -errno, "listen %s: %s", socket_path,
				  strerror(errno));
	struct wd_server *s = wd_calloc(1, sizeof(*s));
	s->rt = rt;
	s->lfd = fd;
	wd_strlcpy(s->path, socket_path, sizeof(s->path));
	unix_listener.srv = s;
	s->d = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
		MHD_USE_ERROR_LOG | MHD_USE_ITC,
	    0, NULL, NULL, handle, &unix_listener, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    MHD_OPTION_CONNECTION_LIMIT, 4096u, MHD_OPTION_END);
	if (!s->d) {
		free(s);
		unlink(socket_path);
		return wd_err_set(err, -EIO, "MHD_start_daemon failed on %s",
				  socket_path);
	}
	fd = -1; /* MHD owns it now */
	*out = s;
	return 0;
}

int wd_server_start_metrics(struct wd_server *s, const char *addr,
			    struct wd_err *err)
{
	cleanup_free char *host = wd_strdup(addr);
	char *colon = strrchr(host, ':');
	if (!colon)
		return wd_err_set(err, -EINVAL, "--metrics wants ADDR:PORT");
	*colon = 0;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(atoi(colon + 1))};
	if (!*host)
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return wd_err_set(err, -EINVAL,
				  "--metrics: bad IPv4 address %s", host);
	tcp_listener.srv = s;
	tcp_listener.metrics_only = true;
	s->metrics = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    handle, &tcp_listener, MHD_OPTION_SOCK_ADDR, &sin,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
	if (!s->metrics)
		return wd_err_set(err, -EADDRINUSE, "cannot listen on %s",
				  addr);
	return 0;
}

void wd_server_stop(struct wd_server *s)
{
	if (!s)
		return;
	__atomic_store_n(&s->stopping, true, __ATOMIC_RELEASE);
	if (s->metrics)
		MHD_stop_daemon(s->metrics);
	MHD_stop_daemon(s->d); /* closes the listening socket */
	unlink(s->path);
	free(s);
}
