/* struct wd_result helpers shared by every tier runner. */
#include "sandbox/sandbox.h"

#include <stdarg.h>
#include <string.h>

const char *wd_status_name(enum wd_status s)
{
	switch (s) {
	case WD_ST_OK:
		return "ok";
	case WD_ST_ERROR:
		return "error";
	case WD_ST_TIMEOUT:
		return "timeout";
	case WD_ST_OOM:
		return "oom";
	case WD_ST_SANDBOX_ERROR:
		return "sandbox_error";
	}
	return "unknown";
}

void wd_result_add_denial(struct wd_result *r, const struct wd_event *e)
{
	unsigned v = e->verdict == WD_VERDICT_AUDITED;
	r->seen[v]++;
	if (e->source == WD_SRC_BPF || e->source == WD_SRC_LSM)
		r->seen_kernel[v]++;
	/* Bounded: a flood of denials must not exhaust the supervisor; what
	 * is not kept is counted. */
	if (r->n_denials >= 4096) {
		r->lost_denials++;
		return;
	}
	r->denials =
	    wd_realloc(r->denials, (r->n_denials + 1) * sizeof(*r->denials));
	r->denials[r->n_denials] = *e;
	/* a record the producer left without a syscall name (a Landlock
	 * record's number, a sendmsg hook) gets what can be said honestly */
	wd_event_complete(&r->denials[r->n_denials++]);
}

void wd_result_denial_counts(const struct wd_result *r,
			     struct wd_denial_counts *out)
{
	uint64_t all = 0;
	for (int v = 0; v < 2; v++) {
		out->n[v] = r->seen[v];
		/* the kernel counted its events before asking the ring
		 * for room; never fewer than were delivered */
		if (r->has_kernel_counts &&
		    r->kernel_counts[v] > r->seen_kernel[v])
			out->n[v] += r->kernel_counts[v] - r->seen_kernel[v];
		all += out->n[v];
	}
	out->untraced = all - (uint64_t)r->n_denials;
}

void wd_result_enf(struct wd_result *r, const char *name, const char *fmt, ...)
{
	struct wd_enforcement *e = NULL;
	for (int i = 0; i < r->n_enf; i++)
		if (!strcmp(r->enf[i].name, name))
			e = &r->enf[i];
	if (!e) {
		if (r->n_enf >= (int)WD_ARRAY_SIZE(r->enf))
			return;
		e = &r->enf[r->n_enf++];
		wd_strlcpy(e->name, name, sizeof(e->name));
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->state, sizeof(e->state), fmt, ap);
	va_end(ap);
}

void wd_result_free(struct wd_result *r)
{
	wd_buf_free(&r->out);
	wd_buf_free(&r->err);
	free(r->denials);
	memset(r, 0, sizeof(*r));
}

static json_t *buf_json(const struct wd_buf *b)
{
	/* Tool output is arbitrary bytes; JSON needs UTF-8. Invalid
	 * sequences become U+FFFD rather than dropping the output. */
	json_t *s = json_stringn(b->data ? b->data : "", b->len);
	if (s)
		return s;
	struct wd_buf o = {0};
	for (size_t i = 0; i < b->len; i++) {
		unsigned char c = b->data[i];
		if (c < 0x80 && c != 0) {
			wd_buf_append(&o, &b->data[i], 1);
		} else if (c == 0) {
			wd_buf_append(&o, "\\u0000", 6);
		} else {
			wd_buf_append(&o, "\xef\xbf\xbd", 3);
		}
	}
	s = json_stringn(o.data ? o.data : "", o.len);
	wd_buf_free(&o);
	return s ? s : json_string("");
}

json_t *wd_result_to_json(const struct wd_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "status",
			    json_string(wd_status_name(r->status)));
	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "stdout", buf_json(&r->out));
	json_object_set_new(o, "stderr", buf_json(&r->err));
	json_object_set_new(o, "truncated", json_boolean(r->truncated));
	json_t *d = json_array();
	for (int i = 0; i < r->n_denials; i++)
		json_array_append_new(d, wd_event_to_json(&r->denials[i]));
	json_object_set_new(o, "denials", d);
	if (r->lost_denials)
		json_object_set_new(o, "lost_denials",
				    json_integer(r->lost_denials));
	json_object_set_new(o, "tier", json_integer(r->tier));
	if (r->run_uid) {
		json_object_set_new(o, "run_as_uid", json_integer(r->run_uid));
		json_object_set_new(o, "run_as_gid", json_integer(r->run_gid));
	}
	json_object_set_new(o, "duration_ms",
			    json_real((double)r->duration_ns / 1e6));
	json_t *e = json_object();
	for (int i = 0; i < r->n_enf; i++)
		json_object_set_new(e, r->enf[i].name,
				    json_string(r->enf[i].state));
	json_object_set_new(o, "enforcement", e);
	if (r->call_id[0])
		json_object_set_new(o, "call_id", json_string(r->call_id));
	return o;
}
