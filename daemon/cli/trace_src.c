/* `warden trace` reads either the store (--state) or wardend's trace
 * endpoints (GET /v1/runs/ID/trace, /v1/runs/ID/payload/STEP,
 * /v1/trace/runs, /v1/trace/records), which answer only what the caller's
 * uid may read (runtime/trace_access.c). */
#include "api/client.h"
#include "cli/trace_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ts_js(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

const char *ts_js2(json_t *o, const char *a, const char *b)
{
	const char *s = json_string_value(json_object_get(o, a));
	return s ? s : ts_js(o, b);
}

double ts_num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	if (json_is_string(v))
		return strtod(json_string_value(v), NULL);
	return json_is_number(v) ? json_number_value(v) : 0;
}

double ts_num2(json_t *o, const char *a, const char *b)
{
	return json_object_get(o, a) ? ts_num(o, a) : ts_num(o, b);
}

/* -o FILE holds payloads (prompts, results, outputs): it is created 0600
 * whatever the umask, as a new file (O_EXCL: never an existing file, and
 * never through a symlink planted at a temporary name) next to FILE, and
 * renamed over FILE once complete, so FILE is never another file opened
 * through a symlink and never half written. An existing FILE that is not
 * a regular file (a directory, a device, a symlink) is refused. */
int ts_out_open(const char *verb, const char *path, struct ts_out *o)
{
	*o = (struct ts_out){.f = stdout};
	if (!path || !strcmp(path, "-"))
		return 0;
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fprintf(stderr,
			"warden trace %s: %s: not a regular file (use -o - "
			"for stdout)\n",
			verb, path);
		return -EINVAL;
	}
	const char *slash = strrchr(path, '/');
	o->tmp = slash ? wd_asprintf("%.*s/.%s.XXXXXX", (int)(slash - path),
				     path, slash + 1)
		       : wd_asprintf(".%s.XXXXXX", path);
	/* mkostemp: O_CREAT|O_EXCL, mode 0600 (the umask only removes) */
	int fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0600) < 0 || !(o->f = fdopen(fd, "w"))) {
		int e = errno;
		fprintf(stderr, "warden trace %s: %s: %s\n", verb, path,
			strerror(e));
		if (fd >= 0) {
			close(fd);
			unlink(o->tmp);
		}
		free(o->tmp);
		*o = (struct ts_out){0};
		return -e;
	}
	o->path = path;
	return 0;
}

int ts_out_close(struct ts_out *o, bool ok)
{
	int rc = 0;
	errno = 0;
	if (o->f == stdout) {
		if (fflush(stdout) || ferror(stdout))
			rc = errno ? -errno : -EIO;
	} else if (o->f) {
		if (fflush(o->f) || ferror(o->f) || fsync(fileno(o->f)))
			rc = errno ? -errno : -EIO;
		if (fclose(o->f) && !rc)
			rc = -errno;
		if (ok && !rc && rename(o->tmp, o->path) < 0)
			rc = -errno;
		if (!ok || rc)
			unlink(o->tmp);
	}
	free(o->tmp);
	*o = (struct ts_out){0};
	return rc;
}

static void add_q(struct wd_buf *b, const char *k, const char *v)
{
	if (!v)
		return;
	wd_buf_printf(b, "%c%s=", strchr(b->data, '?') ? '&' : '?', k);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-_.~", *p))
			wd_buf_append(b, (const char *)p, 1);
		else
			wd_buf_printf(b, "%%%02X", *p);
	}
}

/* GET path from wardend: 0 with the JSON body (a list, or an object when
 * `object`), or -errno with the daemon's message (403: who may read the
 * run). */
static int get_json(struct tsrc *s, const char *path, bool object, json_t **out,
		    struct wd_err *err)
{
	long st = 0;
	json_t *resp = NULL;
	int rc = wd_api_call(s->sock, "GET", path, NULL, &st, &resp, err);
	if (rc)
		return rc;
	if (st != 200) {
		int code = st == 403 ? -EACCES : st == 404 ? -ENOENT : -EPROTO;
		wd_err_set(err, code, "%s", wd_api_error_text(resp, st));
		json_decref(resp);
		return code;
	}
	if (object ? !json_is_object(resp) : !json_is_array(resp)) {
		json_decref(resp);
		return wd_err_set(err, -EPROTO,
				  "wardend answered %s with "
				  "something not a%s",
				  path, object ? "n object" : " list");
	}
	*out = resp;
	return 0;
}

static int get(struct tsrc *s, const char *path, json_t **out,
	       struct wd_err *err)
{
	return get_json(s, path, false, out, err);
}

static void query_of(struct wd_buf *b, const struct wd_trace_query *q)
{
	add_q(b, "agent", q->agent);
	add_q(b, "team", q->team);
	add_q(b, "user", q->user);
	add_q(b, "tool", q->tool);
	add_q(b, "status", q->status);
	add_q(b, "prompt_hash", q->prompt_hash);
	add_q(b, "result_hash", q->result_hash);
	add_q(b, "replay_of", q->replay_of);
	if (q->since_ns) {
		char v[32];
		snprintf(v, sizeof(v), "%llu",
			 (unsigned long long)(q->since_ns / 1000000000ull));
		add_q(b, "since", v);
	}
}

