/* Who may read a run's trace (policy/users.h wd_users_may_read_run, used
 * by wardend's trace endpoints): the run's user, its team's group, the
 * auditors group, root; nobody else, and no one by being listed only. */
#include "policy/users.h"
#include "t.h"

#include <errno.h>
#include <string.h>

static const char yaml[] = "users:\n"
			   "  alice: {uid: 1000, groups: [eng]}\n"
			   "  bob:   {uid: 1001, groups: [eng, data]}\n"
			   "  carol: {uid: 1002, groups: [ops]}\n"
			   "  dave:  {uid: 1003, groups: [auditors]}\n"
			   "groups:\n"
			   "  eng: {scopes: [\"x:*\"]}\n"
			   "  data: {scopes: []}\n"
			   "  ops: {scopes: []}\n"
			   "  auditors: {scopes: []}\n";

int main(void)
{
	struct wd_users *u = NULL;
	struct wd_diag d = {0};
	int rc = wd_users_load_str("u.yaml", yaml, strlen(yaml), &u, &d);
	T_OK(rc == 0 && u, "access-load", "rc %d", rc);
	if (!u)
		return T_DONE();
	const char *why = NULL;
	/* a run of alice's (uid 1000), agent of team "data" */
#define MAY(uid, name, ruid, ruser, team)                                      \
	wd_users_may_read_run(u, uid, name, ruid, ruser, team, &why)
	T_OK(MAY(1000, "alice", 1000, "alice", "data") &&
		 !strcmp(why, "own run"),
	     "access-own-run", "why %s", why);
	T_OK(MAY(1001, "bob", 1000, "alice", "data") && !strcmp(why, "team"),
	     "access-team", "why %s", why);
	T_OK(MAY(1003, "dave", 1000, "alice", "data") &&
		 !strcmp(why, "auditor"),
	     "access-auditor", "why %s", why);
	T_OK(MAY(0, "root", 1000, "alice", "data"), "access-root", "denied");
	T_OK(!MAY(1002, "carol", 1000, "alice", "data"), "access-other-team",
	     "allowed: %s", why);
	T_OK(!MAY(1004, "1004", 1000, "alice", "data"), "access-unlisted",
	     "allowed: %s", why);
	/* same group as the user but not the team's: eng is not team data */
	T_OK(!MAY(1001, "bob", 1000, "alice", "ops"), "access-shared-group",
	     "allowed: %s", why);
	/* a recorded uid wins over a name: another uid with the run's user
	 * name is not the run's user */
	T_OK(!MAY(1002, "alice", 1000, "alice", "x"), "access-uid-not-name",
	     "allowed: %s", why);
	/* index rows carry no uid: then the name decides */
	T_OK(MAY(1000, "alice", -1, "alice", "x"), "access-name-row",
	     "denied: %s", why);
	T_OK(!MAY(1002, "carol", 1000, "alice", ""), "access-empty-team",
	     "allowed: %s", why);
	wd_users_free(u);
	wd_diag_free(&d);
	return T_DONE();
}
