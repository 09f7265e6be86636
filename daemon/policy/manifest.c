/* Tool manifests: YAML -> struct wd_manifest, strictly (see ywalk.h for the
 * threats). Every field a manifest can hold is enforced somewhere, so every
 * field is validated here to the value space the enforcer expects. */
#include "policy/manifest.h"
#include "policy/manifest_int.h"
#include "policy/resolver_sockets.h"
#include "policy/ywalk.h"

#include <jansson.h>
#include <string.h>

/* ---- documents
 * ---------------------------------------------------------------------- */

static struct wd_manifest *manifest_new(const char *source)
{
	struct wd_manifest *m = wd_calloc(1, sizeof(*m));
	m->source = wd_strdup(source);
	m->input = WD_INPUT_STDIN_JSON;
	m->timeout_ms = WD_DEFAULT_TIMEOUT_MS;
	m->memory_mb = WD_DEFAULT_MEMORY_MB;
	m->pids = WD_DEFAULT_PIDS;
	m->output_max_bytes = WD_DEFAULT_OUTPUT_MAX;
	m->side_effects = WD_SE_EXTERNAL;
	m->auth_mode = WD_AUTH_ON_BEHALF_OF_USER;
	m->mode = WD_MODE_ENFORCE;
	return m;
}

/* Fill empty lists so consumers can iterate without NULL checks. */
static void manifest_finish(struct wd_manifest *m)
{
	if (!m->args_schema)
		m->args_schema = wd_strdup("{\"type\":\"object\"}");
	if (!m->net_allow)
		m->net_allow = wd_calloc(1, sizeof(*m->net_allow));
	if (!m->net_private)
		m->net_private = wd_calloc(1, sizeof(*m->net_private));
	struct wd_path_list *pls[] = {&m->fs_read, &m->fs_write, &m->fs_exec};
	for (size_t i = 0; i < WD_ARRAY_SIZE(pls); i++)
		if (!pls[i]->v)
			pls[i]->v = wd_calloc(1, sizeof(char *));
	char ***lists[] = {&m->syscalls_deny, &m->socket_families,
			   &m->auth_scopes, &m->require};
	for (size_t i = 0; i < WD_ARRAY_SIZE(lists); i++)
		if (!*lists[i])
			*lists[i] = wd_calloc(1, sizeof(char *));
	if (!m->socket_family_nums)
		m->socket_family_nums = wd_calloc(1, sizeof(int));
}

/* Is canonical path p equal to or below canonical directory d? */
static bool path_covered(const char *p, const char *d)
{
	size_t n = strlen(d);
	if (n == 1 && d[0] == '/')
		return true;
	return !strncmp(p, d, n) && (p[n] == 0 || p[n] == '/');
}

/* network.allow's i-th item (the list itself if they do not match up). */
static yaml_node_t *allow_item(struct wd_ywalk *w, struct mctx *c, int i)
{
	yaml_node_t *v = c->allow_node;
	if (v && v->type == YAML_SEQUENCE_NODE &&
	    v->data.sequence.items.top - v->data.sequence.items.start ==
		c->m->n_net_allow)
		return yaml_document_get_node(w->doc,
					      v->data.sequence.items.start[i]);
	return v;
}

/* Checks across fields: a manifest that cannot work as written is an
 * error at load rather than a confusing denial at call time. */
