/* Tier 3 runner and warm pool against the real runsc: warm calls compute,
 * concurrent calls never share a sandbox, the pool refills, tenant quota
 * and idle expiry work, keys are evicted by idleness and by the cap with
 * their sandboxes deleted, a runsc that starts nothing is refused; OCI
 * config invariants. Runs with its own WARDEN_RUNTIME_DIR, so runsc's
 * state (`runsc list` with the pool's root) is this test's alone. */
#include <dirent.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static char g_rt[64]; /* our WARDEN_RUNTIME_DIR */

/* Container ids `runsc list` shows under the pool's root. */
static int runsc_ids(char ids[][48], int max)
{
	char rp[256], cmd[512], line[128];
	struct wd_err e = {0};
	if (wd_t3_runsc_path(rp, sizeof(rp), &e) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s --root=%s/runsc list -quiet 2>/dev/null",
		 rp, g_rt);
	FILE *f = popen(cmd, "r");
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0] && n < max)
			wd_strlcpy(ids[n++], line, 48);
	}
	if (f)
		pclose(f);
	return n;
}

/* The sandbox whose bundle's argv ends in `tail` ("\"-\"]" for the
 * manifest's own exec), "" if none. */
static void id_with_args(const char *tail, char *out, size_t len)
{
	char ids[16][48];
	int n = runsc_ids(ids, 16);
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		char p[256];
		cleanup_free char *txt = NULL;
		size_t l;
		snprintf(p, sizeof(p), "%s/gvisor/%s/config.json", g_rt,
			 ids[i]);
		if (wd_read_file(p, &txt, &l) < 0)
			continue;
		const char *a = strstr(txt, "\"args\":[");
		const char *end = a ? strchr(a, ']') : NULL;
		size_t tl = strlen(tail);
		if (end && (size_t)(end + 1 - a) >= tl &&
		    !strncmp(end + 1 - tl, tail, tl)) {
			wd_strlcpy(out, ids[i], len);
			return;
		}
	}
}

/* Nothing of sandbox `id` is left: not in `runsc list`, no cgroup leaf in
 * any hierarchy, no bundle. Names what is left in `why`. */
static bool sandbox_gone(const char *id, char *why, size_t len)
{
	char ids[64][48];
	int n = runsc_ids(ids, 64);
	why[0] = 0;
	for (int i = 0; i < n; i++)
		if (!strcmp(ids[i], id))
			snprintf(why, len, "runsc list shows %s", id);
	char pat[256];
	glob_t g;
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/warden/%s", id);
	if (!why[0] && glob(pat, 0, NULL, &g) == 0) {
		snprintf(why, len, "cgroup %s", g.gl_pathv[0]);
		globfree(&g);
	}
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/warden/%s", id);
	if (!why[0] && access(pat, F_OK) == 0)
		snprintf(why, len, "cgroup %s", pat);
	snprintf(pat, sizeof(pat), "%s/gvisor/%s", g_rt, id);
	if (!why[0] && access(pat, F_OK) == 0)
		snprintf(why, len, "bundle %s", pat);
	return !why[0];
}

/* Poll until sandbox_gone (the refill thread destroys evicted ones). */
static bool wait_gone(const char *id, char *why, size_t len)
{
	for (int i = 0; i < 200; i++) {
		if (sandbox_gone(id, why, len))
			return true;
		usleep(50000);
	}
	return false;
}

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

/* With no read paths, the bundle still holds what the program needs to
 * start, each a read-only bind of one regular file (never a directory):
 * the loader, libc, the cache; and a program that is no ELF is refused. */
static void closure_checks(struct wd_manifest *m, struct wd_oci_opts *o)
{
	struct wd_path_list saved = m->fs_read;
	m->fs_read.n = 0;
	struct wd_err err = {0};
	json_t *c = wd_oci_config(m, o, &err);
	T_OK(c != NULL, "oci_closure_config_builds", "%s", err.msg);
	bool ld = false, libc = false, cache = false, all_files = true;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(c, "mounts"), i, v)
	{
		const char *dst =
		    json_string_value(json_object_get(v, "destination"));
		const char *src =
		    json_string_value(json_object_get(v, "source"));
		struct stat st;
		if (strcmp(json_string_value(json_object_get(v, "type")),
			   "bind"))
			continue;
		all_files &= stat(src, &st) == 0 && S_ISREG(st.st_mode);
		if (!all_files)
			printf("# bind of a non-file: %s <- %s\n", dst, src);
		ld |= !strcmp(dst, "/usr/lib64/ld-linux-x86-64.so.2") ||
		      !strcmp(dst, "/lib64/ld-linux-x86-64.so.2");
		libc |= strstr(dst, "/libc.so.6") != NULL;
		cache |= !strcmp(dst, "/etc/ld.so.cache");
	}
	T_OK(ld && libc && cache && all_files, "oci_closure_file_binds",
	     "loader %d libc %d cache %d only files %d", ld, libc, cache,
	     all_files);
	json_decref(c);
	char *notelf[] = {"/etc/hostname", NULL};
	struct wd_oci_opts o2 = *o;
	o2.argv = notelf;
	c = wd_oci_config(m, &o2, &err);
	T_OK(!c && strstr(err.msg, "/etc/hostname") &&
		 strstr(err.msg, "not an ELF"),
	     "oci_closure_non_elf_refused", "%p '%s'", (void *)c, err.msg);
	json_decref(c);
	m->fs_read = saved;
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
	closure_checks(m, &o);
}

