/* `replay: {environment: ...}` in a tool manifest (manifest.h replay_env):
 * parsed into a scratch manifest while the document is read, judged once
 * all of it is (wd_manifest_replay_finish, from manifest.c load_doc). */
#include "policy/manifest.h"
#include "policy/manifest_int.h"
#include "policy/ywalk.h"

#include <string.h>

/* ---- replay: {environment: {network: {allow}, filesystem: {write}, env}}
 * The staging a live replay of an internal tool runs against (`warden
 * replay --live-internal`, broker/replay_gate.c). Its allow rules and write
 * paths REPLACE the production ones (absent = none) and must be disjoint
 * from them, so a live replay cannot write or connect where production
 * does even if the tool ignores its environment; `env` tells the tool
 * where the staging is. Only an internal tool has one: an external tool
 * never runs live in a replay, a `none` one runs live in its own sandbox.
 * ------------------------------------------------------------------ */

static struct mctx re_ctx(void *o)
{
	return (struct mctx){.m = ((struct mctx *)o)->replay_scratch};
}

static int re_allow(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct mctx e = re_ctx(o);
	((struct mctx *)o)->replay_allow_node = v;
	return wd_manifest_net_allow(w, v, &e);
}

static int re_write(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct mctx e = re_ctx(o);
	((struct mctx *)o)->replay_write_node = v;
	return wd_manifest_fs_write(w, v, &e);
}

static int re_network(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {{"allow", re_allow, false}};
	return wd_y_map(w, v, "'replay.environment.network'", keys,
			WD_ARRAY_SIZE(keys), o);
}

static int re_filesystem(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {{"write", re_write, false}};
	return wd_y_map(w, v, "'replay.environment.filesystem'", keys,
			WD_ARRAY_SIZE(keys), o);
}

/* Names the sandbox sets itself (sandbox/native.c build_env, gvisor.c)
 * are not the environment's to change. */
static bool env_name_ok(const char *k)
{
	static const char *const fixed[] = {"PATH", "HOME", "TMPDIR", "LANG"};
	size_t n = strlen(k);
	if (!n || n > 64 || (k[0] >= '0' && k[0] <= '9') ||
	    !strncmp(k, "WARDEN_", 7))
		return false;
	for (size_t i = 0; i < WD_ARRAY_SIZE(fixed); i++)
		if (!strcmp(k, fixed[i]))
			return false;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return true;
}

static int re_env(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *e = ((struct mctx *)o)->replay_scratch;
	if (v->type != YAML_MAPPING_NODE) {
		wd_y_err(w, v,
			 "'replay.environment.env' must be a mapping "
			 "{NAME: value}, not %s",
			 wd_y_kind(v));
		return -EINVAL;
	}
	int rc = 0;
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
	     p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *k = wd_y_get(w, p->key),
			    *val = wd_y_get(w, p->value);
		char *ks = NULL, *vs = NULL;
		if (!k || !val)
			return -EINVAL;
		if (wd_y_str(w, k, "'replay.environment.env' name", &ks) < 0) {
			rc = -EINVAL;
			continue;
		}
		if (!env_name_ok(ks)) {
			wd_y_err(w, k,
				 "'replay.environment.env': '%s' is not a "
				 "name it may set ([A-Za-z_][A-Za-z0-9_]*, "
				 "not PATH, HOME, TMPDIR, LANG or WARDEN_*)",
				 ks);
			rc = -EINVAL;
		} else if (e->n_env >= 32) {
			wd_y_err(w, k, "'replay.environment.env': at most 32");
			rc = -EINVAL;
		} else if (wd_y_str(w, val, "'replay.environment.env' value",
				    &vs) < 0) {
			rc = -EINVAL;
		} else if (strlen(vs) > 4096) {
			wd_y_err(w, val,
				 "'replay.environment.env' value: at most "
				 "4096 bytes");
			rc = -EINVAL;
		} else {
			for (int i = 0; i < e->n_env; i++)
				if (!strncmp(e->env[i], ks, strlen(ks)) &&
				    e->env[i][strlen(ks)] == '=') {
					wd_y_err(w, k,
						 "'replay.environment.env': "
						 "duplicate '%s'",
						 ks);
					rc = -EINVAL;
				}
			e->env = wd_realloc(e->env, (size_t)(e->n_env + 2) *
							sizeof(char *));
			e->env[e->n_env++] = wd_asprintf("%s=%s", ks, vs);
			e->env[e->n_env] = NULL;
		}
		free(ks);
		free(vs);
	}
	return rc;
}

