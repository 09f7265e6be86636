#include "events/event.h"
#include "common/jsonstr.h"
#include "common/util.h"
#include "trace/trace.h"
#include "trace/recw.h"

#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *wd_event_source_name(enum wd_event_source s)
{
	switch (s) {
	case WD_SRC_SECCOMP:
		return "seccomp";
	case WD_SRC_BPF:
		return "bpf";
	case WD_SRC_LSM:
		return "bpf_lsm";
	case WD_SRC_LANDLOCK:
		return "landlock";
	case WD_SRC_GVISOR:
		return "gvisor";
	case WD_SRC_SANDBOX:
		return "sandbox";
	case WD_SRC_RESOLVER:
		return "resolver";
	}
	return "unknown";
}

_Static_assert(sizeof(WD_EVENT_SENDMSG_SYSCALLS) <=
		   sizeof(((struct wd_event *)0)->syscall),
	       "the sendmsg family's name fits the syscall field");

static bool is_sendmsg_hook(const struct wd_event *e)
{
	return (e->source == WD_SRC_BPF || e->source == WD_SRC_LSM) &&
	       !strcmp(e->kind, "sendmsg");
}

const char *wd_event_syscall_name(const struct wd_event *e)
{
	if (e->syscall[0])
		return e->syscall;
	if (e->syscall_nr < 0 && is_sendmsg_hook(e))
		return WD_EVENT_SENDMSG_SYSCALLS;
	return "";
}

void wd_event_set_syscall(struct wd_event *e, uint32_t arch, int nr)
{
	e->syscall_nr = nr;
	char *name = seccomp_syscall_resolve_num_arch(
	    arch ? arch : SCMP_ARCH_NATIVE, nr);
	wd_strlcpy(e->syscall, name ? name : "?", sizeof(e->syscall));
	free(name);
}

void wd_event_complete(struct wd_event *e)
{
	if (e->syscall[0])
		return;
	if (e->syscall_nr >= 0)
		wd_event_set_syscall(e, 0, e->syscall_nr);
	else
		wd_strlcpy(e->syscall, wd_event_syscall_name(e),
			   sizeof(e->syscall));
}

json_t *wd_event_to_json(const struct wd_event *e)
{
	char ts[40];
	wd_iso8601(e->ts_ns, ts, sizeof(ts));
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_string(ts));
	json_object_set_new(o, "source",
			    json_string(wd_event_source_name(e->source)));
	json_object_set_new(o, "kind", json_string(e->kind));
	if (e->call_id[0])
		json_object_set_new(o, "call_id", json_string(e->call_id));
	json_object_set_new(o, "cgroup_id",
			    json_integer((json_int_t)e->cgroup_id));
	json_object_set_new(o, "pid", json_integer(e->pid));
	json_object_set_new(o, "uid", json_integer(e->uid));
	if (e->syscall_nr >= 0)
		json_object_set_new(o, "syscall_nr",
				    json_integer(e->syscall_nr));
	const char *sys = wd_event_syscall_name(e);
	if (sys[0])
		json_object_set_new(o, "syscall", json_string(sys));
	json_object_set_new(o, "errno", json_integer(e->err));
	if (e->target[0])
		json_object_set_new(o, "target", json_string(e->target));
	if (e->run_id[0]) {
		json_object_set_new(o, "run_id", json_string(e->run_id));
		json_object_set_new(o, "step", json_integer(e->step));
	}
	if (e->tool[0])
		json_object_set_new(o, "tool", json_string(e->tool));
	if (e->agent[0])
		json_object_set_new(o, "agent", json_string(e->agent));
	if (e->team[0])
		json_object_set_new(o, "team", json_string(e->team));
	if (e->domain_id) {
		char d[24];
		snprintf(d, sizeof(d), "%llx",
			 (unsigned long long)e->domain_id);
		json_object_set_new(o, "domain_id", json_string(d));
	}
	json_object_set_new(o, "verdict",
			    json_string(e->verdict == WD_VERDICT_DENIED
					    ? "denied"
					    : "audited"));
	return o;
}

