/* Shared by the unit tests that need a scratch cgroup v2 leaf of their own
 * (egress, event wake-ups, event task fields). */
#ifndef WD_TEST_CGROUP_UTIL_H
#define WD_TEST_CGROUP_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* Make <v2 root>/<name>-<pid> (the hybrid layout's unified/ when there is
 * one) and put its path in path: 0, or -errno of the mkdir. */
static __attribute__((unused)) int tc_scratch_cgroup(char *path, size_t len,
						     const char *name)
{
	const char *root =
	    access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
		? "/sys/fs/cgroup/unified"
		: "/sys/fs/cgroup";
	snprintf(path, len, "%s/%s-%d", root, name, (int)getpid());
	return mkdir(path, 0755) ? -errno : 0;
}

#endif
