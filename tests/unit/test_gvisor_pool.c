/* Tier 3 runner and warm pool against the real runsc: warm calls compute,
 * concurrent calls never share a sandbox, the pool refills, tenant quota
 * and idle expiry work; OCI config invariants. */
#include <pthread.h>
#include <string.h>

#include "policy/manifest.h"
#include "sandbox/gvisor.h"
#include "sandbox/oci.h"
#include "sandbox/pool.h"
#include "t.h"

static struct wd_manifest *load(const char *path)
{
	struct wd_diag d = {0};
	struct wd_manifest *m = NULL;
	if (wd_manifest_load_file(path, &m, &d) < 0)
		for (int i = 0; i < d.n; i++)
			printf("# %s\n", d.msgs[i]);
	wd_diag_free(&d);
	return m;
}

struct job {
	struct wd_pool *p;
	struct wd_manifest *m;
	const char *code;
	const char *tenant;
	struct wd_result res;
	int rc;
	struct wd_err err;
};

static void *run_job(void *arg)
{
	struct job *j = arg;
	struct wd_call c = {.manifest = j->m,
			    .stdin_data = j->code,
			    .stdin_len = strlen(j->code),
			    .caller_uid = 65534,
			    .caller_gid = 65534};
	j->rc = wd_pool_run(j->p, &c, j->tenant, &j->res, &j->err);
	return NULL;
}

static const char *enf(struct wd_result *r, const char *name)
{
	for (int i = 0; i < r->n_enf; i++)
		if (!strcmp(r->enf[i].name, name))
			return r->enf[i].state;
	return "";
}

static void oci_checks(struct wd_manifest *m)
{
	char *argv[] = {"/usr/bin/python3.11", "-", NULL};
	char *envp[] = {"PATH=/usr/bin", NULL};
	struct wd_oci_opts o = {.argv = argv,
				.envp = envp,
				.uid = 0,
				.gid = 0,
				.cgroups_path = "/warden/x"};
	struct wd_err err = {0};
	json_t *c = wd_oci_config(m, &o, &err);
	T_OK(!c && err.code == -EPERM, "oci_refuses_uid0", "got %p", c);
	o.uid = o.gid = 1000;
	c = wd_oci_config(m, &o, &err);
	T_OK(c != NULL, "oci_config_builds", "%s", err.msg);
	if (!c)
		return;
	json_t *proc = json_object_get(c, "process");
	T_OK(json_is_true(json_object_get(proc, "noNewPrivileges")),
	     "oci_no_new_privs", "missing");
	json_t *caps = json_object_get(proc, "capabilities");
	const char *k;
	json_t *v;
	size_t ncaps = 0;
	json_object_foreach(caps, k, v) ncaps += json_array_size(v);
	T_OK(ncaps == 0, "oci_no_capabilities", "%zu caps", ncaps);
	T_OK(json_is_true(
		 json_object_get(json_object_get(c, "root"), "readonly")),
	     "oci_root_readonly", "root not read-only");
	bool rw = false, has_etc = false, netns = false;
	size_t i;
	json_array_foreach(json_object_get(c, "mounts"), i, v)
	{
		const char *dst =
		    json_string_value(json_object_get(v, "destination"));
		const char *type =
		    json_string_value(json_object_get(v, "type"));
		if (!strcmp(type, "bind")) {
			json_t *o2;
			size_t j;
			json_array_foreach(json_object_get(v, "options"), j, o2)
			    rw |= !strcmp(json_string_value(o2), "rw");
		}
		has_etc |= !strcmp(dst, "/etc") || !strcmp(dst, "/root");
	}
	json_array_foreach(
	    json_object_get(json_object_get(c, "linux"), "namespaces"), i, v)
	    netns |=
	    !strcmp(json_string_value(json_object_get(v, "type")), "network");
	T_OK(!rw, "oci_binds_readonly", "a bind is rw with empty write list");
	T_OK(!has_etc, "oci_no_etc_or_root", "/etc or /root bound");
	T_OK(netns, "oci_network_namespace", "no network namespace");
	json_decref(c);
}

