/* The socket family table: see families.h. */
#include "policy/families.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/util.h"

const struct wd_family wd_families[] = {
    {"unix", AF_UNIX, WD_FAM_ALWAYS},
    {"inet", AF_INET, WD_FAM_ALWAYS},
    {"inet6", AF_INET6, WD_FAM_ALWAYS},
    {"netlink", AF_NETLINK, WD_FAM_AF},
    {"packet", AF_PACKET, WD_FAM_AF},
    {"vsock", AF_VSOCK, WD_FAM_AF},
    {"alg", AF_ALG, WD_FAM_AF},
    {"xdp", AF_XDP, WD_FAM_AF},
    {"bluetooth", AF_BLUETOOTH, WD_FAM_AF},
    {"can", AF_CAN, WD_FAM_AF},
    {"tipc", AF_TIPC, WD_FAM_AF},
    {"icmp", -1, WD_FAM_ICMP},
};
const size_t wd_n_families = WD_ARRAY_SIZE(wd_families);

/* the filter's socket() rules run over AF numbers below AF_MAX */
_Static_assert(AF_XDP < AF_MAX && AF_TIPC < AF_MAX, "families below AF_MAX");

const struct wd_family *wd_family_find(const char *name)
{
	for (size_t i = 0; i < wd_n_families; i++)
		if (!strcmp(name, wd_families[i].name))
			return &wd_families[i];
	return NULL;
}

static char names_buf[256];

static void names_init(void)
{
	size_t o = 0;
	for (size_t i = 0; i < wd_n_families; i++)
		if (wd_families[i].kind != WD_FAM_ALWAYS)
			o += (size_t)snprintf(
			    names_buf + o, sizeof(names_buf) - o, "%s%s",
			    o ? ", " : "", wd_families[i].name);
}

const char *wd_family_names(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, names_init);
	return names_buf;
}
