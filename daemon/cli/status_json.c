/* `warden status --json`: the report as one JSON object. */
#include "cli/status_int.h"
#include "common/util.h"

#include <jansson.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------
 */

static json_t *jerr(int err)
{
	return err ? json_string(ET(err)) : json_null();
}

/* {"ok": bool, "err": -errno, "error": "EPERM (...)" | null} */
static json_t *jfeat(int err)
{
	return json_pack("{s:b,s:i,s:o}", "ok", err == 0, "err", err, "error",
			 jerr(err));
}

static json_t *jlist(const char *s, const char *sep)
{
	json_t *a = json_array();
	char tmp[512];
	char *save = NULL;
	wd_strlcpy(tmp, s, sizeof(tmp));
	for (char *t = strtok_r(tmp, sep, &save); t;
	     t = strtok_r(NULL, sep, &save))
		json_array_append_new(a, json_string(t));
	return a;
}

static json_t *jstr_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

json_t *wd_status_json_report(const struct report *r)
{
	const struct wd_features *f = r->f;
	json_t *o = json_object();

	json_object_set_new(o, "kernel",
			    json_pack("{s:s,s:s,s:b,s:o}", "release",
				      f->kernel_release, "machine", f->machine,
				      "btf", f->btf, "btf_error",
				      jerr(f->btf_err)));

	json_t *ft = json_object();
	json_object_set_new(ft, "lsm",
			    json_pack("{s:o,s:o,s:o}", "list",
				      jlist(f->lsm_list, ","), "source",
				      jstr_or_null(f->lsm_source), "error",
				      jerr(f->lsm_err)));
	json_t *hooks = json_array();
	int n_active = 0;
	for (int h = 0; h < r->n_hooks; h++) {
		const struct wd_lsm_hook_status *hs = &r->hooks[h];
		n_active += hs->active;
		json_array_append_new(
		    hooks,
		    json_pack("{s:s,s:s,s:b,s:i,s:o}", "hook", hs->hook,
			      "attach", hs->attach, "active", hs->active, "err",
			      hs->err, "reason", jstr_or_null(hs->reason)));
	}
	json_object_set_new(
	    ft, "bpf_lsm",
	    json_pack("{s:o,s:o,s:b,s:i,s:o}", "in_lsm_list",
		      f->lsm_list[0] ? json_boolean(f->bpf_in_lsm_list)
				     : json_null(),
		      "lsm_prog_load", jfeat(f->lsm_prog_err), "usable",
		      n_active > 0, "active_hooks", n_active, "hooks", hooks));
	json_object_set_new(ft, "bpf_trampoline", jfeat(f->trampoline_err));
	json_object_set_new(ft, "bpf_cgroup_sock_addr",
			    jfeat(f->cgroup_sockaddr_err));
	json_object_set_new(ft, "bpf_ringbuf", jfeat(f->ringbuf_err));
	json_object_set_new(
	    ft, "landlock",
	    json_pack("{s:i,s:o,s:o}", "abi",
		      f->landlock_abi > 0 ? f->landlock_abi : 0, "errata",
		      f->landlock_errata >= 0 ? json_integer(f->landlock_errata)
					      : json_null(),
		      "error",
		      f->landlock_abi > 0 ? json_null()
					  : jerr(f->landlock_abi)));
	json_object_set_new(
	    ft, "seccomp",
	    json_pack("{s:o,s:o,s:o,s:o,s:{s:i,s:i,s:i}}", "filter",
		      jfeat(f->seccomp_filter_err), "user_notif",
		      jfeat(f->seccomp_notify_err), "flag_continue",
		      jfeat(f->seccomp_continue_err), "addfd",
		      jfeat(f->seccomp_addfd_err), "notif_sizes", "notif",
		      f->seccomp_notif_sizes[0], "resp",
		      f->seccomp_notif_sizes[1], "data",
		      f->seccomp_notif_sizes[2]));
	json_object_set_new(ft, "user_namespaces", jfeat(f->userns_err));
	json_t *ns = json_object();
	for (int i = 0; i < WD_NS_N; i++)
		json_object_set_new(ns, wd_ns_name(i), jfeat(f->ns_err[i]));
	json_object_set_new(ft, "namespaces", ns);
	json_object_set_new(ft, "io_uring",
			    json_pack("{s:o,s:o}", "disabled",
				      f->io_uring_disabled >= 0
					  ? json_integer(f->io_uring_disabled)
					  : json_null(),
				      "error", jerr(f->io_uring_err)));
	char pgr[48] = "";
	if (!f->ping_err)
		snprintf(pgr, sizeof(pgr), "%ld %ld", f->ping_gid_lo,
			 f->ping_gid_hi);
	json_object_set_new(
	    ft, "ping_group_range",
	    json_pack("{s:o,s:b,s:o}", "value",
		      f->ping_err ? json_null() : json_string(pgr),
		      "admits_gids",
		      !f->ping_err && f->ping_gid_lo <= f->ping_gid_hi, "error",
		      jerr(f->ping_err)));
	json_object_set_new(
	    ft, "audit",
	    json_pack("{s:b,s:o,s:o}", "readable", f->audit, "enabled",
		      f->audit_enabled >= 0 ? json_integer(f->audit_enabled)
					    : json_null(),
		      "error", jerr(f->audit_err)));
	json_object_set_new(o, "features", ft);

	json_t *cg = json_object();
	json_object_set_new(cg, "layout",
			    json_string(f->cg.hybrid	   ? "hybrid"
					: f->cg.v2_root[0] ? "v2"
					: f->cg.n_v1	   ? "v1"
							   : "none"));
	json_object_set_new(cg, "v2_root", jstr_or_null(f->cg.v2_root));
	json_object_set_new(cg, "v2_controllers",
			    jlist(f->cg.v2_controllers, " "));
	json_t *ctl = json_object();
	for (int c = 0; c < WD_CG_NCTRL; c++) {
		const char *h = f->cg.v2_ctrl[c]      ? "v2"
				: f->cg.v1_root[c][0] ? "v1"
						      : NULL;
		const char *p =
		    f->cg.v2_ctrl[c] ? f->cg.v2_root : f->cg.v1_root[c];
		json_object_set_new(ctl, wd_cg_ctrl_name(c),
				    json_pack("{s:o,s:o}", "hierarchy",
					      jstr_or_null(h), "path",
					      jstr_or_null(p)));
	}
	json_object_set_new(cg, "controllers", ctl);
	json_object_set_new(cg, "error", jerr(f->cg_err));
	json_object_set_new(o, "cgroup", cg);

	json_object_set_new(
	    o, "runsc",
	    json_pack("{s:b,s:o,s:o,s:b,s:b,s:o,s:o,s:b,s:o,s:o}", "present",
		      f->runsc, "path", jstr_or_null(f->runsc_path), "version",
		      jstr_or_null(f->runsc_version), "tested", f->runsc_tested,
		      "cached", f->runsc_cached, "platform",
		      jstr_or_null(f->runsc_platform), "run_error",
		      f->runsc_tested ? jerr(f->runsc_run_err) : json_null(),
		      "oci_seccomp", f->runsc_oci_seccomp, "error",
		      jerr(f->runsc_err), "note", jstr_or_null(f->runsc_note)));

	struct mech m[8];
	int nm = wd_status_build_mechs(r, m);
	json_t *mj = json_object();
	for (int i = 0; i < nm; i++)
		json_object_set_new(mj, m[i].name,
				    json_pack("{s:b,s:o}", "available", m[i].ok,
					      "reason",
					      jstr_or_null(m[i].why)));
	json_object_set_new(o, "mechanisms", mj);

	json_t *rows = json_array();
	for (int i = 0; i < r->n_rows; i++) {
		const struct row *w = &r->rows[i];
		json_t *jr = json_pack("{s:s}", "constraint", w->constraint);
		for (int t = 0; t < 3; t++) {
			const struct cell *c = &w->t[t];
			json_t *jc =
			    c->ok ? json_pack("{s:b,s:s,s:o}", "enforced", true,
					      "mechanism", c->text, "note",
					      jstr_or_null(c->note))
				  : json_pack("{s:b,s:s}", "enforced", false,
					      "reason", c->text);
			char key[8];
			snprintf(key, sizeof(key), "tier%d", t + 1);
			json_object_set_new(jr, key, jc);
		}
		json_array_append_new(rows, jr);
	}
	json_object_set_new(o, "constraints", rows);

	json_t *yes_ = json_array(), *no_ = json_array();
	for (int i = 0; i < r->n_watch; i++) {
		const struct watch *w = &r->watch[i];
		if (w->ok)
			json_array_append_new(
			    yes_,
			    json_pack("{s:s,s:s}", "constraint", w->constraint,
				      "mechanism", w->text));
		else
			json_array_append_new(
			    no_, json_pack("{s:s,s:s}", "constraint",
					   w->constraint, "reason", w->text));
	}
	json_object_set_new(
	    o, "audit",
	    json_pack("{s:o,s:o}", "watchable", yes_, "not_watchable", no_));
	return o;
}
