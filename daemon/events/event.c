#include "events/event.h"
#include "common/util.h"

#include <stdio.h>

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
	}
	return "unknown";
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
	if (e->syscall[0])
		json_object_set_new(o, "syscall", json_string(e->syscall));
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
