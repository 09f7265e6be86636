/* One handler per top-level manifest key (the table at the end), each
 * validating its value to the space the enforcer expects. */
#include "policy/families.h"
#include "policy/manifest.h"
#include "policy/manifest_int.h"
#include "policy/ywalk.h"

#include <jansson.h>
#include <seccomp.h>
#include <string.h>
#include <sys/socket.h>

/* ---- field handlers
 * ---------------------------------------------------------------- */

#define M(obj) (((struct mctx *)(obj))->m)

static int f_name(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_name(w, v, "'name'", &M(o)->name);
}

static int f_description(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_str(w, v, "'description'", &M(o)->description);
}

static int f_tier(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t t;
	if (wd_y_uint(w, v, "'tier'", 1, 3, &t) < 0)
		return -EINVAL;
	M(o)->tier = (enum wd_tier)t;
	return 0;
}

static int f_exec(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	((struct mctx *)o)->exec_node = v;
	if (wd_y_strlist(w, v, "'exec'", &m->exec, &m->n_exec, NULL, NULL) < 0)
		return -EINVAL;
	if (m->n_exec == 0) {
		wd_y_err(w, v, "'exec' must not be empty");
		return -EINVAL;
	}
	if (m->exec[0][0] != '/') {
		wd_y_err(w, wd_y_get(w, v->data.sequence.items.start[0]),
			 "'exec[0]' must be an absolute path, not '%s'",
			 m->exec[0]);
		return -EINVAL;
	}
	return 0;
}

static int f_input(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	char *s = NULL;
	((struct mctx *)o)->input_node = v;
	if (wd_y_str(w, v, "'input'", &s) < 0)
		return -EINVAL;
	int rc = 0;
	if (!strcmp(s, "stdin")) {
		m->input = WD_INPUT_STDIN_JSON;
	} else if (!strcmp(s, "argv")) {
		m->input = WD_INPUT_ARGV;
	} else if (!strncmp(s, "stdin:", 6) && s[6]) {
		const char *f = s + 6;
		for (const char *p = f; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') ||
			      (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '_'))
				rc = -EINVAL;
		if (rc == 0) {
			m->input = WD_INPUT_STDIN_FIELD;
			free(m->input_field);
			m->input_field = wd_strdup(f);
		} else {
			wd_y_err(w, v,
				 "'input': field name '%s' must match "
				 "[A-Za-z0-9_]+",
				 f);
		}
	} else {
		wd_y_err(w, v,
			 "'input': '%s' is not one of stdin|argv|stdin:<field>",
			 s);
		rc = -EINVAL;
	}
	free(s);
	return rc;
}

static int f_args_schema(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	((struct mctx *)o)->schema_node = v;
	if (v->type != YAML_MAPPING_NODE) {
		wd_y_err(w, v, "'args_schema' must be a mapping, not %s",
			 wd_y_kind(v));
		return -EINVAL;
	}
	json_t *j = wd_y_to_json(w, v, 0);
	if (!j)
		return -EINVAL;
	int rc = 0;
	json_t *t = json_object_get(j, "type");
	if (!json_is_string(t) || strcmp(json_string_value(t), "object")) {
		wd_y_err(w, v, "'args_schema' must have type: object");
		rc = -EINVAL;
	}
	json_t *props = json_object_get(j, "properties");
	if (props && !json_is_object(props)) {
		wd_y_err(w, v, "'args_schema.properties' must be a mapping");
		rc = -EINVAL;
	}
	json_t *req = json_object_get(j, "required");
	if (req) {
		size_t i;
		json_t *e;
		bool ok = json_is_array(req);
		json_array_foreach(req, i, e) ok = ok && json_is_string(e);
		if (!ok) {
			wd_y_err(w, v,
				 "'args_schema.required' must be a list of "
				 "strings");
			rc = -EINVAL;
		}
	}
	if (rc == 0) {
		free(m->args_schema);
		m->args_schema = json_dumps(j, JSON_COMPACT);
		if (!m->args_schema)
			abort();
	}
	json_decref(j);
	return rc;
}