int main(void)
{
	if (geteuid() != 0) {
		T_SKIP("gvisor_pool", "needs root");
		return T_DONE();
	}
	struct wd_manifest *m = load("policy/tools/run_python.yaml");
	T_OK(m != NULL, "load_run_python", "cannot load");
	if (!m)
		return T_DONE();
	oci_checks(m);
	char rp[256];
	struct wd_err e0 = {0};
	if (wd_t3_runsc_path(rp, sizeof(rp), &e0) < 0) {
		T_SKIP("gvisor_pool", "%s", e0.msg);
		return T_DONE();
	}

	struct wd_pool_config cfg = {
	    .size = 2, .tenant_quota = 1, .idle_ms = 60000};
	struct wd_pool *p = wd_pool_new(&cfg);
	struct wd_err err = {0};
	int r = wd_pool_register(p, m, NULL, 65534, 65534, &err);
	T_OK(r == 0, "pool_register", "%s", err.msg);
	r = wd_pool_wait_ready(p, 30000);
	struct wd_pool_stats st;
	wd_pool_stats(p, &st);
	T_OK(r == 0 && st.ready == 2, "pool_fills", "ready %d", st.ready);

	/* 4 concurrent calls, 4 tenants: 2 warm, 2 cold */
	struct job jobs[4];
	pthread_t th[4];
	const char *tenants[] = {"a", "b", "c", "d"};
	for (int i = 0; i < 4; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i] = (struct job){.p = p,
				       .m = m,
				       .code = "print(sum(range(1000)))\n",
				       .tenant = tenants[i]};
		pthread_create(&th[i], NULL, run_job, &jobs[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	int ok = 0, warm = 0;
	bool distinct = true;
	for (int i = 0; i < 4; i++) {
		struct wd_result *res = &jobs[i].res;
		if (jobs[i].rc == 0 && res->status == WD_ST_OK &&
		    res->out.len >= 6 && !memcmp(res->out.data, "499500", 6))
			ok++;
		else
			printf("# job %d rc %d status %s: %.*s %s\n", i,
			       jobs[i].rc, wd_status_name(res->status),
			       (int)res->err.len, res->err.data,
			       jobs[i].err.msg);
		const char *pe = enf(res, "pool");
		if (!strncmp(pe, "warm", 4)) {
			warm++;
			for (int j = 0; j < i; j++)
				if (!strcmp(enf(&jobs[j].res, "pool"), pe))
					distinct = false;
		}
	}
	T_OK(ok == 4, "pool_concurrent_results", "%d/4 computed", ok);
	T_OK(warm == 2, "pool_concurrent_warm_hits", "%d warm of 4", warm);
	T_OK(distinct, "pool_no_sandbox_reuse", "two calls shared a sandbox");
	wd_pool_stats(p, &st);
	T_OK(st.hits == 2 && st.misses == 2, "pool_counts_misses",
	     "hits %llu misses %llu", (unsigned long long)st.hits,
	     (unsigned long long)st.misses);
	for (int i = 0; i < 4; i++)
		wd_result_free(&jobs[i].res);
	r = wd_pool_wait_ready(p, 30000);
	wd_pool_stats(p, &st);
	T_OK(r == 0 && st.ready == 2 && st.spawned >= 4, "pool_refills",
	     "ready %d spawned %llu", st.ready, (unsigned long long)st.spawned);

	/* tenant quota 1: while tenant "q" holds a warm sandbox, its second
	 * call is a cold start */
	struct job a = {.p = p,
			.m = m,
			.code = "import time; time.sleep(1.5); print(1)\n",
			.tenant = "q"};
	struct job b = {.p = p, .m = m, .code = "print(2)\n", .tenant = "q"};
	pthread_t ta;
	pthread_create(&ta, NULL, run_job, &a);
	usleep(300000);
	run_job(&b);
	pthread_join(ta, NULL);
	T_OK(!strncmp(enf(&a.res, "pool"), "warm", 4) &&
		 strstr(enf(&b.res, "pool"), "quota"),
	     "pool_tenant_quota", "a '%s' b '%s'", enf(&a.res, "pool"),
	     enf(&b.res, "pool"));
	wd_result_free(&a.res);
	wd_result_free(&b.res);
	wd_pool_free(p);

	/* idle expiry */
	cfg = (struct wd_pool_config){.size = 1, .idle_ms = 300};
	p = wd_pool_new(&cfg);
	wd_pool_register(p, m, NULL, 65534, 65534, &err);
	wd_pool_wait_ready(p, 30000);
	usleep(1500000);
	wd_pool_stats(p, &st);
	T_OK(st.expired >= 1, "pool_idle_expiry", "expired %llu",
	     (unsigned long long)st.expired);
	wd_pool_free(p);

	/* nothing left: bundles and runsc state */
	bool left = false;
	char buf[64];
	FILE *f = popen("ls /run/warden/gvisor /run/warden/runsc 2>/dev/null "
			"| grep -v '[.]lock$' | grep -c '^wd-'",
			"r");
	if (f && fgets(buf, sizeof(buf), f))
		left = atoi(buf) > 0;
	if (f)
		pclose(f);
	T_OK(!left, "pool_cleanup", "sandboxes left behind");
	wd_manifest_free(m);
	return T_DONE();
}
