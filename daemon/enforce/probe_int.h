/* Internal to the feature probe (probe.c, probe_sys.c, probe_cgroup.c,
 * probe_runsc.c). */
#ifndef WD_PROBE_INT_H
#define WD_PROBE_INT_H

#include <stdbool.h>
#include <sys/types.h>

#include "enforce/probe.h"

/* probe_cache.c: <runtime dir>/NAME, the probe's files. 0 or
 * -ENAMETOOLONG. */
int wd_probe_runtime_path(char *out, size_t len, const char *name);

/* probe.c: helpers */
/* Wait for a probe child, killing it after timeout_ms. Returns the wait
 * status, or -ETIMEDOUT / -errno. */
int wd_probe_wait_child(pid_t pid, int timeout_ms);
/* A probe child with a pipe p (O_CLOEXEC) to talk back through: the fork's
 * pid (0 in the child), or -errno with the pipe closed. */
pid_t wd_probe_fork_pipe(int p[2]);
/* Read exactly len bytes from fd (or fewer at EOF). Returns bytes read. */
ssize_t wd_probe_read_full(int fd, void *buf, size_t len);
/* Strip trailing newlines and spaces in place. */
void wd_probe_strip_nl(char *s);
/* Is word one of the comma-separated items of list? */
bool wd_probe_list_has(const char *list, const char *word);

/* probe_sys.c: each fills its fields of f, -errno in *_err on failure */
void wd_probe_seccomp(struct wd_features *f);
void wd_probe_namespaces(struct wd_features *f);
void wd_probe_io_uring(struct wd_features *f);
void wd_probe_ping(struct wd_features *f);
void wd_probe_audit(struct wd_features *f);
/* An audit answer taken from elsewhere (the one-shot calls' shared one):
 * when it was asked, for wd_probe_audit_at_ns. */
void wd_probe_audit_note_at(uint64_t at_ns);

/* probe_cgroup.c: <runtime dir>/probe-cgroup (wd_cgroup_layout_cached) */
#define WD_CGL_MAGIC "WDCGLAY\2"
struct wd_cgl_file {
	char magic[8];
	char boot_id[40];
	char build[96]; /* the writer's (wd_probe_key.build): its parser's */
	uint32_t layout_size; /* sizeof(struct wd_cgroup_layout) */
	/* unique mount ids: the v2 root's, then each v1_root's; 0 none */
	uint64_t mnt[1 + WD_CG_NCTRL];
	struct wd_cgroup_layout lay;
	uint32_t sum; /* wd_crc32 of the above: torn, not forged */
};

/* probe_runsc.c */
/* Find runsc and its version; take the `runsc do` result from the cache
 * when it matches the binary. */
void wd_probe_runsc(struct wd_features *f);
/* Unless cached: a real `runsc do /bin/true` per platform, then write the
 * cache (slow: wd_probe_full() only). */
void wd_probe_runsc_run(struct wd_features *f);

#endif