static void cross_field(struct wd_ywalk *w, struct mctx *c)
{
	struct wd_manifest *m = c->m;
	wd_manifest_check_argv(w, c);
	if (m->input == WD_INPUT_STDIN_FIELD && m->args_schema) {
		json_t *j = json_loads(m->args_schema, 0, NULL);
		json_t *props = json_object_get(j, "properties");
		if (props && !json_object_get(props, m->input_field))
			wd_y_err(w, c->input_node,
				 "'input': field '%s' is not in "
				 "args_schema.properties",
				 m->input_field);
		json_decref(j);
	}
	/* exec[0] must be executable under filesystem.exec when that list
	 * is given (Landlock would refuse the execve otherwise) */
	if (m->n_exec > 0 && m->fs_exec.n > 0) {
		char *ce = NULL;
		bool ok = false;
		if (wd_path_canonical(m->exec[0], &ce, NULL) == 0)
			for (int i = 0; i < m->fs_exec.n && !ok; i++)
				ok = path_covered(ce, m->fs_exec.v[i]);
		if (!ok)
			wd_y_err(
			    w,
			    yaml_document_get_node(
				w->doc,
				c->exec_node->data.sequence.items.start[0]),
			    "'exec[0]' %s (%s) is not under any "
			    "filesystem.exec path",
			    m->exec[0], ce ? ce : "?");
		free(ce);
	}
	/* Tier 3 (sandbox/gvisor.c): a listener there is in gVisor's own
	 * netstack, which nothing outside reaches (its link, if any, lets no
	 * connection in), so `listen: true` could not be given as written. */
	/* An allow-list in tier 3 is its link's (sandbox/gvisor_net.c),
	 * which carries IPv4 only: an IPv6 rule could not be given as
	 * written. (Whether an IPv4 rule lies beyond the node, and the node
	 * routes there, is checked where it runs, at call start:
	 * sandbox/t3beyond.h.) */
	for (int i = 0; m->tier == WD_TIER_3 && i < m->n_net_allow; i++) {
		const struct wd_net_rule *r = &m->net_allow[i];
		static const uint8_t v4[12] = {0, 0, 0, 0, 0,	 0,
					       0, 0, 0, 0, 0xff, 0xff};
		if (!r->needs_resolve &&
		    (memcmp(r->addr, v4, sizeof(v4)) || r->prefix < 96)) {
			wd_y_err(w, c->allow_node,
				 "'network.allow' '%s': tier 3's link "
				 "carries IPv4 only (use tier 1 or 2)",
				 r->text);
			break;
		}
	}
	/* DNS is the call's resolver's (enforce/resolver.c): with a name
	 * listed (tiers 1-2), and always in tier 3, every packet to port 53
	 * goes to it, and tier 3 drops port 853 too; a rule on those ports
	 * could not be given as written: an IP rule would not reach its DNS
	 * server, a name rule could never be reached */
	bool names = false;
	for (int i = 0; i < m->n_net_allow; i++)
		names |= m->net_allow[i].needs_resolve;
	for (int i = 0; i < m->n_net_allow; i++) {
		const struct wd_net_rule *r = &m->net_allow[i];
		bool t3 = m->tier == WD_TIER_3;
		bool dns = r->port == 53 && (names || t3);
		bool dot = r->port == 853 && t3;
		if (!(dns || dot))
			continue;
		wd_y_err(
		    w, r->needs_resolve ? allow_item(w, c, i) : c->allow_node,
		    "'network.allow' '%s': %s every packet to port %u "
		    "%s: %s",
		    r->text, t3 ? "in tier 3" : "with a name in network.allow,",
		    r->port,
		    r->port == 53 ? "goes to the call's resolver"
				  : "is dropped (only the call's "
				    "resolver answers names)",
		    r->needs_resolve ? "the name could never be reached "
				       "on that port"
				     : "a rule for DNS servers of its "
				       "own could not be given as "
				       "written");
		break;
	}
	/* A host resolver on a unix socket answers any name: a write path
	 * that covers its socket (connects to unix sockets are allowed under
	 * filesystem.write) would let the tool resolve around the call's
	 * resolver. The egress programs deny those sockets to such a call
	 * too (enforce/egress.c, wd_egress_dns). */
	for (int i = 0; names && i < m->fs_write.n; i++) {
		const char *d = wd_resolver_dir_touched(m->fs_write.v[i]);
		if (!d)
			continue;
		yaml_node_t *wn = c->write_node;
		if (wn && wn->type == YAML_SEQUENCE_NODE &&
		    wn->data.sequence.items.top -
			    wn->data.sequence.items.start >
			i)
			wn = yaml_document_get_node(
			    w->doc, wn->data.sequence.items.start[i]);
		wd_y_err(w, wn,
			 "'filesystem.write' '%s': with a name in "
			 "network.allow, a write path may not reach a host "
			 "resolver's unix socket (%s): the tool could resolve "
			 "any name through it",
			 m->fs_write.v[i], d);
	}
	if (m->net_listen && m->tier == WD_TIER_3)
		wd_y_err(w, c->listen_node,
			 "'network.listen': in tier 3 nothing outside the "
			 "sandbox can reach a listener (use tier 1 or 2)");
}

struct load_state {
	const char *file;
	struct wd_manifest **v;
	int n;
};