static int f_timeout(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'timeout_ms'", 1, 86400000, &x) < 0)
		return -EINVAL;
	M(o)->timeout_ms = (uint32_t)x;
	return 0;
}

/* At least 16 MB: a call's first process is set up in its memory cgroup
 * while it still shares the supervisor's memory (until its exec; see
 * sandbox/native_spawn.c), and an OOM kill there would take the daemon
 * with it. Its set-up charges (page tables, a copy of the mount table, a
 * tmpfs superblock) are far below this floor. */
#define WD_MEMORY_MB_MIN 16

static int f_memory(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'memory_mb'", WD_MEMORY_MB_MIN, 1048576, &x) < 0)
		return -EINVAL;
	M(o)->memory_mb = (uint32_t)x;
	return 0;
}

static int f_cpus(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_y_double(w, v, "'cpus'", 0, 4096, &M(o)->cpus);
}

static int f_pids(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'pids'", 1, 4194304, &x) < 0)
		return -EINVAL;
	M(o)->pids = (uint32_t)x;
	return 0;
}

/* One entry of network.allow: "host:port", "*.suffix:port", CIDR. */
static int allow_item(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		      struct wd_net_rule *r)
{
	struct wd_err err = {0};
	if (wd_net_rule_parse(s, r, &err) == 0)
		return 0;
	wd_y_err(w, item, "network.allow: %s", err.msg);
	return -EINVAL;
}

/* One entry of network.allow_private: "127.0.0.0/8", "10.1.2.3",
 * "fd00::/8" (a range is a rule of any port: parsed as one). */
static int private_item(struct wd_ywalk *w, yaml_node_t *item, const char *s,
			struct wd_net_rule *r)
{
	struct wd_err err = {0};
	cleanup_free char *rule =
	    wd_asprintf(strchr(s, ':') ? "[%s]:*" : "%s:*", s);
	if (wd_net_rule_parse(rule, r, &err) == 0 && !r->needs_resolve) {
		wd_strlcpy(r->text, s, sizeof(r->text));
		return 0;
	}
	/* the parser's reason without its quote of the rule written for
	 * it ("'10.0.0.0/33:*': ...") */
	const char *why = strstr(err.msg, "': ");
	why = why ? why + 3 : err.msg;
	wd_y_err(w, item,
		 "network.allow_private: '%s' is not an address or range "
		 "(10.0.0.0/8, fd00::/8)%s%s",
		 s, *why ? ": " : "", why);
	return -EINVAL;
}

/* A list of network rules (what: "network.allow"), each string parsed by
 * item into the next rule; every bad entry named. */
static int rule_list(struct wd_ywalk *w, yaml_node_t *v, const char *what,
		     const char *want,
		     int (*item)(struct wd_ywalk *, yaml_node_t *, const char *,
				 struct wd_net_rule *),
		     struct wd_net_rule **out, int *n)
{
	if (v->type != YAML_SEQUENCE_NODE) {
		wd_y_err(w, v, "'%s' must be a list of %s, not %s", what, want,
			 wd_y_kind(v));
		return -EINVAL;
	}
	int rc = 0;
	yaml_node_item_t *it = v->data.sequence.items.start;
	int cnt = (int)(v->data.sequence.items.top - it);
	struct wd_net_rule *rules = wd_calloc((size_t)cnt + 1, sizeof(*rules));
	cleanup_free char *label = wd_asprintf("'%s' entry", what);
	int k = 0;
	for (int i = 0; i < cnt; i++) {
		yaml_node_t *node = wd_y_get(w, it[i]);
		char *s = NULL;
		if (!node) {
			rc = -EINVAL;
			break;
		}
		if (wd_y_str(w, node, label, &s) < 0) {
			rc = -EINVAL;
			continue;
		}
		if (item(w, node, s, &rules[k]) < 0)
			rc = -EINVAL;
		else
			k++;
		free(s);
	}
	if (rc < 0) {
		free(rules);
		return rc;
	}
	free(*out);
	*out = rules;
	*n = k;
	return 0;
}

