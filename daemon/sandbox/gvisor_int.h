/* Shared by gvisor.c (starting a call) and gvisor_finish.c (ending it). */
#ifndef WD_SANDBOX_GVISOR_INT_H
#define WD_SANDBOX_GVISOR_INT_H

#include <stdbool.h>

#include "sandbox/gvisor.h"

/* SIGKILL every process of the sandbox's host cgroup. */
void wd_t3_kill_all(struct wd_t3 *s);
/* runsc still knows container `id` under its root. */
bool wd_t3_runsc_has_state(const char *root, const char *id);
/* waitpid on the shim; true once it is reaped (*status set). */
bool wd_t3_reap_shim(struct wd_t3 *s, int flags, int *status);

/* gvisor_net.c: a non-empty network.allow. */
struct wd_t3_net;
/* The rules tier 3 can hold as written: 0 or -ENOTSUP with a message. */
int wd_t3_net_check(const struct wd_manifest *m, struct wd_err *err);
/* Link, host-side filter and resolver of sandbox `s` (its cgroup and
 * bundle dir exist; resolv.conf is written there). 0 or -errno: the call
 * is refused (wd_t3_net_stop undoes what was done). */
int wd_t3_net_start(struct wd_t3 *s, const struct wd_manifest *m,
		    struct wd_err *err);
/* The netns for the OCI spec, or NULL (--network=none). */
const char *wd_t3_net_ns_path(const struct wd_t3 *s);
/* The fds to wait on for its denials (up to 2, filled into p): the count. */
struct pollfd;
int wd_t3_net_fds(const struct wd_t3 *s, struct pollfd *p);
/* Its denials so far (tc drops, names refused) into res, each named as
 * it is read (an address's name is the one answered for it by then). */
/* Whether the call's resolver failed (resolver.h): the call must end. */
bool wd_t3_net_failed(const struct wd_t3 *s, char *msg, size_t n);
void wd_t3_net_drain(struct wd_t3 *s, const struct wd_call *call,
		     struct wd_result *res);
/* The sandbox is dead: the rest of its denials and the kernel's counts. */
void wd_t3_net_collect(struct wd_t3 *s, const struct wd_call *call,
		       struct wd_result *res);
void wd_t3_net_stop(struct wd_t3 *s);
void wd_t3_net_enforcement(const struct wd_t3 *s, struct wd_result *res);

#endif
