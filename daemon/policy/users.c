/* policy/users.yaml: users, groups -> scopes, approvers (see users.h). */
#include "policy/users.h"
#include "policy/ywalk.h"

#include <string.h>

struct uctx {
	struct wd_users *u;
	struct wd_user *cur_user;
	struct wd_group *cur_group;
	/* nodes, for messages in the cross-reference pass */
	yaml_node_t **user_nodes;	/* per user: its mapping */
	yaml_node_t **user_group_nodes; /* per user: its groups list or NULL */
	yaml_node_t *ap_users, *ap_groups;
	bool has_users;
	/* the keys of one user / group entry (set by f_users / f_groups) */
	const struct wd_y_key *user_keys, *group_keys;
	size_t n_user_keys, n_group_keys;
};

static int scope_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		       void *arg)
{
	bool ok = *s && strlen(s) <= 128;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_-.:/*", *p)))
			ok = false;
	/* '*' only as the whole grant or as the last character after ':' */
	const char *star = strchr(s, '*');
	if (star && !(star[1] == 0 && (star == s || star[-1] == ':')))
		ok = false;
	if (!ok) {
		wd_y_err(w, item,
			 "%s: '%s' is not a scope grant (scope, \"prefix:*\" "
			 "or \"*\")",
			 (const char *)arg, s);
		return -EINVAL;
	}
	return 0;
}

static int name_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		      void *arg)
{
	if (!wd_y_valid_name(s)) {
		wd_y_err(w, item, "%s: '%s' must match [a-z0-9_-]{1,64}",
			 (const char *)arg, s);
		return -EINVAL;
	}
	return 0;
}

/* ---- users
 * ------------------------------------------------------------------- */

static int u_uid(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	uint64_t x;
	/* (uid_t)-1 is "no uid" for the kernel: never a valid entry */
	if (wd_y_uint(w, v, "'uid'", 0, 4294967294u, &x) < 0)
		return -EINVAL;
	for (int i = 0; i < c->u->n_users - 1; i++)
		if (c->u->users[i].uid == x) {
			wd_y_err(w, v, "uid %llu is already user '%s'",
				 (unsigned long long)x, c->u->users[i].name);
			return -EINVAL;
		}
	c->cur_user->uid = (uint32_t)x;
	return 0;
}

static int u_groups(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	c->user_group_nodes[c->u->n_users - 1] = v;
	return wd_y_strlist(w, v, "'groups'", &c->cur_user->groups,
			    &c->cur_user->n_groups, name_check, "'groups'");
}

static int u_scopes(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	return wd_y_strlist(w, v, "'scopes'", &c->cur_user->scopes,
			    &c->cur_user->n_scopes, scope_check, "'scopes'");
}

static bool user_seen(void *o, const char *name)
{
	return wd_users_by_name(((struct uctx *)o)->u, name) != NULL;
}

static int user_add(struct wd_ywalk *w, yaml_node_t *k, char *name,
		    yaml_node_t *val, void *o)
{
	struct uctx *c = o;
	struct wd_users *u = c->u;
	size_t n = (size_t)u->n_users + 1;
	u->users = wd_realloc(u->users, n * sizeof(*u->users));
	c->user_nodes = wd_realloc(c->user_nodes, n * sizeof(*c->user_nodes));
	c->user_group_nodes =
	    wd_realloc(c->user_group_nodes, n * sizeof(*c->user_group_nodes));
	u->users[n - 1] = (struct wd_user){.name = name};
	c->user_nodes[n - 1] = k;
	c->user_group_nodes[n - 1] = NULL;
	u->n_users = (int)n;
	c->cur_user = &u->users[n - 1];
	int rc = wd_y_map(w, val, "user", c->user_keys, c->n_user_keys, c);
	if (!c->cur_user->groups)
		c->cur_user->groups = wd_calloc(1, sizeof(char *));
	if (!c->cur_user->scopes)
		c->cur_user->scopes = wd_calloc(1, sizeof(char *));
	return rc;
}