static int net_allow(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	((struct mctx *)o)->allow_node = v;
	return rule_list(w, v, "network.allow", "\"host:port\"", allow_item,
			 &m->net_allow, &m->n_net_allow);
}

static int net_private(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	return rule_list(w, v, "network.allow_private",
			 "address ranges (\"127.0.0.0/8\")", private_item,
			 &m->net_private, &m->n_net_private);
}

static int family_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
			void *arg)
{
	if (!wd_family_find(s)) {
		wd_y_err(w, item,
			 "network.families: '%s' is not a socket family a "
			 "tool can be allowed (unix, inet and inet6 always "
			 "are; a manifest may add: %s)",
			 s, wd_family_names());
		return -EINVAL;
	}
	return 0;
}

static int net_families(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	char **v_ = NULL;
	int n = 0;
	if (wd_y_strlist(w, v, "'network.families'", &v_, &n, family_check,
			 NULL) < 0)
		return -EINVAL;
	/* unix/inet/inet6 are always allowed: drop them, keep the rest */
	wd_y_strv_free(m->socket_families, m->n_socket_families);
	free(m->socket_family_nums);
	m->socket_families = wd_calloc((size_t)n + 1, sizeof(char *));
	m->socket_family_nums = wd_calloc((size_t)n + 1, sizeof(int));
	m->n_socket_families = 0;
	m->net_icmp = false;
	for (int i = 0; i < n; i++) {
		const struct wd_family *f = wd_family_find(v_[i]);
		int af = f->af;
		bool dup = false;
		for (int j = 0; j < m->n_socket_families; j++)
			dup = dup || m->socket_family_nums[j] == af;
		if (f->kind == WD_FAM_ICMP)
			m->net_icmp = true;
		if (f->kind != WD_FAM_AF || dup) {
			free(v_[i]);
			continue;
		}
		m->socket_families[m->n_socket_families] = v_[i];
		m->socket_family_nums[m->n_socket_families++] = af;
	}
	free(v_);
	return 0;
}

static int net_listen(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	((struct mctx *)o)->listen_node = v;
	return wd_y_bool(w, v, "'network.listen'", &M(o)->net_listen);
}

static int f_network(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"allow", net_allow, false},
	    {"allow_private", net_private, false},
	    {"families", net_families, false},
	    {"listen", net_listen, false},
	};
	return wd_y_map(w, v, "'network'", keys, WD_ARRAY_SIZE(keys), o);
}

static int path_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		      void *arg)
{
	if (s[0] != '/') {
		wd_y_err(w, item, "%s: path '%s' must be absolute",
			 (const char *)arg, s);
		return -EINVAL;
	}
	return 0;
}

static int path_list(struct wd_ywalk *w, yaml_node_t *v, const char *what,
		     struct wd_path_list *pl)
{
	char **v_ = NULL;
	int n = 0;
	if (wd_y_strlist(w, v, what, &v_, &n, path_check, (void *)what) < 0)
		return -EINVAL;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char *c = NULL;
		struct wd_err err = {0};
		if (wd_path_canonical(v_[i], &c, &err) < 0) {
			wd_y_err(w,
				 wd_y_get(w, v->data.sequence.items.start[i]),
				 "%s: %s", what, err.msg);
			rc = -EINVAL;
			continue;
		}
		free(v_[i]);
		v_[i] = c;
	}
	if (rc < 0) {
		wd_y_strv_free(v_, n);
		return rc;
	}
	wd_y_strv_free(pl->v, pl->n);
	pl->v = v_;
	pl->n = n;
	return 0;
}

static int fs_read(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return path_list(w, v, "'filesystem.read'", &M(o)->fs_read);
}
/* A write grant on a system path, on an ancestor of one, or anywhere under
 * one, is refused outright: no tool needs it, and in tier 2 the listed
 * paths are bind-mounted writable from the host. DAC (tools never run as
 * uid 0) would stop most of it; this stops it at the policy. Under /dev
 * only the directory itself is refused (/dev/null, /dev/shm are fine).
 * Returns a message fragment, or NULL if the path may be writable. */
