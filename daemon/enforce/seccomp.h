/* seccomp: the syscall line of tiers 1 and 2 (DESIGN.md §2).
 *
 * The filter is built in the parent with libseccomp and exported to raw BPF
 * (wd_seccomp_build), so the child between fork and exec only calls
 * seccomp(2). Denied syscalls go to SECCOMP_RET_USER_NOTIF: the supervisor
 * (wd_seccomp_answer) records the event and answers EPERM — or, in audit
 * mode, lets the syscall continue. It decides on the syscall number and the
 * integer arguments the filter already judged; it never reads the tool's
 * memory (a pointer argument can change after it is checked).
 *
 * Other ABIs (i386 via int 0x80, x32) are not in the filter's arch list and
 * kill the process.
 */
#ifndef WD_SECCOMP_H
#define WD_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

#include "common/util.h"
#include "events/event.h"
#include "policy/manifest.h"

struct wd_seccomp_prog {
	struct sock_fprog prog; /* prog.filter is owned */
};

/* Build the filter for a manifest: baseline deny list + syscalls.deny +
 * socket families + inbound (listen, SO_REUSEPORT) and ICMP rules.
 * host_net: the call shares the host's network namespace (then unix
 * datagram sockets are refused too unless network.listen: see
 * seccomp.c, inbound_rules). */
int wd_seccomp_build(const struct wd_manifest *m, bool host_net,
		     struct wd_seccomp_prog *out, struct wd_err *err);
void wd_seccomp_prog_free(struct wd_seccomp_prog *p);
/* The per-boot file cache of programs by the key they are built from
 * (seccomp_cache.c): get fills out (0) or says why not (-errno: build
 * it); put keeps p for the next process, best effort. */
int wd_seccomp_file_get(const char *key, size_t key_len,
			struct wd_seccomp_prog *out);
void wd_seccomp_file_put(const char *key, size_t key_len,
			 const struct wd_seccomp_prog *p);
/* Child side: install with a new listener; returns the notify fd or -errno.
 * no_new_privs must be set. No allocation. */
int wd_seccomp_install(const struct wd_seccomp_prog *p);
/* Parent side: receive one notification on `fd`, answer it (EPERM, or
 * CONTINUE when audit), fill `ev`. Returns 1 if an event was produced, 0 if
 * the notification vanished (target died), -errno on error. */
int wd_seccomp_answer(int fd, bool audit, struct wd_event *ev);
/* The baseline deny list (names), NULL-terminated, for docs and tests. */
extern const char *const wd_seccomp_baseline[];

/* Whether this kernel has the per-pid-namespace vm.memfd_noexec sysctl
 * (6.3+): tier 2 sets it to 2 in the call's pid namespace; without it the
 * seccomp filter refuses exec-capable memfds as in tier 1. */
bool wd_memfd_noexec_sysctl(void);

/* linux/memfd.h (6.3) and fcntl.h values, stable ABI: the anonymous
 * executable rules (memfd_create without MFD_NOEXEC_SEAL, execveat of a
 * bare fd) of tier 1's filter and tier 3's OCI profile. */
#define WD_MFD_NOEXEC_SEAL 0x0008U
#define WD_AT_EMPTY_PATH   0x1000

#endif