void wd_event_recw(struct wd_recw *w, const char *key, const struct wd_event *e)
{
	char ts[40];
	wd_iso8601(e->ts_ns, ts, sizeof(ts));
	wd_recw_obj_begin(w, key);
	wd_recw_str(w, "ts", ts);
	wd_recw_str(w, "source", wd_event_source_name(e->source));
	wd_recw_strn(w, "kind", e->kind, strnlen(e->kind, sizeof(e->kind)));
	if (e->call_id[0])
		wd_recw_strn(w, "call_id", e->call_id,
			     strnlen(e->call_id, sizeof(e->call_id)));
	wd_recw_int(w, "cgroup_id", (int64_t)e->cgroup_id);
	wd_recw_int(w, "pid", e->pid);
	wd_recw_int(w, "uid", e->uid);
	if (e->syscall_nr >= 0)
		wd_recw_int(w, "syscall_nr", e->syscall_nr);
	const char *sys = wd_event_syscall_name(e);
	if (sys[0])
		wd_recw_str(w, "syscall", sys);
	wd_recw_int(w, "errno", e->err);
	if (e->target[0])
		wd_recw_strn(w, "target", e->target,
			     strnlen(e->target, sizeof(e->target)));
	if (e->run_id[0]) {
		wd_recw_strn(w, "run_id", e->run_id,
			     strnlen(e->run_id, sizeof(e->run_id)));
		wd_recw_int(w, "step", e->step);
	}
	if (e->tool[0])
		wd_recw_strn(w, "tool", e->tool,
			     strnlen(e->tool, sizeof(e->tool)));
	if (e->agent[0])
		wd_recw_strn(w, "agent", e->agent,
			     strnlen(e->agent, sizeof(e->agent)));
	if (e->team[0])
		wd_recw_strn(w, "team", e->team,
			     strnlen(e->team, sizeof(e->team)));
	if (e->domain_id) {
		char d[24];
		snprintf(d, sizeof(d), "%llx",
			 (unsigned long long)e->domain_id);
		wd_recw_str(w, "domain_id", d);
	}
	wd_recw_str(w, "verdict",
		    e->verdict == WD_VERDICT_DENIED ? "denied" : "audited");
	wd_recw_obj_end(w);
}

/* ---- wd_event_json_members: the same JSON, written directly ---------- */