static bool write_refused(const char *p, char *why, size_t len)
{
	static const struct {
		const char *path;
		bool subtree;
	} sys[] = {
	    {"/etc", true},  {"/usr", true},	    {"/boot", true},
	    {"/proc", true}, {"/sys", true},	    {"/bin", true},
	    {"/sbin", true}, {"/lib", true},	    {"/lib64", true},
	    {"/root", true}, {"/run/warden", true}, {"/var/lib/warden", true},
	    {"/dev", false},
	};
	size_t n = strlen(p);
	for (size_t i = 0; i < WD_ARRAY_SIZE(sys); i++) {
		const char *s = sys[i].path;
		size_t l = strlen(s);
		if (!strcmp(p, s) || (sys[i].subtree && n > l &&
				      !strncmp(p, s, l) && p[l] == '/')) {
			snprintf(why, len, "is a system path (%s)", s);
			return true;
		}
		if (!strcmp(p, "/") ||
		    (n < l && !strncmp(s, p, n) && s[n] == '/')) {
			snprintf(why, len, "contains %s", s);
			return true;
		}
	}
	return false;
}

static int fs_write(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_path_list *pl = &M(o)->fs_write;
	((struct mctx *)o)->write_node = v;
	if (path_list(w, v, "'filesystem.write'", pl) < 0)
		return -EINVAL;
	int rc = 0;
	for (int i = 0; i < pl->n; i++) {
		char why[96];
		if (write_refused(pl->v[i], why, sizeof(why))) {
			wd_y_err(w,
				 yaml_document_get_node(
				     w->doc, v->data.sequence.items.start[i]),
				 "'filesystem.write': '%s' %s; refused",
				 pl->v[i], why);
			rc = -EINVAL;
		}
	}
	return rc;
}
static int fs_exec(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return path_list(w, v, "'filesystem.exec'", &M(o)->fs_exec);
}

static int f_filesystem(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"read", fs_read, false},
	    {"write", fs_write, false},
	    {"exec", fs_exec, false},
	};
	if (v->type == YAML_SCALAR_NODE) {
		const char *s = wd_y_scalar(v);
		if (s && !strcmp(s, "ephemeral")) {
			M(o)->filesystem_ephemeral = true;
			return 0;
		}
		wd_y_err(w, v,
			 "'filesystem' must be 'ephemeral' or a mapping "
			 "{read, write, exec}");
		return -EINVAL;
	}
	return wd_y_map(w, v, "'filesystem'", keys, WD_ARRAY_SIZE(keys), o);
}

static int syscall_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
			 void *arg)
{
	if (seccomp_syscall_resolve_name(s) == __NR_SCMP_ERROR) {
		wd_y_err(w, item, "syscalls.deny: unknown system call '%s'", s);
		return -EINVAL;
	}
	return 0;
}

static int sc_deny(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	return wd_y_strlist(w, v, "'syscalls.deny'", &m->syscalls_deny,
			    &m->n_syscalls_deny, syscall_check, NULL);
}

static int f_syscalls(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {{"deny", sc_deny, false}};
	return wd_y_map(w, v, "'syscalls'", keys, WD_ARRAY_SIZE(keys), o);
}

static int auth_mode(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"on_behalf_of_user", "service"};
	int i;
	if (wd_y_enum(w, v, "'auth.mode'", words, 2, &i) < 0)
		return -EINVAL;
	M(o)->auth_mode = i ? WD_AUTH_SERVICE : WD_AUTH_ON_BEHALF_OF_USER;
	return 0;
}

static int scope_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		       void *arg)
{
	bool ok = *s && strlen(s) <= 128;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_-.:/", *p)))
			ok = false;
	if (!ok) {
		wd_y_err(w, item,
			 "auth.scopes: '%s' is not a scope name "
			 "([A-Za-z0-9_.:/-]+)",
			 s);
		return -EINVAL;
	}
	return 0;
}

