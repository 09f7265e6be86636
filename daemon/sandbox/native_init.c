/* What a supervising process sets up once for tiers 1-2: tier 2's init
 * (daemon/init/warden-init.c), its own OOM protection, a traversable
 * runtime dir. See native_int.h. */
#include "sandbox/native_int.h"
#include "common/log.h"

#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_fd = -1;
static char init_path[4096];
static char init_why[512];

/* Next to the running binary (the build dir), in ../libexec/warden (make
 * install), or two levels up (build/tests/{unit,bench}); $WARDEN_INIT
 * names it elsewhere. Opened once: a file replaced later is not picked up
 * half-way through a daemon's life. */
static void find_init(void)
{
	const char *env = getenv("WARDEN_INIT");
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	static const char *const rel[] = {"warden-init",
					  "../libexec/warden/warden-init",
					  "../../warden-init"};
	char cand[4][4096];
	int nc = 0;
	if (env && *env)
		wd_strlcpy(cand[nc++], env, sizeof(cand[0]));
	if (n > 0) {
		exe[n] = 0;
		const char *dir = dirname(exe);
		for (size_t i = 0; i < WD_ARRAY_SIZE(rel) && nc < 4; i++)
			snprintf(cand[nc++], sizeof(cand[0]), "%s/%s", dir,
				 rel[i]);
	}
	for (int i = 0; i < nc; i++) {
		char *real = realpath(cand[i], NULL);
		if (!real) {
			if (env && *env && i == 0)
				break; /* named explicitly: no other one */
			continue;
		}
		struct stat st;
		int fd = open(real, O_PATH | O_CLOEXEC);
		/* root's, and only root may change it: it runs as every
		 * tier-2 call's pid 1 */
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == 0 && !(st.st_mode & 022) &&
		    (st.st_mode & 0111)) {
			init_fd = fd;
			wd_strlcpy(init_path, real, sizeof(init_path));
			free(real);
			return;
		}
		if (fd >= 0)
			close(fd);
		free(real);
		if (env && *env && i == 0)
			break; /* named explicitly: no other one */
	}
	snprintf(init_why, sizeof(init_why),
		 "tier 2: cannot run: warden-init not found (a static file "
		 "of root's, not writable by others) %s%s",
		 env && *env ? "at $WARDEN_INIT="
			     : "next to the binary or in "
			       "../libexec/warden",
		 env && *env ? env : "");
}

int wd_native_init(const char **path, struct wd_err *err)
{
	pthread_once(&once, find_init);
	if (init_fd < 0)
		return wd_err_set(err, -ENOENT, "%s", init_why);
	*path = init_path;
	return init_fd;
}

static int protect_err; /* 0, or -errno of the write that failed */

int wd_sandbox_protect_self(void)
{
	wd_native_protect_self();
	return __atomic_load_n(&protect_err, __ATOMIC_ACQUIRE);
}

void wd_native_protect_self(void)
{
	static int done;
	if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
		return;
	/* Below every tool in the node's OOM order (the kernel's global
	 * OOM killer; a call's own memory cgroup holds none of our
	 * processes). Not -1000: a child of ours that never resets it
	 * (helpers, providers) stays killable. Tier 2's init and tier 1's T
	 * are set back to 0 (native_child.c). Root only; else unchanged. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, WD_SUPERVISOR_OOM_ADJ,
			    strlen(WD_SUPERVISOR_OOM_ADJ)) < 0) {
		/* lowering it takes CAP_SYS_RESOURCE, which a root in a
		 * container may lack: wardend says so at start */
		__atomic_store_n(&protect_err, -errno, __ATOMIC_RELEASE);
		wd_debug("oom_score_adj: %s", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
}

void wd_native_init_argv(struct launch *l, int argc)
{
	l->init_argv = wd_calloc(argc + 5, sizeof(char *));
	l->init_argv[0] = wd_strdup("warden-init");
	l->init_argv[1] = wd_asprintf("%d", l->errp[1]);
	l->init_argv[2] = l->init_oomfd; /* G1 writes it */
	l->init_argv[3] = l->exec_path;
	for (int i = 0; i < argc; i++)
		l->init_argv[4 + i] = l->argv[i];
}

void wd_native_init_argv_free(struct launch *l)
{
	if (l->init_argv) { /* [2..] are borrowed */
		free(l->init_argv[0]);
		free(l->init_argv[1]);
		free(l->init_argv);
		l->init_argv = NULL;
	}
}

/* The runtime dir is on the path of every call's uid (tier 1 runs in a
 * scratch below it): one that an older build left 0700 (its wd_mkdir_p
 * gave a tier-3 runsc root's mode to every parent) is opened to o+x,
 * once a process. Only a directory of root's, never made writable. */
void wd_native_runtime_dir_open(const char *d)
{
	static int done;
	struct stat st;
	if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
		return;
	if (lstat(d, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	    (st.st_mode & 0111) != 0111 && chmod(d, (st.st_mode & 0755) | 0111))
		wd_log_errno(WD_LOG_WARN, -errno, "runtime dir '%s'", d);
}
