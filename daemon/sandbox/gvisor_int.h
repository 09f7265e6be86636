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

#endif
