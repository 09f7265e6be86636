/* `warden status`: the report as aligned, wrapped text. */
#include "cli/status_int.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text
 * -------------------------------------------------------------------- */

#define LABEL_W 22

static void line(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void wrapped(int indent, const char *prefix, const char *text);

static void line(const char *label, const char *fmt, ...)
{
	va_list ap;
	char pfx[64], *v;
	snprintf(pfx, sizeof(pfx), "%-*s ", LABEL_W, label);
	va_start(ap, fmt);
	if (vasprintf(&v, fmt, ap) < 0)
		abort();
	va_end(ap);
	wrapped(2, pfx, v);
	free(v);
}

static const char *okerr(int err)
{
	static char buf[128];
	if (!err)
		return "yes";
	snprintf(buf, sizeof(buf), "no: %s", ET(err));
	return buf;
}

/* Print `text` wrapped at 78 columns, continuation lines indented under
 * the text (after `prefix`). */
static void wrapped(int indent, const char *prefix, const char *text)
{
	const int width = 78;
	int start = indent + (int)strlen(prefix);
	int col = start;
	printf("%*s%s", indent, "", prefix);
	for (const char *p = text; *p;) {
		while (*p == ' ')
			p++;
		size_t w = strcspn(p, " ");
		if (!w)
			break;
		if (col > start && col + 1 + (int)w > width) {
			printf("\n%*s", start, "");
			col = start;
		} else if (col > start) {
			putchar(' ');
			col++;
		}
		printf("%.*s", (int)w, p);
		col += (int)w;
		p += w;
	}
	putchar('\n');
}

static bool same_cell(const struct cell *a, const struct cell *b)
{
	return a->ok == b->ok && !strcmp(a->text, b->text) &&
	       !strcmp(a->note ? a->note : "", b->note ? b->note : "");
}

void wd_status_text_report(const struct report *r)
{
	const struct wd_features *f = r->f;
	printf("Kernel\n");
	line("release", "%s (%s)", f->kernel_release, f->machine);
	line("BTF", "%s",
	     f->btf && !f->btf_err ? "yes (/sys/kernel/btf/vmlinux)"
				   : okerr(f->btf_err ? f->btf_err : -ENOENT));
	line("LSM list", "%s", f->lsm_list[0] ? f->lsm_list : "unknown");
	if (f->lsm_source[0])
		line("  source", "%s", f->lsm_source);
	if (f->lsm_err)
		line("", "(securityfs: %s)", ET(f->lsm_err));

	printf("\nBPF\n");
	line("BPF LSM", "%s",
	     !f->lsm_list[0]	  ? "unknown: the LSM list is unreadable"
	     : f->bpf_in_lsm_list ? "in the LSM list"
				  : "not in the LSM list");
	line("  lsm program loads", "%s", okerr(f->lsm_prog_err));
	int n_active = 0;
	bool same = true;
	for (int h = 0; h < r->n_hooks; h++) {
		n_active += r->hooks[h].active;
		same = same && !r->hooks[h].active &&
		       !strcmp(r->hooks[h].reason, r->hooks[0].reason);
	}
	if (r->n_hooks && same) {
		line("  hooks", "none of %d active: %s", r->n_hooks,
		     r->hooks[0].reason);
	} else {
		line("  hooks", "%d of %d active", n_active, r->n_hooks);
		for (int h = 0; h < r->n_hooks; h++) {
			char lbl[64];
			snprintf(lbl, sizeof(lbl), "    %s", r->hooks[h].hook);
			line(lbl, "%s (%s)%s%s",
			     r->hooks[h].active ? "active" : "no",
			     r->hooks[h].attach, r->hooks[h].active ? "" : ": ",
			     r->hooks[h].reason);
		}
	}
	line("trampoline (fentry)", "%s", okerr(f->trampoline_err));
	line("cgroup/connect4", "%s", okerr(f->cgroup_sockaddr_err));
	line("ring buffer", "%s", okerr(f->ringbuf_err));

	printf("\nLandlock, seccomp, namespaces\n");
	if (f->landlock_abi > 0)
		line("Landlock", "ABI %d, errata 0x%x", f->landlock_abi,
		     f->landlock_errata > 0 ? f->landlock_errata : 0);
	else
		line("Landlock", "%s", okerr(f->landlock_abi));
	line("seccomp filter", "%s", okerr(f->seccomp_filter_err));
	line("seccomp user-notify", "%s", okerr(f->seccomp_notify_err));
	line("  FLAG_CONTINUE", "%s", okerr(f->seccomp_continue_err));
	line("  ADDFD", "%s", okerr(f->seccomp_addfd_err));
	line("user namespaces", "%s", okerr(f->userns_err));
	char nsb[256] = "";
	size_t o = 0;
	for (int i = 0; i < WD_NS_N; i++)
		o += snprintf(nsb + o, sizeof(nsb) - o, "%s%s%s", i ? ", " : "",
			      wd_ns_name(i), f->ns_err[i] ? " NO" : "");
	line("namespaces (tier 2)", "%s", nsb);
	for (int i = 0; i < WD_NS_N; i++)
		if (f->ns_err[i])
			line("", "%s: %s", wd_ns_name(i), ET(f->ns_err[i]));
	if (f->io_uring_disabled >= 0)
		line("io_uring", "io_uring_disabled=%d (%s)",
		     f->io_uring_disabled,
		     f->io_uring_disabled == 0	 ? "enabled for all"
		     : f->io_uring_disabled == 1 ? "restricted to a group"
						 : "disabled");
	else
		line("io_uring", "unknown: %s", ET(f->io_uring_err));
	if (f->ping_err)
		line("ping_group_range", "unknown: %s", ET(f->ping_err));
	else
		line("ping_group_range",
		     "net.ipv4.ping_group_range=%ld %ld (%s; seccomp refuses "
		     "ping sockets unless network.families lists icmp)",
		     f->ping_gid_lo, f->ping_gid_hi,
		     f->ping_gid_lo > f->ping_gid_hi
			 ? "no gid may open ping sockets"
			 : "these gids may open ping sockets");
	if (f->audit)
		line("audit", "readable; enabled=%d", f->audit_enabled);
	else
		line("audit", "%s", okerr(f->audit_err));

	printf("\ncgroups\n");
	line("layout", "%s",
	     f->cg.hybrid	? "hybrid (v2 + v1 controllers)"
	     : f->cg.v2_root[0] ? "v2 (unified)"
	     : f->cg.n_v1	? "v1 only"
				: "none found");
	line("v2 root", "%s (controllers: %s)",
	     f->cg.v2_root[0] ? f->cg.v2_root : "-",
	     f->cg.v2_controllers[0] ? f->cg.v2_controllers : "none");
	for (int c = 0; c < WD_CG_NCTRL; c++)
		line(wd_cg_ctrl_name(c), "%s%s",
		     f->cg.v2_ctrl[c]	   ? "v2 at "
		     : f->cg.v1_root[c][0] ? "v1 at "
					   : "not available",
		     f->cg.v2_ctrl[c]	   ? f->cg.v2_root
		     : f->cg.v1_root[c][0] ? f->cg.v1_root[c]
					   : "");

	printf("\nrunsc (tier 3)\n");
	if (!f->runsc) {
		line("runsc", "%s", okerr(f->runsc_err));
	} else {
		line("runsc", "%s, version %s", f->runsc_path,
		     f->runsc_version[0] ? f->runsc_version : "?");
		if (f->runsc_platform[0])
			line("platform", "%s works (do /bin/true)%s",
			     f->runsc_platform,
			     f->runsc_cached ? " [cached]" : "");
		else if (f->runsc_tested)
			line("platform", "none works: %s %s",
			     ET(f->runsc_run_err), f->runsc_note);
		else
			line("platform", "not tested");
		line("OCI seccomp", "%s",
		     f->runsc_oci_seccomp ? "yes (--oci-seccomp)" : "no");
	}

	printf("\nEnforcement per manifest constraint\n");
	for (int i = 0; i < r->n_rows; i++) {
		const struct row *w = &r->rows[i];
		printf("  %s\n", w->constraint);
		for (int t = 0; t < 3; t++) {
			const struct cell *c = &w->t[t];
			char pfx[48];
			if (t > 0 && same_cell(c, &w->t[t - 1])) {
				printf("    tier %d  same as tier %d\n", t + 1,
				       t);
				continue;
			}
			snprintf(pfx, sizeof(pfx), "tier %d  %s", t + 1,
				 c->ok ? "" : "cannot enforce: ");
			wrapped(4, pfx, c->text);
			if (c->note)
				wrapped(12, "note: ", c->note);
		}
	}

	printf("\nmode: audit can watch\n");
	for (int i = 0; i < r->n_watch; i++)
		if (r->watch[i].ok) {
			char pfx[48];
			snprintf(pfx, sizeof(pfx), "%-18s ",
				 r->watch[i].constraint);
			wrapped(2, pfx, r->watch[i].text);
		}
	printf("\nmode: audit cannot watch (enforced even in audit mode)\n");
	for (int i = 0; i < r->n_watch; i++)
		if (!r->watch[i].ok) {
			char pfx[48];
			snprintf(pfx, sizeof(pfx), "%-18s ",
				 r->watch[i].constraint);
			wrapped(2, pfx, r->watch[i].text);
		}
}