static int re_environment(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"network", re_network, false},
	    {"filesystem", re_filesystem, false},
	    {"env", re_env, false},
	};
	return wd_y_map(w, v, "'replay.environment'", keys, WD_ARRAY_SIZE(keys),
			o);
}

int wd_manifest_f_replay(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"environment", re_environment, true},
	};
	struct mctx *c = o;
	c->replay_node = v;
	if (!c->replay_scratch)
		c->replay_scratch = wd_calloc(1, sizeof(*c->replay_scratch));
	return wd_y_map(w, v, "'replay'", keys, WD_ARRAY_SIZE(keys), o);
}

static bool path_overlaps(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b), n = na < nb ? na : nb;
	const char *lo = na < nb ? b : a; /* the longer */
	return !strncmp(a, b, n) &&
	       (lo[n] == 0 || lo[n] == '/' || (n == 1 && a[0] == '/'));
}

/* Can two allow rules admit the same destination? Literal prefixes over
 * their common length; names by equality (no DNS at load: a name and a
 * literal are not compared). */
static bool rules_overlap(const struct wd_net_rule *a,
			  const struct wd_net_rule *b)
{
	if (a->port && b->port && a->port != b->port)
		return false;
	if (a->needs_resolve || b->needs_resolve)
		return a->needs_resolve && b->needs_resolve &&
		       !strcmp(a->host, b->host);
	int bits = a->prefix < b->prefix ? a->prefix : b->prefix;
	for (int i = 0; i < bits; i++) {
		int mask = 0x80 >> (i % 8);
		if ((a->addr[i / 8] & mask) != (b->addr[i / 8] & mask))
			return false;
	}
	return true;
}

static yaml_node_t *seq_item(struct wd_ywalk *w, yaml_node_t *seq, int i)
{
	if (!seq || seq->type != YAML_SEQUENCE_NODE ||
	    i >= (int)(seq->data.sequence.items.top -
		       seq->data.sequence.items.start))
		return seq;
	return wd_y_get(w, seq->data.sequence.items.start[i]);
}

void wd_manifest_replay_finish(struct wd_ywalk *w, struct mctx *c)
{
	struct wd_manifest *m = c->m, *s = c->replay_scratch;
	if (!s)
		return;
	int errs = w->nerr;
	if (m->side_effects != WD_SE_INTERNAL) {
		wd_y_err(w, c->replay_node,
			 "'replay.environment': only a side_effects: internal "
			 "tool has one (this one is %s: %s)",
			 m->side_effects == WD_SE_NONE ? "none" : "external",
			 m->side_effects == WD_SE_NONE
			     ? "it runs live in its own sandbox in a replay"
			     : "an external tool never runs live in a replay");
		return;
	}
	for (int i = 0; i < s->fs_write.n; i++)
		for (int j = 0; j < m->fs_write.n; j++)
			if (path_overlaps(s->fs_write.v[i], m->fs_write.v[j]))
				wd_y_err(w,
					 seq_item(w, c->replay_write_node, i),
					 "'replay.environment.filesystem."
					 "write': '%s' overlaps "
					 "filesystem.write '%s' (a live "
					 "replay must not write where "
					 "production does)",
					 s->fs_write.v[i], m->fs_write.v[j]);
	for (int i = 0; i < s->n_net_allow; i++)
		for (int j = 0; j < m->n_net_allow; j++)
			if (rules_overlap(&s->net_allow[i], &m->net_allow[j]))
				wd_y_err(
				    w, seq_item(w, c->replay_allow_node, i),
				    "'replay.environment.network.allow': "
				    "'%s' overlaps network.allow '%s' (a "
				    "live replay must not reach what "
				    "production does)",
				    s->net_allow[i].text, m->net_allow[j].text);
	if (w->nerr != errs)
		return;
	struct wd_manifest *e = wd_manifest_clone(m);
	free(e->net_allow);
	e->net_allow =
	    s->net_allow ? s->net_allow : wd_calloc(1, sizeof(*e->net_allow));
	e->n_net_allow = s->n_net_allow;
	s->net_allow = NULL;
	s->n_net_allow = 0;
	wd_y_strv_free(e->fs_write.v, e->fs_write.n);
	e->fs_write = s->fs_write;
	if (!e->fs_write.v)
		e->fs_write.v = wd_calloc(1, sizeof(char *));
	s->fs_write = (struct wd_path_list){0};
	if (e->fs_write.n)
		e->filesystem_ephemeral = false;
	e->env = s->env;
	e->n_env = s->n_env;
	s->env = NULL;
	s->n_env = 0;
	m->replay_env = e;
}
