/* Which tiers a node can run at all: what the fleet registers as its
 * capacity per tier (fleet/fleet.c), from the same probes `warden status`
 * reports on. */
#include <stdio.h>
#include <string.h>

#include "enforce/probe.h"

bool wd_tier_runs(const struct wd_features *f, int tier, char *why, size_t len)
{
	if (tier == 2) {
		for (int i = 0; i < WD_NS_N; i++)
			if (i != WD_NS_NET && f->ns_err[i]) {
				snprintf(why, len,
					 "cannot create a %s namespace: %s",
					 wd_ns_name(i),
					 strerror(-f->ns_err[i]));
				return false;
			}
	} else if (tier == 3) {
		if (!f->runsc) {
			snprintf(why, len, "no runsc that runs (%s%s%s)",
				 f->runsc_path[0] ? f->runsc_path : "not found",
				 f->runsc_err ? ": " : "",
				 f->runsc_err ? strerror(-f->runsc_err) : "");
			return false;
		}
		if (!f->runsc_platform[0]) {
			snprintf(why, len,
				 "`runsc do /bin/true` fails on every platform "
				 "(%s)%s%s",
				 f->runsc_run_err ? strerror(-f->runsc_run_err)
						  : "not run",
				 f->runsc_note[0] ? ": " : "", f->runsc_note);
			return false;
		}
	} else if (tier != 1) {
		snprintf(why, len, "no tier %d", tier);
		return false;
	}
	return true;
}