static void load_doc(struct wd_ywalk *w, yaml_node_t *root, void *arg)
{
	struct load_state *st = arg;
	struct mctx c = {.m = manifest_new(st->file)};
	c.m->line = (int)root->start_mark.line + 1;
	int errs = w->nerr;
	wd_y_map(w, root, "manifest", wd_manifest_keys, wd_manifest_n_keys, &c);
	/* the schema's own keywords, wherever `input` is in the file */
	wd_manifest_check_schema(w, &c);

	/* the seed's form: approval: required_above + approval_threshold */
	if (c.approval_threshold_node && !c.approval_required_above)
		wd_y_err(w, c.approval_threshold_node,
			 "'approval_threshold' needs 'approval: "
			 "required_above'");
	else if (c.approval_required_above && !c.approval_threshold_node)
		wd_y_err(w, c.approval_node,
			 "'approval: required_above' needs "
			 "'approval_threshold: {arg: number}'");
	else if (c.approval_required_above)
		wd_manifest_thresholds(w, c.approval_threshold_node,
				       "'approval_threshold'", &c.m->approval);

	if (w->nerr == errs)
		cross_field(w, &c);
	if (w->nerr == errs)
		wd_manifest_replay_finish(w, &c);
	wd_manifest_free(c.replay_scratch);
	if (c.m->name && w->nerr == errs) {
		for (int i = 0; i < st->n; i++)
			if (!strcmp(st->v[i]->name, c.m->name))
				wd_y_err(w, root,
					 "duplicate manifest name '%s' (also "
					 "at line %d)",
					 c.m->name, st->v[i]->line);
	}
	if (w->nerr != errs) {
		wd_manifest_free(c.m);
		return;
	}
	manifest_finish(c.m);
	st->v = wd_realloc(st->v, (size_t)(st->n + 1) * sizeof(*st->v));
	st->v[st->n++] = c.m;
}

int wd_manifest_load_all_str(const char *name, const char *text, size_t len,
			     struct wd_manifest ***out, int *n,
			     struct wd_diag *diag)
{
	struct load_state st = {.file = name ? name : "<input>"};
	*out = NULL;
	*n = 0;
	/* wd_y_load rather than wd_y_load_docs: a file with no document
	 * (empty, only comments, only "---") is still reported as
	 * file:line:col like every other diagnostic, at 1:1. */
	struct wd_diag local = {0};
	struct wd_diag *d = diag ? diag : &local;
	int before = d->n + d->dropped;
	int rc = wd_y_load(st.file, text, len, d, load_doc, &st);
	if (rc == 0)
		wd_diag_add(d, st.file, 1, 1, "no manifest in file");
	bool bad = rc <= 0 || d->n + d->dropped != before;
	wd_diag_free(&local);
	if (bad) {
		wd_manifest_free_all(st.v, st.n);
		return -EINVAL;
	}
	*out = st.v;
	*n = st.n;
	return 0;
}

int wd_manifest_load_str(const char *name, const char *text, size_t len,
			 struct wd_manifest **out, struct wd_diag *diag)
{
	struct wd_manifest **v;
	int n;
	*out = NULL;
	int rc = wd_manifest_load_all_str(name, text, len, &v, &n, diag);
	if (rc < 0)
		return rc;
	*out = v[0];
	for (int i = 1; i < n; i++)
		wd_manifest_free(v[i]);
	free(v);
	return 0;
}

int wd_manifest_load_all(const char *path, struct wd_manifest ***out, int *n,
			 struct wd_diag *diag)
{
	char *text;
	size_t len;
	*out = NULL;
	*n = 0;
	int rc = wd_y_read_path(path, &text, &len, diag);
	if (rc < 0)
		return rc;
	rc = wd_manifest_load_all_str(path, text, len, out, n, diag);
	free(text);
	return rc;
}

int wd_manifest_load_file(const char *path, struct wd_manifest **out,
			  struct wd_diag *diag)
{
	struct wd_manifest **v;
	int n;
	*out = NULL;
	int rc = wd_manifest_load_all(path, &v, &n, diag);
	if (rc < 0)
		return rc;
	*out = v[0];
	for (int i = 1; i < n; i++)
		wd_manifest_free(v[i]);
	free(v);
	return 0;
}

const char *const wd_side_effects_words[3] = {"none", "internal", "external"};

enum wd_side_effects wd_side_effects_parse(const char *s)
{
	for (int i = 0; s && i < 3; i++)
		if (!strcmp(s, wd_side_effects_words[i]))
			return (enum wd_side_effects)i;
	return WD_SE_EXTERNAL;
}

