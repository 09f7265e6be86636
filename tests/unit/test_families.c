/* One table of socket families (policy/families.c): every name the parser
 * accepts is one the seccomp builder holds, every other name fails to
 * load, and the filter built for each family allows what it names and
 * nothing more of ICMP (netlink stands for the listed AFs: creating
 * sockets of the others could load kernel modules). The filter is judged by
 * installing it in a forked child and calling socket() there (seccomp_export of
 * the same rules is what tiers 1-2 install). */
#include "t.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "enforce/seccomp.h"
#include "policy/families.h"
#include "policy/manifest.h"

static struct wd_manifest *load(const char *fams, struct wd_diag *d)
{
	char y[512];
	snprintf(y, sizeof(y),
		 "name: fam\ntier: 1\nnetwork: {allow: [], families: [%s]}\n",
		 fams);
	struct wd_manifest *m = NULL;
	wd_manifest_load_str("fam.yaml", y, strlen(y), &m, d);
	return m;
}

/* socket(af, type, proto) under the manifest's filter, in a child: the
 * filter answers through user notification, which nobody serves here, so
 * a refused call would block: the child's result is "refused" when it is
 * still waiting after 200 ms (then killed), "allowed" when socket()
 * returned anything but a block (the kernel may still say EAFNOSUPPORT
 * etc.: the filter let it through). */
static int allowed(const struct wd_seccomp_prog *p, int af, int type, int proto)
{
	pid_t c = fork();
	if (c == 0) {
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		int fd = wd_seccomp_install(p);
		if (fd < 0)
			_exit(3);
		socket(af, type, proto);
		_exit(0);
	}
	for (int i = 0; i < 40; i++) {
		int st;
		if (waitpid(c, &st, WNOHANG) == c)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : -1;
		usleep(5000);
	}
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return 0;
}

int main(void)
{
	char name[96];
	for (size_t i = 0; i < wd_n_families; i++) {
		const struct wd_family *f = &wd_families[i];
		struct wd_diag d = {0};
		struct wd_manifest *m = load(f->name, &d);
		snprintf(name, sizeof(name), "family-%s-loads", f->name);
		T_OK(m != NULL, name, "%s", d.n ? d.msgs[0] : "?");
		wd_diag_free(&d);
		if (!m)
			continue;
		struct wd_seccomp_prog p;
		struct wd_err e = {0};
		int r = wd_seccomp_build(m, true, &p, &e);
		snprintf(name, sizeof(name), "family-%s-held-by-seccomp",
			 f->name);
		T_OK(r == 0, name, "%s", e.msg);
		/* netlink only: a socket() of another family may make the
		 * kernel load its module (request_module), on the host */
		if (r == 0 && f->af == AF_NETLINK) {
			snprintf(name, sizeof(name), "family-%s-allowed",
				 f->name);
			T_OK(allowed(&p, f->af, SOCK_DGRAM, 0) == 1, name,
			     "socket(%d) refused", f->af);
		}
		if (r == 0)
			wd_seccomp_prog_free(&p);
		wd_manifest_free(m);
	}
	/* icmp: ping sockets only when listed; raw never */
	struct wd_diag d = {0};
	struct wd_manifest *with = load("icmp", &d), *without = load("", &d);
	struct wd_seccomp_prog pw, po;
	struct wd_err e = {0};
	if (with && without && !wd_seccomp_build(with, true, &pw, &e) &&
	    !wd_seccomp_build(without, true, &po, &e)) {
		T_OK(allowed(&pw, AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == 1,
		     "icmp-listed-ping4-allowed", "refused");
		T_OK(allowed(&pw, AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC,
			     IPPROTO_ICMPV6) == 1,
		     "icmp-listed-ping6-allowed", "refused");
		T_OK(allowed(&po, AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == 0,
		     "icmp-unlisted-ping4-refused", "allowed");
		T_OK(allowed(&po, AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK,
			     IPPROTO_ICMPV6) == 0,
		     "icmp-unlisted-ping6-flags-refused", "allowed");
		T_OK(allowed(&pw, AF_INET, SOCK_RAW, IPPROTO_ICMP) == 0,
		     "icmp-listed-raw-refused", "allowed");
		T_OK(allowed(&po, AF_INET, SOCK_DGRAM, 0) == 1, "udp-allowed",
		     "refused");
		wd_seccomp_prog_free(&pw);
		wd_seccomp_prog_free(&po);
	} else {
		T_FAIL("icmp-filters-build", "%s", e.msg);
	}
	wd_manifest_free(with);
	wd_manifest_free(without);
	wd_diag_free(&d);
	/* names outside the table never load */
	static const char *const bad[] = {"key", "rds", "appletalk", "ICMP"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wd_diag bd = {0};
		struct wd_manifest *m = load(bad[i], &bd);
		snprintf(name, sizeof(name), "family-%s-refused", bad[i]);
		T_OK(!m && bd.n == 1 && strstr(bd.msgs[0], "fam.yaml:3:") &&
			 strstr(bd.msgs[0], "is not a socket family"),
		     name, "%s", bd.n ? bd.msgs[0] : "loaded");
		wd_manifest_free(m);
		wd_diag_free(&bd);
	}
	return T_DONE();
}
