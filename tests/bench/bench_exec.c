/* A one-shot `warden exec` as a whole process (what an agent CLI wrapping
 * each command pays), next to bubblewrap in the same run:
 *   tier 1 vs bwrap --bind / / /bin/true                          (<= 1.5x)
 *   tier 2 vs bwrap --ro-bind / / --unshare-all --die-with-parent (<= 1.5x)
 * Fork to reaping, /bin/true, stdio on /dev/null; the four commands
 * interleaved (load on a shared machine drifts), median of N. The first
 * calls are warm-up: they may make the per-boot probe cache and the
 * pinned BPF objects (enforce/probe_cache.c, egress_pin.c), which later
 * calls only read. Those caches (and the calls' runtime dir) are the
 * bench's own, under its temp dir and a pin dir of its own: another
 * warden build running on the node meanwhile (a test, another checkout)
 * would otherwise replace them under our calls, each of which would then
 * probe and load afresh. Nothing is asserted. */
#include "bench/bench.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int main(void)
{
	if (geteuid() != 0) {
		printf("bench_exec: needs root (warden exec without the "
		       "daemon)\n");
		return 0;
	}
	struct stat st;
	if (stat("/usr/bin/bwrap", &st) < 0) {
		printf("bench_exec: /usr/bin/bwrap missing (scripts/deps.sh "
		       "installs bubblewrap)\n");
		return 0;
	}
	const char *build = getenv("BUILD");
	char warden[4096], dir[] = "/tmp/warden-bench-exec.XXXXXX";
	char m1[4200], m2[4200];
	char *cwd = getcwd(NULL, 0);
	snprintf(warden, sizeof(warden), "%s/%s/warden", cwd,
		 build && *build ? build : "build");
	free(cwd);
	if (!mkdtemp(dir) || stat(warden, &st) < 0) {
		printf("bench_exec: no %s\n", warden);
		return 1;
	}
	char rt[4200], pins[64];
	snprintf(rt, sizeof(rt), "%s/rt", dir);
	snprintf(pins, sizeof(pins), "/sys/fs/bpf/warden-bench-%d",
		 (int)getpid());
	/* the call's uid walks through to its call dir */
	chmod(dir, 0711);
	setenv("WARDEN_RUNTIME_DIR", rt, 1);
	setenv("WARDEN_BPF_PIN_DIR", pins, 1);
	for (int t = 1; t <= 2; t++) {
		char y[1024];
		snprintf(y, sizeof(y),
			 "name: bench_exec%d\ntier: %d\ntimeout_ms: 60000\n"
			 "network: {allow: []}\n"
			 "filesystem: {read: [\"/usr\", \"/lib\", \"/lib64\", "
			 "\"/etc/ld.so.cache\"], exec: [\"/usr/bin/true\"]}\n",
			 t, t);
		snprintf(t == 1 ? m1 : m2, sizeof(m1), "%s/t%d.yaml", dir, t);
		if (wd_write_file(t == 1 ? m1 : m2, y, strlen(y), 0644) < 0)
			return 1;
	}
	char *w1[] = {warden, "exec", "--policy", m1, "--", "/bin/true", NULL};
	char *w2[] = {warden, "exec", "--policy", m2, "--", "/bin/true", NULL};
	char *b1[] = {"/usr/bin/bwrap", "--bind", "/", "/", "/bin/true", NULL};
	char *b2[] = {"/usr/bin/bwrap", "--ro-bind",	     "/",	  "/",
		      "--unshare-all",	"--die-with-parent", "/bin/true", NULL};
	char *const *cmd[4] = {w1, b1, w2, b2};
	const int n = 100;
	double *v[4];
	/* every run must succeed: a call refused at once (say, a build
	 * without warden-init for tier 2) would pass for a fast one */
	int rs, bad = 0;
	for (int k = 0; k < 4; k++) {
		v[k] = wd_calloc(n, sizeof(double));
		bench_run_status(cmd[k], &rs); /* warm-up */
		bad |= rs != 0;
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 4; k++) {
			v[k][i] = bench_run_status(cmd[k], &rs);
			bad |= rs != 0;
		}
	if (bad) {
		printf("bench_exec: a run failed (warden exec or bwrap did "
		       "not exit 0): no figures\n");
		wd_rm_rf(dir);
		wd_rm_rf(pins);
		return 1;
	}
	double med[4];
	for (int k = 0; k < 4; k++)
		med[k] = bench_median(v[k], n);
	printf("%-46s %12s %12s %8s %8s\n",
	       "warden exec, whole process (median of 100)", "warden", "bwrap",
	       "ratio", "goal");
	printf("%-46s %9.3f ms %9.3f ms %7.2fx %8s\n",
	       "tier 1 vs bwrap --bind / /", med[0], med[1], med[0] / med[1],
	       "<=1.5x");
	printf("%-46s %9.3f ms %9.3f ms %7.2fx %8s\n",
	       "tier 2 vs bwrap --ro-bind / / --unshare-all", med[2], med[3],
	       med[2] / med[3], "<=1.5x");
	wd_rm_rf(dir);
	wd_rm_rf(pins);
	return 0;
}