int ts_runs(struct tsrc *s, const struct wd_trace_query *q, json_t **out,
	    struct wd_err *err)
{
	if (s->t)
		return wd_trace_query_runs(s->t, q, out, err);
	/* wardend answers a page at a time ({runs, more, next_after}, the
	 * cursor a string): every page */
	json_t *all = json_array();
	char *after = NULL;
	for (int pages = 0;; pages++) {
		struct wd_buf b = {0};
		wd_buf_printf(&b, "/v1/trace/runs");
		query_of(&b, q);
		add_q(&b, "after", after);
		json_t *page = NULL;
		int rc = get_json(s, b.data, true, &page, err);
		wd_buf_free(&b);
		if (rc) {
			free(after);
			json_decref(all);
			return rc;
		}
		json_t *runs = json_object_get(page, "runs");
		const char *next = ts_js(page, "next_after");
		bool more = json_is_true(json_object_get(page, "more"));
		/* a cursor that does not move would page forever */
		if (!json_is_array(runs) ||
		    (more && (!*next || (after && !strcmp(next, after))))) {
			json_decref(page);
			free(after);
			json_decref(all);
			return wd_err_set(err, -EPROTO,
					  "wardend answered /v1/trace/runs "
					  "with a page that is not {runs, "
					  "more, next_after} going forward");
		}
		json_array_extend(all, runs);
		/* a fleet node whose database is away says so: the list is
		 * this node's runs only */
		if (!pages && *ts_js(page, "unavailable"))
			fprintf(stderr, "warden trace: %s\n",
				ts_js(page, "unavailable"));
		free(after);
		after = more ? wd_strdup(next) : NULL;
		json_decref(page);
		if (!more)
			break;
	}
	*out = all;
	return 0;
}

int ts_grep(struct tsrc *s, const struct wd_trace_query *q, json_t **out,
	    struct wd_err *err)
{
	if (s->t)
		return wd_trace_query_records(s->t, q, out, err);
	/* wardend answers a page at a time ({records, more, next_after}):
	 * every page, so the caller gets every record it may read. The
	 * cursor is a seq, or in a fleet "NODE.SEQ" once the pages reach
	 * other nodes' records: either must move forward */
	json_t *all = json_array();
	uint64_t after = 0;
	char *fleet_after = NULL;
	int rc = 0;
	for (bool warned = false;;) {
		struct wd_buf b = {0};
		wd_buf_printf(&b, "/v1/trace/records");
		query_of(&b, q);
		if (fleet_after) {
			add_q(&b, "after", fleet_after);
		} else if (after) {
			char v[32];
			snprintf(v, sizeof(v), "%llu",
				 (unsigned long long)after);
			add_q(&b, "after", v);
		}
		json_t *page = NULL;
		rc = get_json(s, b.data, true, &page, err);
		wd_buf_free(&b);
		if (rc)
			break;
		json_t *recs = json_object_get(page, "records");
		json_t *next = json_object_get(page, "next_after");
		bool more = json_is_true(json_object_get(page, "more"));
		if (!warned && *ts_js(page, "unavailable"))
			fprintf(stderr, "warden trace: %s\n",
				ts_js(page, "unavailable"));
		warned = warned || *ts_js(page, "unavailable");
		uint64_t n =
		    json_is_integer(next) ? json_integer_value(next) : 0;
		const char *ns = json_string_value(next);
		bool forward = ns ? !fleet_after || strcmp(ns, fleet_after)
				  : !fleet_after && n > after;
		if (!json_is_array(recs) || (more && !forward)) {
			json_decref(page);
			rc = wd_err_set(err, -EPROTO,
					"wardend answered /v1/trace/records "
					"with a page that is not {records, "
					"more, next_after} going forward");
			break;
		}
		json_array_extend(all, recs);
		if (more && ns) {
			free(fleet_after);
			fleet_after = wd_strdup(ns);
		}
		after = n;
		json_decref(page);
		if (!more)
			break;
	}
	free(fleet_after);
	if (rc) {
		json_decref(all);
		return rc;
	}
	*out = all;
	return 0;
}

/* run ids go into the path: the API's alphabet only */
static bool id_ok(const char *run)
{
	return *run && strlen(run) <= 64 &&
	       strspn(run,
		      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789_-") == strlen(run);
}

int ts_records(struct tsrc *s, const char *run, json_t **out,
	       struct wd_err *err)
{
	if (s->t)
		return wd_trace_run_records(s->t, run, out, err);
	if (!id_ok(run))
		return wd_err_set(err, -ENOENT, "no run '%s'", run);
	struct wd_buf b = {0};
	wd_buf_printf(&b, "/v1/runs/%s/trace", run);
	int rc = get(s, b.data, out, err);
	wd_buf_free(&b);
	return rc;
}

int ts_payloads(struct tsrc *s, const char *run, int64_t step, const char *type,
		json_t **out, struct wd_err *err)
{
	if (s->t)
		return wd_trace_step_payloads(s->t, run, step, type, out, err);
	if (!id_ok(run))
		return wd_err_set(err, -ENOENT, "no run '%s'", run);
	struct wd_buf b = {0};
	wd_buf_printf(&b, "/v1/runs/%s/payload/%lld", run, (long long)step);
	add_q(&b, "type", type);
	int rc = get(s, b.data, out, err);
	wd_buf_free(&b);
	return rc;
}

char *trace_replay_outcome(json_t *r)
{
	json_t *conv = json_object_get(r, "replay_converged");
	json_t *at = json_object_get(r, "replay_diverged_at");
	if (json_is_integer(at))
		return wd_asprintf("diverged at step %lld",
				   (long long)json_integer_value(at));
	if (json_is_integer(conv) && json_integer_value(conv))
		return wd_strdup("converged");
	if (!strcmp(ts_js(r, "status"), "running"))
		return wd_strdup("(running)");
	return wd_asprintf("ended %s", ts_js(r, "status"));
}