/* Keys unused for key_idle_ms are dropped and keys past max_keys evict the
 * least recently used; either way their sandboxes are deleted. */
static void key_eviction_checks(struct wd_manifest *m)
{
	struct wd_err err = {0};
	struct wd_pool_stats st;
	char why[300], id[48];

	/* by idleness */
	struct wd_pool_config cfg = {
	    .size = 1, .idle_ms = 60000, .key_idle_ms = 3000};
	struct wd_pool *p = wd_pool_new(&cfg);
	wd_pool_register(p, m, NULL, 65534, 65534, &err);
	int r = wd_pool_wait_ready(p, 30000);
	wd_pool_register(p, m, NULL, 65534, 65534, &err); /* used now */
	id_with_args("\"-\"]", id, sizeof(id));
	T_OK(r == 0 && id[0], "pool_key_warm", "ready %d, id '%s'", r, id);
	usleep(1000000);
	wd_pool_stats(p, &st);
	T_OK(st.keys == 1 && st.ready == 1 && st.evicted_idle == 0,
	     "pool_key_kept_while_used", "keys %d ready %d evicted %llu",
	     st.keys, st.ready, (unsigned long long)st.evicted_idle);
	usleep(3000000);
	wd_pool_stats(p, &st);
	T_OK(st.keys == 0 && st.ready == 0 && st.evicted_idle == 1,
	     "pool_key_evicted_idle", "keys %d ready %d evicted_idle %llu",
	     st.keys, st.ready, (unsigned long long)st.evicted_idle);
	T_OK(id[0] && wait_gone(id, why, sizeof(why)),
	     "pool_key_idle_sandbox_deleted", "%s", why);
	wd_pool_free(p);

	/* by the cap: max_keys 2, three shapes; the least recently used
	 * goes */
	char *argv_b[] = {"/usr/bin/python3", "-", "b", NULL};
	char *argv_c[] = {"/usr/bin/python3", "-", "c", NULL};
	cfg = (struct wd_pool_config){.size = 1, .max_keys = 2};
	p = wd_pool_new(&cfg);
	wd_pool_register(p, m, NULL, 65534, 65534, &err);
	wd_pool_register(p, m, argv_b, 65534, 65534, &err);
	r = wd_pool_wait_ready(p, 30000);
	char id_a[48], id_b[48];
	id_with_args("\"-\"]", id_a, sizeof(id_a));
	id_with_args("\"-\",\"b\"]", id_b, sizeof(id_b));
	T_OK(r == 0 && id_a[0] && id_b[0], "pool_cap_two_keys_warm",
	     "ready %d a '%s' b '%s'", r, id_a, id_b);
	usleep(10000);
	wd_pool_register(p, m, NULL, 65534, 65534, &err); /* a: recent */
	wd_pool_register(p, m, argv_c, 65534, 65534, &err);
	wd_pool_stats(p, &st);
	T_OK(st.keys == 2 && st.evicted_cap == 1, "pool_key_evicted_cap",
	     "keys %d evicted_cap %llu", st.keys,
	     (unsigned long long)st.evicted_cap);
	T_OK(id_b[0] && wait_gone(id_b, why, sizeof(why)),
	     "pool_key_cap_sandbox_deleted", "%s", why);
	r = wd_pool_wait_ready(p, 30000);
	char ids[16][48];
	int n = runsc_ids(ids, 16);
	T_OK(r == 0 && n == 2 && sandbox_gone(id_b, why, sizeof(why)),
	     "pool_cap_bounds_sandboxes", "ready %d, %d in runsc list", r, n);
	/* a (kept) is a warm hit, b (evicted) a cold start */
	struct job ja = {.p = p, .m = m, .code = "print(7)\n", .tenant = "a"};
	run_job(&ja);
	struct wd_call cb = {.manifest = m,
			     .argv = argv_b,
			     .stdin_data = "print(8)\n",
			     .stdin_len = 9,
			     .caller_uid = 65534,
			     .caller_gid = 65534};
	struct wd_result rb;
	r = wd_pool_run(p, &cb, "b", &rb, &err);
	T_OK(!strcmp(enf(&ja.res, "pool"), "warm") ||
		 !strncmp(enf(&ja.res, "pool"), "warm", 4),
	     "pool_cap_kept_key_warm", "a: '%s'", enf(&ja.res, "pool"));
	T_OK(r == 0 && strstr(enf(&rb, "pool"), "not pooled") &&
		 rb.out.len >= 1 && rb.out.data[0] == '8',
	     "pool_cap_evicted_key_cold", "r %d b: '%s'", r, enf(&rb, "pool"));
	wd_result_free(&ja.res);
	wd_result_free(&rb);
	wd_pool_free(p);
}