static int f_users(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"uid", u_uid, true},
	    {"groups", u_groups, false},
	    {"scopes", u_scopes, false},
	};
	static const struct wd_y_named spec = {"'users'", "{name: {uid, ...}}",
					       "user", user_seen, user_add};
	struct uctx *c = o;
	c->has_users = true;
	c->user_keys = keys;
	c->n_user_keys = WD_ARRAY_SIZE(keys);
	return wd_y_each_named(w, v, &spec, c);
}

/* ---- groups
 * ------------------------------------------------------------------- */

static int g_scopes(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	return wd_y_strlist(w, v, "'scopes'", &c->cur_group->scopes,
			    &c->cur_group->n_scopes, scope_check, "'scopes'");
}

static const struct wd_group *group_by_name(const struct wd_users *u,
					    const char *name)
{
	for (int i = 0; i < u->n_groups; i++)
		if (!strcmp(u->groups[i].name, name))
			return &u->groups[i];
	return NULL;
}

static bool group_seen(void *o, const char *name)
{
	return group_by_name(((struct uctx *)o)->u, name) != NULL;
}

static int group_add(struct wd_ywalk *w, yaml_node_t *k, char *name,
		     yaml_node_t *val, void *o)
{
	(void)k;
	struct uctx *c = o;
	struct wd_users *u = c->u;
	u->groups = wd_realloc(u->groups,
			       (size_t)(u->n_groups + 1) * sizeof(*u->groups));
	u->groups[u->n_groups] = (struct wd_group){.name = name};
	c->cur_group = &u->groups[u->n_groups++];
	int rc = wd_y_map(w, val, "group", c->group_keys, c->n_group_keys, c);
	if (!c->cur_group->scopes)
		c->cur_group->scopes = wd_calloc(1, sizeof(char *));
	return rc;
}

static int f_groups(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {{"scopes", g_scopes, true}};
	static const struct wd_y_named spec = {"'groups'", "{name: {scopes}}",
					       "group", group_seen, group_add};
	struct uctx *c = o;
	c->group_keys = keys;
	c->n_group_keys = WD_ARRAY_SIZE(keys);
	return wd_y_each_named(w, v, &spec, c);
}

/* ---- approvers
 * ------------------------------------------------------------------ */

static int ap_users(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	c->ap_users = v;
	return wd_y_strlist(w, v, "'approvers.users'", &c->u->approver_users,
			    &c->u->n_approver_users, name_check,
			    "'approvers.users'");
}

static int ap_groups(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct uctx *c = o;
	c->ap_groups = v;
	return wd_y_strlist(w, v, "'approvers.groups'", &c->u->approver_groups,
			    &c->u->n_approver_groups, name_check,
			    "'approvers.groups'");
}

static int f_approvers(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"users", ap_users, false},
	    {"groups", ap_groups, false},
	};
	return wd_y_map(w, v, "'approvers'", keys, WD_ARRAY_SIZE(keys), o);
}

static const struct wd_y_key top_keys[] = {
    {"users", f_users, true},
    {"groups", f_groups, false},
    {"approvers", f_approvers, false},
};

/* ---- load
 * ------------------------------------------------------------------------- */

static yaml_node_t *item_node(struct wd_ywalk *w, yaml_node_t *seq, int i)
{
	if (!seq || seq->type != YAML_SEQUENCE_NODE)
		return seq;
	return yaml_document_get_node(w->doc,
				      seq->data.sequence.items.start[i]);
}

struct load_state {
	const char *file;
	struct wd_users *u;
	int docs;
};

