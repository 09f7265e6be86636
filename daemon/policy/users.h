/* policy/users.yaml: who may do what (DESIGN.md §4; seed 000 step 4: tools
 * run "on behalf of the user", so the broker asks here whether the calling
 * uid holds the scopes a tool's manifest names).
 *
 *   users:                         # by name; uid is the SO_PEERCRED uid
 *     root:  {uid: 0, groups: [admin]}
 *     alice: {uid: 1000, groups: [eng]}
 *     bob:   {uid: 1001, groups: [eng], scopes: [email:send]}
 *   groups:                        # group -> scopes
 *     admin: {scopes: ["*"]}
 *     eng:   {scopes: ["docs:read", "code:*"]}
 *   approvers:                     # who may approve gated tool calls
 *     users: [bob]
 *     groups: [admin]
 *
 * A scope grant is an exact scope, "prefix:*" (any scope starting with
 * "prefix:") or "*" (every scope). A uid not listed has no scopes and is
 * not an approver (deny by default). Strict parsing as for manifests:
 * unknown keys, duplicate uids, unknown group references are errors.
 */
#ifndef WD_USERS_H
#define WD_USERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/manifest.h" /* struct wd_diag */

struct wd_user {
	char *name;
	uint32_t uid;
	char **groups; /* NULL-terminated */
	int n_groups;
	char **scopes; /* granted directly, NULL-terminated */
	int n_scopes;
};

struct wd_group {
	char *name;
	char **scopes; /* NULL-terminated */
	int n_scopes;
};

struct wd_users {
	char *source;
	struct wd_user *users;
	int n_users;
	struct wd_group *groups;
	int n_groups;
	char **approver_users; /* user names */
	int n_approver_users;
	char **approver_groups; /* group names */
	int n_approver_groups;
};

/* 0, or -EINVAL with messages in diag (*out NULL), or -errno (I/O). */
int wd_users_load_file(const char *path, struct wd_users **out,
		       struct wd_diag *diag);
int wd_users_load_str(const char *name, const char *text, size_t len,
		      struct wd_users **out, struct wd_diag *diag);
void wd_users_free(struct wd_users *u);

const struct wd_user *wd_users_by_uid(const struct wd_users *u, uid_t uid);
const struct wd_user *wd_users_by_name(const struct wd_users *u,
				       const char *name);
/* The user's name, or NULL if the uid is not listed. */
const char *wd_users_name(const struct wd_users *u, uid_t uid);
/* Every scope grant the uid holds (its own and its groups'), deduplicated.
 * *out is a malloc'd NULL-terminated array of pointers into `u` (free only
 * the array). Returns the count (0 for an unknown uid). */
int wd_users_scopes_for_uid(const struct wd_users *u, uid_t uid,
			    const char ***out);
/* Does the uid hold `scope` (through a grant, wildcards included)? */
bool wd_users_has_scope(const struct wd_users *u, uid_t uid, const char *scope);
bool wd_users_is_approver(const struct wd_users *u, uid_t uid);
/* May `caller` read a run's trace (records and payloads)? Yes for root,
 * the run's own user (by uid: run_uid, -1 when unknown, never the caller's
 * own run), a member of the group named like the run's team, and
 * WD_AUDITORS_GROUP. Never by user name: a name in users.yaml may be given
 * to another uid, and a uid without a passwd name is recorded as its
 * decimal uid, which is also a valid users.yaml name.
 * *why (may be NULL) gets the reason either way (static text). */
#define WD_AUDITORS_GROUP "auditors"
bool wd_users_may_read_run(const struct wd_users *u, uid_t caller,
			   int64_t run_uid, const char *run_team,
			   const char **why);
/* The same rule as a set, for queries over many runs (the trace index):
 * `all` non-NULL (the reason: "root", "auditor") reads every run; else the
 * runs of `uid` and those whose team is one of `teams` (the caller's
 * groups: pointers into the wd_users, valid while it is). */
struct wd_read_scope {
	const char *all;
	uid_t uid;
	const char **teams; /* NULL-terminated, malloc'd array */
	int n_teams;
};
void wd_users_read_scope(const struct wd_users *u, uid_t caller,
			 struct wd_read_scope *s);
void wd_read_scope_free(struct wd_read_scope *s);
/* Does a grant ("*", "docs:*", "docs:read") cover a scope? */
bool wd_scope_match(const char *grant, const char *scope);

#endif