/* A program's own exit code passes through a warm sandbox; a runsc that
 * starts nothing (here /bin/true) is a refusal, 125, naming runsc. */
static void runsc_failure_checks(struct wd_manifest *m)
{
	struct wd_pool_config cfg = {.size = 1};
	struct wd_pool *p = wd_pool_new(&cfg);
	struct wd_err err = {0};
	wd_pool_register(p, m, NULL, 65534, 65534, &err);
	wd_pool_wait_ready(p, 30000);
	struct job j = {
	    .p = p, .m = m, .code = "import sys; sys.exit(3)\n", .tenant = "x"};
	run_job(&j);
	T_OK(j.rc == 0 && j.res.exit_code == 3 && j.res.status == WD_ST_ERROR &&
		 !strncmp(enf(&j.res, "pool"), "warm", 4),
	     "pool_warm_exit_code_passthrough", "rc %d exit %d pool '%s'", j.rc,
	     j.res.exit_code, enf(&j.res, "pool"));
	wd_result_free(&j.res);
	wd_pool_free(p);

	setenv("WARDEN_RUNSC", "/bin/true", 1);
	p = wd_pool_new(&cfg);
	int r = wd_pool_register(p, m, NULL, 65534, 65534, &err);
	usleep(1500000);
	struct wd_pool_stats st;
	wd_pool_stats(p, &st);
	T_OK(r == 0 && st.ready == 0 && st.spawn_failures >= 1,
	     "pool_true_runsc_never_ready", "ready %d failures %llu", st.ready,
	     (unsigned long long)st.spawn_failures);
	memset(&j, 0, sizeof(j));
	j = (struct job){.p = p, .m = m, .code = "print(1)\n", .tenant = "x"};
	run_job(&j);
	T_OK(
	    j.rc < 0 && j.res.exit_code == 125 &&
		j.res.status == WD_ST_SANDBOX_ERROR &&
		strstr(j.err.msg, "runsc '/bin/true' exited 0 without booting"),
	    "pool_true_runsc_refused", "rc %d exit %d: %s", j.rc,
	    j.res.exit_code, j.err.msg);
	wd_result_free(&j.res);
	wd_pool_free(p);
	unsetenv("WARDEN_RUNSC");
}

int main(void)
{
	/* as wardend and warden exec do: a sandbox that dies before reading
	 * its program (a runsc that starts nothing, below) is an EPIPE on
	 * the write, not a signal that kills the host */
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		T_SKIP("gvisor_pool", "needs root");
		return T_DONE();
	}
	snprintf(g_rt, sizeof(g_rt), "/run/warden-test-pool.XXXXXX");
	if (!mkdtemp(g_rt)) {
		T_FAIL("gvisor_pool", "mkdtemp %s: %s", g_rt, strerror(errno));
		return T_DONE();
	}
	setenv("WARDEN_RUNTIME_DIR", g_rt, 1);
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

	key_eviction_checks(m);
	runsc_failure_checks(m);

	/* nothing left: bundles and runsc state */
	bool left = false;
	char buf[64];
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "ls %s/gvisor %s/runsc 2>/dev/null | grep -v '[.]lock$' | "
		 "grep -c '^wd-'",
		 g_rt, g_rt);
	FILE *f = popen(cmd, "r");
	if (f && fgets(buf, sizeof(buf), f))
		left = atoi(buf) > 0;
	if (f)
		pclose(f);
	char ids[8][48];
	T_OK(!left && runsc_ids(ids, 8) == 0, "pool_cleanup",
	     "sandboxes left behind in %s", g_rt);
	wd_manifest_free(m);
	if (!left)
		wd_rm_rf(g_rt);
	return T_DONE();
}