static void load_doc(struct wd_ywalk *w, yaml_node_t *root, void *arg)
{
	struct load_state *st = arg;
	if (++st->docs > 1) {
		wd_y_err(w, root, "users file must hold one document");
		return;
	}
	struct uctx c = {.u = st->u};
	int errs = w->nerr;
	wd_y_map(w, root, "users file", top_keys, WD_ARRAY_SIZE(top_keys), &c);
	if (w->nerr == errs) {
		/* references: groups of users, approvers */
		struct wd_users *u = st->u;
		for (int i = 0; i < u->n_users; i++)
			for (int j = 0; j < u->users[i].n_groups; j++)
				if (!group_by_name(u, u->users[i].groups[j]))
					wd_y_err(
					    w,
					    item_node(w, c.user_group_nodes[i],
						      j),
					    "user '%s': unknown group '%s'",
					    u->users[i].name,
					    u->users[i].groups[j]);
		for (int i = 0; i < u->n_approver_users; i++)
			if (!wd_users_by_name(u, u->approver_users[i]))
				wd_y_err(w, item_node(w, c.ap_users, i),
					 "approvers: unknown user '%s'",
					 u->approver_users[i]);
		for (int i = 0; i < u->n_approver_groups; i++)
			if (!group_by_name(u, u->approver_groups[i]))
				wd_y_err(w, item_node(w, c.ap_groups, i),
					 "approvers: unknown group '%s'",
					 u->approver_groups[i]);
	}
	free(c.user_nodes);
	free(c.user_group_nodes);
}

int wd_users_load_str(const char *name, const char *text, size_t len,
		      struct wd_users **out, struct wd_diag *diag)
{
	struct load_state st = {.file = name ? name : "<input>"};
	st.u = wd_calloc(1, sizeof(*st.u));
	st.u->source = wd_strdup(st.file);
	*out = NULL;
	if (wd_y_load_docs(st.file, text, len, "no users document in file",
			   diag, load_doc, &st) < 0) {
		wd_users_free(st.u);
		return -EINVAL;
	}
	struct wd_users *u = st.u;
	if (!u->approver_users)
		u->approver_users = wd_calloc(1, sizeof(char *));
	if (!u->approver_groups)
		u->approver_groups = wd_calloc(1, sizeof(char *));
	*out = u;
	return 0;
}

int wd_users_load_file(const char *path, struct wd_users **out,
		       struct wd_diag *diag)
{
	char *text;
	size_t len;
	*out = NULL;
	int rc = wd_y_read_path(path, &text, &len, diag);
	if (rc < 0)
		return rc;
	rc = wd_users_load_str(path, text, len, out, diag);
	free(text);
	return rc;
}

void wd_users_free(struct wd_users *u)
{
	if (!u)
		return;
	for (int i = 0; i < u->n_users; i++) {
		free(u->users[i].name);
		wd_y_strv_free(u->users[i].groups, u->users[i].n_groups);
		wd_y_strv_free(u->users[i].scopes, u->users[i].n_scopes);
	}
	free(u->users);
	for (int i = 0; i < u->n_groups; i++) {
		free(u->groups[i].name);
		wd_y_strv_free(u->groups[i].scopes, u->groups[i].n_scopes);
	}
	free(u->groups);
	wd_y_strv_free(u->approver_users, u->n_approver_users);
	wd_y_strv_free(u->approver_groups, u->n_approver_groups);
	free(u->source);
	free(u);
}

/* ---- queries
 * ------------------------------------------------------------------------ */

const struct wd_user *wd_users_by_uid(const struct wd_users *u, uid_t uid)
{
	for (int i = 0; u && i < u->n_users; i++)
		if (u->users[i].uid == uid)
			return &u->users[i];
	return NULL;
}

const struct wd_user *wd_users_by_name(const struct wd_users *u,
				       const char *name)
{
	for (int i = 0; u && i < u->n_users; i++)
		if (!strcmp(u->users[i].name, name))
			return &u->users[i];
	return NULL;
}

const char *wd_users_name(const struct wd_users *u, uid_t uid)
{
	const struct wd_user *x = wd_users_by_uid(u, uid);
	return x ? x->name : NULL;
}

