/* The BPF programs' ring-buffer records (bpf/lib/events.h) read back as
 * events: each field that indexes or names something checked first (the
 * record comes from the kernel, but it is still input). */
#include "enforce/egress.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/syscall.h>

#include "lib/events.h"

/* Decimal digits of v at p (no NUL); returns the end. */
static char *put_u32(char *p, uint32_t v)
{
	char t[10];
	int n = 0;
	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = t[--n];
	return p;
}

/* "a.b.c.d:port" / "[v6]:port". The v4 form (every egress denial of an
 * IPv4 peer) is written by hand: snprintf was the consumer's largest cost
 * per event. len must be >= INET6_ADDRSTRLEN + 8. */
static void fmt_addr(char *buf, size_t len, const uint8_t a[16], uint16_t port)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0,    0,
					     0, 0, 0, 0, 0xff, 0xff};
	if (!memcmp(a, v4mapped, 12)) {
		char *p = buf;
		for (int i = 12; i < 16; i++) {
			p = put_u32(p, a[i]);
			*p++ = i < 15 ? '.' : ':';
		}
		*put_u32(p, port) = 0;
	} else {
		char s[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, a, s, sizeof(s));
		snprintf(buf, len, "[%s]:%u", s, port);
	}
}

struct kind_info {
	const char *name;
	enum wd_event_source src;
	int nr; /* syscall number when the hook has exactly one, else -1 */
	const char *sys;
};

static const struct kind_info kinds[WD_KEV_KIND_MAX] = {
    [WD_KEV_CONNECT] = {"connect", WD_SRC_BPF, __NR_connect, "connect"},
    [WD_KEV_SENDMSG] = {"sendmsg", WD_SRC_BPF, -1, ""},
    [WD_KEV_SOCKET_CREATE] = {"socket", WD_SRC_LSM, __NR_socket, "socket"},
    [WD_KEV_SOCKET_CONNECT] = {"connect", WD_SRC_LSM, __NR_connect, "connect"},
    [WD_KEV_FILE_OPEN] = {"file_open", WD_SRC_LSM, -1, ""},
    [WD_KEV_BPRM_CHECK] = {"exec", WD_SRC_LSM, -1, ""},
    [WD_KEV_PTRACE] = {"ptrace", WD_SRC_LSM, -1, ""},
    [WD_KEV_TASK_KILL] = {"kill", WD_SRC_LSM, -1, ""},
    [WD_KEV_BPF] = {"bpf", WD_SRC_LSM, __NR_bpf, "bpf"},
    [WD_KEV_SB_MOUNT] = {"mount", WD_SRC_LSM, -1, ""},
    [WD_KEV_MOVE_MOUNT] = {"move_mount", WD_SRC_LSM, __NR_move_mount,
			   "move_mount"},
    [WD_KEV_KMOD_REQUEST] = {"module_request", WD_SRC_LSM, -1, ""},
    [WD_KEV_CONNECT_UNIX] = {"connect_unix", WD_SRC_BPF, __NR_connect,
			     "connect"},
    [WD_KEV_SENDMSG_UNIX] = {"sendmsg_unix", WD_SRC_BPF, -1, ""},
    [WD_KEV_BIND] = {"bind", WD_SRC_BPF, __NR_bind, "bind"},
};

int wd_kevent_to_event(const void *data, size_t size, int64_t boot_to_wall_ns,
		       struct wd_event *out)
{
	const struct wd_kevent *k = data;
	/* The record comes from the kernel but is still input: check size
	 * and every field used as an index or enum before use. */
	if (size < WD_KEV_SHORT_SIZE || k->kind == WD_KEV_NONE ||
	    k->kind >= WD_KEV_KIND_MAX || k->verdict > WD_KEV_AUDITED ||
	    k->err < 0 || k->err > 4095)
		return -EINVAL;
	const struct kind_info *ki = &kinds[k->kind];
	memset(out, 0, sizeof(*out));
	out->ts_ns = (uint64_t)((int64_t)k->ts_ns + boot_to_wall_ns);
	out->cgroup_id = k->cgroup_id;
	out->pid = (int32_t)k->tgid;
	out->uid = k->uid;
	out->source = ki->src;
	wd_strlcpy(out->kind, ki->name, sizeof(out->kind));
	out->syscall_nr = ki->nr;
	wd_strlcpy(out->syscall, ki->sys, sizeof(out->syscall));
	out->err = k->verdict == WD_KEV_AUDITED ? 0 : k->err;
	out->verdict = k->verdict == WD_KEV_AUDITED ? WD_VERDICT_AUDITED
						    : WD_VERDICT_DENIED;
	/* the path is copied where it is used, bounded: never trust the NUL */
	_Static_assert(sizeof(out->target) >= WD_KEV_PATH_LEN,
		       "target holds a path");
	_Static_assert(sizeof(out->target) >= INET6_ADDRSTRLEN + 8,
		       "target holds [v6]:port");
	const size_t plen = size >= sizeof(*k)
				? strnlen(k->path, WD_KEV_PATH_LEN - 1)
				: 0; /* a short record: no path */
	switch (k->kind) {
	case WD_KEV_CONNECT:
	case WD_KEV_SENDMSG:
	case WD_KEV_SOCKET_CONNECT:
	case WD_KEV_BIND:
		if (k->family == AF_INET || k->family == AF_INET6) {
			fmt_addr(out->target, sizeof(out->target), k->addr,
				 k->port);
			size_t tl = strlen(out->target);
			if (k->kind == WD_KEV_BIND &&
			    k->arg == WD_KEV_BIND_REUSEADDR)
				snprintf(out->target + tl,
					 sizeof(out->target) - tl,
					 " (udp, SO_REUSEADDR)");
		} else if (plen)
			memcpy(out->target, k->path, plen);
		else
			snprintf(out->target, sizeof(out->target), "family=%u",
				 k->family);
		break;
	case WD_KEV_SOCKET_CREATE:
		snprintf(out->target, sizeof(out->target),
			 "family=%u type=%u protocol=%u", k->family, k->arg2,
			 k->protocol);
		break;
	case WD_KEV_PTRACE:
		snprintf(out->target, sizeof(out->target), "pid %u", k->arg);
		break;
	case WD_KEV_TASK_KILL:
		snprintf(out->target, sizeof(out->target), "pid %u signal %u",
			 k->arg, k->arg2);
		break;
	case WD_KEV_BPF:
		snprintf(out->target, sizeof(out->target), "cmd %u", k->arg);
		break;
	default:
		memcpy(out->target, k->path, plen);
		break;
	}
	return 0;
}
