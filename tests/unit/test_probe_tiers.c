/* Which tiers a node can run (enforce/probe_tiers.c), what the fleet
 * registers as capacity per tier: tier 1 always, tier 2 not without one of
 * a container's namespaces (net aside), tier 3 not without a runsc that ran
 * a sandbox on some platform. Pure: judged on a features struct. */
#include <errno.h>

#include "../t.h"
#include "enforce/probe.h"

int main(void)
{
	struct wd_features f = {0};
	char why[256];
	snprintf(f.runsc_path, sizeof(f.runsc_path), "/usr/bin/runsc");
	f.runsc = true;
	f.runsc_tested = true;
	snprintf(f.runsc_platform, sizeof(f.runsc_platform), "ptrace");
	T_OK(wd_tier_runs(&f, 1, why, sizeof(why)) &&
		 wd_tier_runs(&f, 2, why, sizeof(why)) &&
		 wd_tier_runs(&f, 3, why, sizeof(why)),
	     "tiers-all", "%s", why);

	f.ns_err[WD_NS_NET] = -EPERM; /* made later, only when allow: [] */
	T_OK(wd_tier_runs(&f, 2, why, sizeof(why)), "tier2-net-aside", "%s",
	     why);
	f.ns_err[WD_NS_MNT] = -EPERM;
	T_OK(!wd_tier_runs(&f, 2, why, sizeof(why)) &&
		 strstr(why, "cannot create a") &&
		 strstr(why, "EPERM (Operation not permitted)"),
	     "tier2-no-mount-ns", "%s", why);
	T_OK(wd_tier_runs(&f, 1, why, sizeof(why)), "tier1-still", "%s", why);

	f.runsc_tested = false;
	f.runsc_platform[0] = 0;
	T_OK(!wd_tier_runs(&f, 3, why, sizeof(why)) &&
		 strstr(why, "runsc not tested"),
	     "tier3-untested", "%s", why);
	f.runsc_tested = true;
	f.runsc_run_err = -ETIMEDOUT;
	snprintf(f.runsc_note, sizeof(f.runsc_note), "no ptrace");
	T_OK(!wd_tier_runs(&f, 3, why, sizeof(why)) &&
		 strstr(why, "fails on ptrace and systrap: ETIMEDOUT") &&
		 strstr(why, "no ptrace"),
	     "tier3-no-platform", "%s", why);
	f.runsc = false;
	f.runsc_err = -ENOENT;
	f.runsc_path[0] = 0;
	T_OK(!wd_tier_runs(&f, 3, why, sizeof(why)) &&
		 strstr(why, "runsc not found ($WARDEN_RUNSC"),
	     "tier3-no-runsc", "%s", why);
	f.runsc_err = -EACCES;
	snprintf(f.runsc_path, sizeof(f.runsc_path), "/opt/runsc");
	T_OK(!wd_tier_runs(&f, 3, why, sizeof(why)) &&
		 strstr(why, "runsc /opt/runsc does not run: EACCES"),
	     "tier3-runsc-broken", "%s", why);
	T_OK(!wd_tier_runs(&f, 4, why, sizeof(why)) &&
		 !wd_tier_runs(&f, 0, why, sizeof(why)),
	     "no-tier-4", "%s", why);
	return T_DONE();
}