static void add_unique(const char ***v, int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return;
	*v = wd_realloc(*v, (size_t)(*n + 2) * sizeof(**v));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

int wd_users_scopes_for_uid(const struct wd_users *u, uid_t uid,
			    const char ***out)
{
	const char **v = wd_calloc(1, sizeof(*v));
	int n = 0;
	const struct wd_user *x = wd_users_by_uid(u, uid);
	if (x) {
		for (int i = 0; i < x->n_scopes; i++)
			add_unique(&v, &n, x->scopes[i]);
		for (int g = 0; g < x->n_groups; g++) {
			const struct wd_group *gr =
			    group_by_name(u, x->groups[g]);
			for (int i = 0; gr && i < gr->n_scopes; i++)
				add_unique(&v, &n, gr->scopes[i]);
		}
	}
	*out = v;
	return n;
}

bool wd_scope_match(const char *grant, const char *scope)
{
	if (!strcmp(grant, "*"))
		return *scope != 0;
	size_t gl = strlen(grant);
	if (gl >= 2 && grant[gl - 1] == '*' && grant[gl - 2] == ':')
		return !strncmp(grant, scope, gl - 1) && scope[gl - 1];
	return !strcmp(grant, scope);
}

bool wd_users_has_scope(const struct wd_users *u, uid_t uid, const char *scope)
{
	const char **v;
	int n = wd_users_scopes_for_uid(u, uid, &v);
	bool ok = false;
	for (int i = 0; i < n && !ok; i++)
		ok = wd_scope_match(v[i], scope);
	free(v);
	return ok;
}

bool wd_users_is_approver(const struct wd_users *u, uid_t uid)
{
	const struct wd_user *x = wd_users_by_uid(u, uid);
	if (!x)
		return false;
	for (int i = 0; i < u->n_approver_users; i++)
		if (!strcmp(u->approver_users[i], x->name))
			return true;
	for (int i = 0; i < u->n_approver_groups; i++)
		for (int g = 0; g < x->n_groups; g++)
			if (!strcmp(u->approver_groups[i], x->groups[g]))
				return true;
	return false;
}

/* Trace access (DESIGN §4 "warden trace ... without --state"): traces hold
 * whole prompts and customer data, so a run is readable by its own user,
 * by members of its team (a users.yaml group named like the agent's team)
 * and by the auditors group; root reads the store directly anyway. Deny by
 * default: a uid not in users.yaml reads only runs it started itself. The
 * run's user is its uid as recorded in run_start (and the index's runs.uid):
 * users.yaml maps names to uids and a name may later be given to another
 * uid, so a name never grants access. */
void wd_users_read_scope(const struct wd_users *u, uid_t caller,
			 struct wd_read_scope *s)
{
	*s = (struct wd_read_scope){.uid = caller};
	s->teams = wd_calloc(1, sizeof(*s->teams));
	if (caller == 0) {
		s->all = "root";
		return;
	}
	const struct wd_user *x = wd_users_by_uid(u, caller);
	for (int g = 0; x && g < x->n_groups; g++) {
		if (!strcmp(x->groups[g], WD_AUDITORS_GROUP)) {
			s->all = "auditor";
			return;
		}
	}
	for (int g = 0; x && g < x->n_groups; g++)
		add_unique(&s->teams, &s->n_teams, x->groups[g]);
}

void wd_read_scope_free(struct wd_read_scope *s)
{
	free(s->teams);
	s->teams = NULL;
	s->n_teams = 0;
}

bool wd_users_may_read_run(const struct wd_users *u, uid_t caller,
			   int64_t run_uid, const char *run_team,
			   const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	struct wd_read_scope s;
	wd_users_read_scope(u, caller, &s);
	bool ok = true;
	if (caller == 0) {
		*why = "root";
	} else if (run_uid >= 0 && run_uid == (int64_t)caller) {
		*why = "own run";
	} else if (s.all) {
		*why = s.all;
	} else {
		ok = false;
		for (int g = 0; !ok && run_team && *run_team && g < s.n_teams;
		     g++)
			ok = !strcmp(s.teams[g], run_team);
		*why = ok ? "team"
			  : "not the run's user, not in its team's group, "
			    "not an auditor";
	}
	wd_read_scope_free(&s);
	return ok;
}