static int auth_scopes(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	return wd_y_strlist(w, v, "'auth.scopes'", &m->auth_scopes,
			    &m->n_auth_scopes, scope_check, NULL);
}

static int f_auth(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"mode", auth_mode, false},
	    {"scopes", auth_scopes, false},
	};
	return wd_y_map(w, v, "'auth'", keys, WD_ARRAY_SIZE(keys), o);
}

/* "N/unit[ per scope]": unit sec|second|s|min|minute|m|hour|h, scope
 * run|user|agent (default run). */
static int f_rate_limit(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_rate_limit *rl = &M(o)->rate_limit;
	char *s = NULL;
	if (wd_y_str(w, v, "'rate_limit'", &s) < 0)
		return -EINVAL;
	char unit[16] = "", per[8] = "", scope[16] = "", extra[2] = "";
	int count = 0, used = 0;
	int k = sscanf(s, "%d/%15[a-z]%n %7s %15s %1s", &count, unit, &used,
		       per, scope, extra);
	int secs = 0;
	if (!strcmp(unit, "s") || !strcmp(unit, "sec") ||
	    !strcmp(unit, "second"))
		secs = 1;
	else if (!strcmp(unit, "m") || !strcmp(unit, "min") ||
		 !strcmp(unit, "minute"))
		secs = 60;
	else if (!strcmp(unit, "h") || !strcmp(unit, "hour"))
		secs = 3600;
	bool ok = (k == 2 || k == 4) && count >= 1 && count <= 1000000 &&
		  secs && s[0] >= '0' && s[0] <= '9';
	if (ok && k == 2 && s[used])
		ok = false;
	if (ok && k == 4)
		ok = !strcmp(per, "per") &&
		     (!strcmp(scope, "run") || !strcmp(scope, "user") ||
		      !strcmp(scope, "agent"));
	if (!ok) {
		wd_y_err(w, v,
			 "'rate_limit': '%s' is not \"N/sec|min|hour per "
			 "run|user|agent\"",
			 s);
		free(s);
		return -EINVAL;
	}
	rl->count = count;
	rl->per_s = secs;
	snprintf(rl->scope, sizeof(rl->scope), "%s", k == 4 ? scope : "run");
	free(s);
	return 0;
}

static int f_side_effects(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	int i;
	if (wd_y_enum(w, v, "'side_effects'", wd_side_effects_words, 3, &i) < 0)
		return -EINVAL;
	M(o)->side_effects = (enum wd_side_effects)i;
	return 0;
}

int wd_manifest_thresholds(struct wd_ywalk *w, yaml_node_t *v, const char *what,
			   struct wd_approval *a)
{
	if (v->type != YAML_MAPPING_NODE ||
	    v->data.mapping.pairs.top == v->data.mapping.pairs.start) {
		wd_y_err(w, v, "%s must be a non-empty mapping {arg: number}",
			 what);
		return -EINVAL;
	}
	int rc = 0;
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
	     p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *k = wd_y_get(w, p->key);
		yaml_node_t *val = wd_y_get(w, p->value);
		if (!k || !val)
			return -EINVAL;
		char *ks = NULL;
		double d = 0;
		if (wd_y_str(w, k, "approval threshold key", &ks) < 0) {
			rc = -EINVAL;
			continue;
		}
		bool dup = false;
		for (int i = 0; i < a->n_above; i++)
			dup = dup || !strcmp(a->above_keys[i], ks);
		if (dup) {
			wd_y_err(w, k, "duplicate key '%s' in %s", ks, what);
			free(ks);
			rc = -EINVAL;
			continue;
		}
		/* threshold may be 0 ("any value needs approval") */
		char what2[96];
		snprintf(what2, sizeof(what2), "approval threshold '%s'", ks);
		if (wd_y_double(w, val, what2, -1e300, 1e15, &d) < 0) {
			free(ks);
			rc = -EINVAL;
			continue;
		}
		if (d < 0) {
			wd_y_err(w, val, "%s must be >= 0", what2);
			free(ks);
			rc = -EINVAL;
			continue;
		}
		a->above_keys = wd_realloc(
		    a->above_keys, (size_t)(a->n_above + 1) * sizeof(char *));
		a->above_vals = wd_realloc(
		    a->above_vals, (size_t)(a->n_above + 1) * sizeof(double));
		a->above_keys[a->n_above] = ks;
		a->above_vals[a->n_above++] = d;
	}
	return rc;
}

