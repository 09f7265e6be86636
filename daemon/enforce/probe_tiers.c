/* Which tiers a node can run at all, from the probes: what `warden status`
 * reports as each tier's prerequisite (cli/status.c) and what the fleet
 * registers as capacity per tier (fleet/fleet.c), stated once here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "enforce/probe.h"

/* "EPERM (Operation not permitted)" */
static const char *etext(int err, char *buf, size_t len)
{
	int e = err < 0 ? -err : err;
	const char *name = strerrorname_np(e);
	snprintf(buf, len, "%s (%s)", name ? name : "E?", strerror(e));
	return buf;
}

bool wd_tier_runs(const struct wd_features *f, int tier, char *why, size_t len)
{
	char e[96];
	if (tier == 1)
		return true;
	if (tier == 2) {
		/* net aside: a call with an empty allow list makes its own */
		for (int i = 0; i < WD_NS_N; i++)
			if (i != WD_NS_NET && f->ns_err[i]) {
				snprintf(why, len,
					 "cannot create a %s namespace: %s",
					 wd_ns_name(i),
					 etext(f->ns_err[i], e, sizeof(e)));
				return false;
			}
		return true;
	}
	if (tier != 3)
		snprintf(why, len, "no tier %d", tier);
	else if (f->runsc_err == -ENOENT)
		snprintf(why, len,
			 "runsc not found ($WARDEN_RUNSC, PATH, /usr/bin, "
			 "/usr/sbin)");
	else if (!f->runsc)
		snprintf(why, len, "runsc %s does not run: %s%s%s",
			 f->runsc_path, etext(f->runsc_err, e, sizeof(e)),
			 f->runsc_note[0] ? ": " : "", f->runsc_note);
	else if (!f->runsc_tested)
		snprintf(why, len, "runsc not tested (run `warden status`)");
	else if (!f->runsc_platform[0])
		snprintf(why, len,
			 "`runsc do /bin/true` fails on ptrace and systrap: "
			 "%s%s%s",
			 etext(f->runsc_run_err, e, sizeof(e)),
			 f->runsc_note[0] ? ": " : "", f->runsc_note);
	else
		return true;
	return false;
}