static char *put_raw(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

static char *put_i64(char *p, long long v)
{
	char t[24];
	int n = 0;
	unsigned long long u =
	    v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	do
		t[n++] = (char)('0' + u % 10);
	while ((u /= 10));
	if (v < 0)
		*p++ = '-';
	while (n)
		*p++ = t[--n];
	return p;
}

static char *put_str(char *p, const char *str, size_t max)
{
	return wd_json_put_str(p, str, strnlen(str, max), true);
}

#define PUT_STR(p, key, field) put_str(put_raw(p, key), field, sizeof(field))

_Static_assert(WD_EVENT_JSON_MAX >=
		   6 * (sizeof(((struct wd_event *)0)->call_id) +
			sizeof(((struct wd_event *)0)->kind) +
			sizeof(((struct wd_event *)0)->syscall) +
			sizeof(((struct wd_event *)0)->target) +
			sizeof(((struct wd_event *)0)->run_id) +
			sizeof(((struct wd_event *)0)->tool) +
			sizeof(((struct wd_event *)0)->agent) +
			sizeof(((struct wd_event *)0)->team)) +
		       512,
	       "WD_EVENT_JSON_MAX holds every string fully escaped");

size_t wd_event_json_members(const struct wd_event *e, char *buf)
{
	/* the second's "YYYY-MM-DDTHH:MM:SS" is formatted once per second
	 * per thread: consecutive events share it */
	static __thread uint64_t ts_sec = UINT64_MAX;
	static __thread char ts_head[32];
	uint64_t sec = e->ts_ns / 1000000000ull;
	if (sec != ts_sec) {
		char full[40];
		wd_iso8601(sec * 1000000000ull, full, sizeof(full));
		char *dot = strchr(full, '.');
		if (dot)
			*dot = 0;
		wd_strlcpy(ts_head, full, sizeof(ts_head));
		ts_sec = sec;
	}
	char *p = buf;
	p = put_raw(p, "\"ts\":\"");
	p = put_raw(p, ts_head);
	unsigned us = (unsigned)(e->ts_ns % 1000000000ull / 1000);
	*p++ = '.';
	for (unsigned d = 100000; d; d /= 10)
		*p++ = (char)('0' + us / d % 10);
	p = put_raw(p, "Z\"");
	p = put_raw(p, ",\"source\":\"");
	p = put_raw(p, wd_event_source_name(e->source));
	*p++ = '"';
	p = PUT_STR(p, ",\"kind\":", e->kind);
	if (e->call_id[0])
		p = PUT_STR(p, ",\"call_id\":", e->call_id);
	p = put_i64(put_raw(p, ",\"cgroup_id\":"), (long long)e->cgroup_id);
	p = put_i64(put_raw(p, ",\"pid\":"), e->pid);
	p = put_i64(put_raw(p, ",\"uid\":"), e->uid);
	if (e->syscall_nr >= 0)
		p = put_i64(put_raw(p, ",\"syscall_nr\":"), e->syscall_nr);
	const char *sys = wd_event_syscall_name(e);
	if (sys[0])
		p = put_str(put_raw(p, ",\"syscall\":"), sys,
			    sizeof(e->syscall));
	p = put_i64(put_raw(p, ",\"errno\":"), e->err);
	if (e->target[0])
		p = PUT_STR(p, ",\"target\":", e->target);
	if (e->run_id[0]) {
		p = PUT_STR(p, ",\"run_id\":", e->run_id);
		p = put_i64(put_raw(p, ",\"step\":"), e->step);
	}
	if (e->tool[0])
		p = PUT_STR(p, ",\"tool\":", e->tool);
	if (e->agent[0])
		p = PUT_STR(p, ",\"agent\":", e->agent);
	if (e->team[0])
		p = PUT_STR(p, ",\"team\":", e->team);
	if (e->domain_id) {
		char d[24];
		snprintf(d, sizeof(d), "%llx",
			 (unsigned long long)e->domain_id);
		p = put_str(put_raw(p, ",\"domain_id\":"), d, sizeof(d));
	}
	p = put_raw(p, e->verdict == WD_VERDICT_DENIED
			   ? ",\"verdict\":\"denied\""
			   : ",\"verdict\":\"audited\"");
	return (size_t)(p - buf);
}

void wd_event_hashed_target(const char *target, const char *source,
			    const char *kind, char *out, size_t len)
{
	if (!strncmp(target, "sha256:", 7) &&
	    strspn(target + 7, "0123456789abcdef") == 64 &&
	    (!target[71] || target[71] == ':')) {
		snprintf(out, len, "%s", target);
		return;
	}
	bool net =
	    (source &&
	     (!strcmp(source, "bpf") || !strcmp(source, "resolver"))) ||
	    (kind && (!strcmp(kind, "connect") || !strcmp(kind, "sendmsg")));
	char port[8] = "";
	size_t n = strlen(target);
	const char *c = net ? strrchr(target, ':') : NULL;
	if (c && c[1] && strlen(c + 1) <= 5 &&
	    strspn(c + 1, "0123456789") == strlen(c + 1)) {
		snprintf(port, sizeof(port), "%s", c);
		n = (size_t)(c - target);
	}
	char ref[WD_TRACE_REF_LEN];
	wd_trace_ref_of(target, n, ref);
	snprintf(out, len, "%s%s", ref, port);
}

void wd_event_hide_target(struct wd_event *e)
{
	if (!e->target[0])
		return;
	char t[sizeof(e->target)];
	wd_event_hashed_target(e->target, wd_event_source_name(e->source),
			       e->kind, t, sizeof(t));
	snprintf(e->target, sizeof(e->target), "%s", t);
}