void wd_manifest_free(struct wd_manifest *m)
{
	if (!m)
		return;
	free(m->source);
	free(m->name);
	free(m->description);
	wd_y_strv_free(m->exec, m->n_exec);
	free(m->input_field);
	wd_y_strv_free(m->argv_tmpl, m->n_argv_tmpl);
	free(m->args_schema);
	free(m->net_allow);
	free(m->net_private);
	wd_y_strv_free(m->fs_read.v, m->fs_read.n);
	wd_y_strv_free(m->fs_write.v, m->fs_write.n);
	wd_y_strv_free(m->fs_exec.v, m->fs_exec.n);
	wd_y_strv_free(m->syscalls_deny, m->n_syscalls_deny);
	wd_y_strv_free(m->socket_families, m->n_socket_families);
	free(m->socket_family_nums);
	wd_y_strv_free(m->auth_scopes, m->n_auth_scopes);
	for (int i = 0; i < m->approval.n_above; i++)
		free(m->approval.above_keys[i]);
	free(m->approval.above_keys);
	free(m->approval.above_vals);
	wd_y_strv_free(m->require, m->n_require);
	wd_manifest_free(m->replay_env);
	wd_y_strv_free(m->env, m->n_env);
	free(m);
}

static char **strv_dup(char *const *v, int n)
{
	if (!v)
		return NULL;
	char **o = wd_calloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		o[i] = wd_strdup(v[i]);
	return o;
}

static char *str_dup(const char *s)
{
	return s ? wd_strdup(s) : NULL;
}

/* Every pointer field copied, so the copy lives on its own (a replay
 * environment outlives nothing of its parent but is freed with it). */
struct wd_manifest *wd_manifest_clone(const struct wd_manifest *m)
{
	struct wd_manifest *c = wd_calloc(1, sizeof(*c));
	*c = *m;
	c->source = str_dup(m->source);
	c->name = str_dup(m->name);
	c->description = str_dup(m->description);
	c->exec = strv_dup(m->exec, m->n_exec);
	c->input_field = str_dup(m->input_field);
	c->argv_tmpl = strv_dup(m->argv_tmpl, m->n_argv_tmpl);
	c->args_schema = str_dup(m->args_schema);
	c->net_allow =
	    wd_calloc((size_t)m->n_net_allow + 1, sizeof(*c->net_allow));
	if (m->n_net_allow)
		memcpy(c->net_allow, m->net_allow,
		       (size_t)m->n_net_allow * sizeof(*c->net_allow));
	c->net_private =
	    wd_calloc((size_t)m->n_net_private + 1, sizeof(*c->net_private));
	if (m->n_net_private)
		memcpy(c->net_private, m->net_private,
		       (size_t)m->n_net_private * sizeof(*c->net_private));
	c->fs_read.v = strv_dup(m->fs_read.v, m->fs_read.n);
	c->fs_write.v = strv_dup(m->fs_write.v, m->fs_write.n);
	c->fs_exec.v = strv_dup(m->fs_exec.v, m->fs_exec.n);
	c->syscalls_deny = strv_dup(m->syscalls_deny, m->n_syscalls_deny);
	c->socket_families = strv_dup(m->socket_families, m->n_socket_families);
	c->socket_family_nums =
	    wd_calloc((size_t)m->n_socket_families + 1, sizeof(int));
	if (m->socket_family_nums && m->n_socket_families)
		memcpy(c->socket_family_nums, m->socket_family_nums,
		       (size_t)m->n_socket_families * sizeof(int));
	c->auth_scopes = strv_dup(m->auth_scopes, m->n_auth_scopes);
	c->approval.above_keys = NULL;
	c->approval.above_vals = NULL;
	if (m->approval.n_above) {
		c->approval.above_keys =
		    strv_dup(m->approval.above_keys, m->approval.n_above);
		c->approval.above_vals =
		    wd_calloc((size_t)m->approval.n_above, sizeof(double));
		memcpy(c->approval.above_vals, m->approval.above_vals,
		       (size_t)m->approval.n_above * sizeof(double));
	}
	c->require = strv_dup(m->require, m->n_require);
	c->replay_env = NULL;
	c->env = strv_dup(m->env, m->n_env);
	manifest_finish(c);
	return c;
}

void wd_manifest_free_all(struct wd_manifest **v, int n)
{
	for (int i = 0; i < n; i++)
		wd_manifest_free(v[i]);
	free(v);
}