static int ap_required_above(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return wd_manifest_thresholds(w, v, "'approval.required_above'",
				      &M(o)->approval);
}

static int f_approval(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct mctx *c = o;
	c->approval_node = v;
	if (v->type == YAML_SCALAR_NODE) {
		const char *s = wd_y_scalar(v);
		if (s && !strcmp(s, "always")) {
			c->m->approval.always = true;
			return 0;
		}
		if (s && !strcmp(s, "never"))
			return 0;
		if (s && !strcmp(s, "required_above")) {
			c->approval_required_above = true;
			return 0;
		}
		wd_y_err(w, v,
			 "'approval' must be always, never, required_above "
			 "or {required_above: {arg: number}}");
		return -EINVAL;
	}
	static const struct wd_y_key keys[] = {
	    {"required_above", ap_required_above, true},
	};
	return wd_y_map(w, v, "'approval'", keys, WD_ARRAY_SIZE(keys), o);
}

static int f_approval_threshold(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	((struct mctx *)o)->approval_threshold_node = v;
	return 0; /* judged once the whole mapping is read */
}

static int out_max(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'output.max_bytes'", 1, 1u << 30, &x) < 0)
		return -EINVAL;
	M(o)->output_max_bytes = (uint32_t)x;
	return 0;
}

static int f_output(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {{"max_bytes", out_max, false}};
	return wd_y_map(w, v, "'output'", keys, WD_ARRAY_SIZE(keys), o);
}

static int f_mode(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const char *const words[] = {"enforce", "audit"};
	int i;
	if (wd_y_enum(w, v, "'mode'", words, 2, &i) < 0)
		return -EINVAL;
	M(o)->mode = i ? WD_MODE_AUDIT : WD_MODE_ENFORCE;
	return 0;
}

static int mech_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
		      void *arg)
{
	if (!wd_mechanism_known(s)) {
		wd_y_err(w, item,
			 "require: unknown mechanism '%s' (known: bpf_lsm, "
			 "landlock, seccomp, bpf_egress, cgroup)",
			 s);
		return -EINVAL;
	}
	return 0;
}

static int f_require(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	return wd_y_strlist(w, v, "'require'", &m->require, &m->n_require,
			    mech_check, NULL);
}

/* replay.environment (manifest_replay.c) reads its lists with these */
int wd_manifest_net_allow(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return net_allow(w, v, o);
}

int wd_manifest_fs_write(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	return fs_write(w, v, o);
}

const struct wd_y_key wd_manifest_keys[] = {
    {"name", f_name, true},
    {"description", f_description, false},
    {"tier", f_tier, true},
    {"exec", f_exec, false},
    {"input", f_input, false},
    {"argv", wd_manifest_f_argv, false},
    {"args_schema", f_args_schema, false},
    {"timeout_ms", f_timeout, false},
    {"memory_mb", f_memory, false},
    {"cpus", f_cpus, false},
    {"pids", f_pids, false},
    {"network", f_network, false},
    {"filesystem", f_filesystem, false},
    {"syscalls", f_syscalls, false},
    {"auth", f_auth, false},
    {"rate_limit", f_rate_limit, false},
    {"side_effects", f_side_effects, false},
    {"approval", f_approval, false},
    {"approval_threshold", f_approval_threshold, false},
    {"output", f_output, false},
    {"mode", f_mode, false},
    {"require", f_require, false},
    {"replay", wd_manifest_f_replay, false},
};
const size_t wd_manifest_n_keys = WD_ARRAY_SIZE(wd_manifest_keys);
