/* Who may read a run's trace (policy/users.h wd_users_may_read_run, used
 * by wardend's trace endpoints): the run's user, its team's group, the
 * auditors group, root; nobody else, no one by being listed only, and no
 * one by a user name: the run's user is the uid that started it. */
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
#define MAY(uid, ruid, team) wd_users_may_read_run(u, uid, ruid, team, &why)
	T_OK(MAY(1000, 1000, "data") && !strcmp(why, "own run"),
	     "access-own-run", "why %s", why);
	T_OK(MAY(1001, 1000, "data") && !strcmp(why, "team"), "access-team",
	     "why %s", why);
	T_OK(MAY(1003, 1000, "data") && !strcmp(why, "auditor"),
	     "access-auditor", "why %s", why);
	T_OK(MAY(0, 1000, "data"), "access-root", "denied");
	T_OK(!MAY(1002, 1000, "data"), "access-other-team", "allowed: %s", why);
	T_OK(!MAY(1004, 1000, "data"), "access-unlisted", "allowed: %s", why);
	/* same group as the user but not the team's: eng is not team data */
	T_OK(!MAY(1001, 1000, "ops"), "access-shared-group", "allowed: %s",
	     why);
	/* a run whose uid is unknown is no one's own run: never matched by
	 * the user name (a name may be given to another uid) */
	T_OK(!MAY(1000, -1, "x"), "access-no-uid-not-own", "allowed: %s", why);
	T_OK(!MAY(1002, 1000, ""), "access-empty-team", "allowed: %s", why);
	/* the set form the index queries use: the same rule */
	struct wd_read_scope sc;
	wd_users_read_scope(u, 1001, &sc);
	T_OK(!sc.all && sc.uid == 1001 && sc.n_teams == 2 &&
		 !strcmp(sc.teams[0], "eng") && !strcmp(sc.teams[1], "data") &&
		 !sc.teams[2],
	     "scope-member", "all %s, %d teams", sc.all ? sc.all : "-",
	     sc.n_teams);
	wd_read_scope_free(&sc);
	wd_users_read_scope(u, 1003, &sc);
	T_OK(sc.all && !strcmp(sc.all, "auditor"), "scope-auditor", "all %s",
	     sc.all ? sc.all : "-");
	wd_read_scope_free(&sc);
	wd_users_read_scope(u, 1004, &sc);
	T_OK(!sc.all && sc.uid == 1004 && !sc.n_teams && sc.teams &&
		 !sc.teams[0],
	     "scope-unlisted", "%d teams", sc.n_teams);
	wd_read_scope_free(&sc);
	/* users.yaml changed: the name alice now maps to uid 1005; the runs
	 * uid 1000 started stay uid 1000's, the new alice reads none */
	struct wd_users *u2 = NULL;
	static const char renamed[] = "users:\n"
				      "  alice: {uid: 1005, groups: [eng]}\n"
				      "groups:\n"
				      "  eng: {scopes: []}\n";
	rc = wd_users_load_str("u2.yaml", renamed, strlen(renamed), &u2, &d);
	T_OK(rc == 0 && u2, "access-load-renamed", "rc %d", rc);
	T_OK(u2 && !wd_users_may_read_run(u2, 1005, 1000, "data", &why),
	     "access-renamed-name-not-owner", "allowed: %s", why);
	T_OK(u2 && wd_users_may_read_run(u2, 1000, 1000, "data", &why) &&
		 !strcmp(why, "own run"),
	     "access-renamed-uid-still-owner", "why %s", why);
	wd_users_free(u2);
	wd_users_free(u);
	wd_diag_free(&d);
	return T_DONE();
}
