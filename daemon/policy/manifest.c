/* Tool manifests: YAML -> struct wd_manifest, strictly (see ywalk.h for the
 * threats). Every field a manifest can hold is enforced somewhere, so every
 * field is validated here to the value space the enforcer expects. */
#include "policy/manifest.h"
#include "policy/ywalk.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <limits.h>
#include <seccomp.h>
#include <string.h>
#include <sys/socket.h>

/* Parse state for one document: the manifest plus what needs a look at
 * sibling keys once the whole mapping is read. */
struct mctx {
	struct wd_manifest *m;
	bool approval_required_above; /* seed form `approval: required_above` */
	yaml_node_t *approval_node;
	yaml_node_t *approval_threshold_node;
	yaml_node_t *exec_node;
	yaml_node_t *input_node;
};

/* ---- paths
 * ------------------------------------------------------------------- */

/* Lexical normalisation of an absolute path: collapse "//", drop ".",
 * resolve ".." against the text (".." at "/" stays "/"). */
static char *lexical_norm(const char *in)
{
	size_t len = strlen(in);
	char *out = wd_malloc(len + 2);
	size_t o = 0;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchr(p, '/');
		size_t cl = e ? (size_t)(e - p) : strlen(p);
		if (cl == 1 && p[0] == '.') {
			/* skip */
		} else if (cl == 2 && p[0] == '.' && p[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the '/' before the dropped component */
		} else {
			out[o++] = '/';
			memcpy(out + o, p, cl);
			o += cl;
		}
		p += cl;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = 0;
	return out;
}

int wd_path_canonical(const char *path, char **out, struct wd_err *err)
{
	*out = NULL;
	if (!path || path[0] != '/')
		return wd_err_set(err, -EINVAL, "path '%s' is not absolute",
				  path ? path : "");
	if (strlen(path) >= PATH_MAX)
		return wd_err_set(err, -ENAMETOOLONG, "path is too long");
	char *norm = lexical_norm(path);
	char rp[PATH_MAX];
	if (realpath(path, rp)) {
		free(norm);
		*out = wd_strdup(rp);
		return 0;
	}
	/* Not (fully) existing: resolve the longest existing prefix of the
	 * normalised path and keep the rest as written, so a future file
	 * under /lib still lands under /usr/lib on merged-usr systems. */
	size_t n = strlen(norm);
	for (size_t cut = n; cut > 0; cut--) {
		if (norm[cut] != '/' && norm[cut] != 0)
			continue;
		char save = norm[cut];
		norm[cut] = 0;
		bool ok = realpath(norm, rp) != NULL;
		norm[cut] = save;
		if (!ok)
			continue;
		const char *rest = norm + cut;
		size_t rl = strlen(rp);
		if (rl == 1 && *rest) /* prefix resolved to "/" */
			rl = 0;
		if (rl + strlen(rest) >= PATH_MAX) {
			free(norm);
			return wd_err_set(err, -ENAMETOOLONG,
					  "path is too long");
		}
		*out = wd_asprintf("%.*s%s", (int)rl, rp, rest);
		free(norm);
		return 0;
	}
	*out = norm;
	return 0;
}

/* ---- network rules
 * ------------------------------------------------------------ */

static bool valid_hostname(const char *h)
{
	size_t n = strlen(h), lab = 0;
	if (!n || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (lab == 0 || h[i - 1] == '-')
				return false;
			lab = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c == '-' && lab == 0)
			return false;
		if (++lab > 63)
			return false;
	}
	return h[n - 1] != '-';
}

static int parse_port(const char *s, uint16_t *port, struct wd_err *err,
		      const char *text)
{
	if (!strcmp(s, "*")) {
		*port = 0;
		return 0;
	}
	unsigned long v = 0;
	if (!*s || strlen(s) > 5)
		return wd_err_set(err, -EINVAL,
				  "'%s': port must be 1-65535 or '*'", text);
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return wd_err_set(err, -EINVAL,
					  "'%s': port must be 1-65535 or '*'",
					  text);
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > 65535)
		return wd_err_set(err, -EINVAL,
				  "'%s': port must be 1-65535 or '*'", text);
	*port = (uint16_t)v;
	return 0;
}

static int parse_prefix(const char *s, int max, int *out, struct wd_err *err,
			const char *text)
{
	int v = 0;
	if (!*s || strlen(s) > 3)
		return wd_err_set(err, -EINVAL, "'%s': bad prefix length",
				  text);
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return wd_err_set(err, -EINVAL,
					  "'%s': bad prefix length", text);
		v = v * 10 + (*p - '0');
	}
	if (v > max)
		return wd_err_set(err, -EINVAL,
				  "'%s': prefix length %d exceeds %d", text, v,
				  max);
	*out = v;
	return 0;
}

/* Strict: bits beyond the prefix must be zero ("10.0.0.1/8" is most likely
 * a typo for a host rule, and silently widening it would loosen policy). */
static bool host_bits_clear(const uint8_t a[16], int prefix)
{
	for (int b = prefix; b < 128; b++)
		if (a[b / 8] & (0x80 >> (b % 8)))
			return false;
	return true;
}

int wd_net_rule_parse(const char *text, struct wd_net_rule *r,
		      struct wd_err *err)
{
	memset(r, 0, sizeof(*r));
	if (!text || !*text)
		return wd_err_set(err, -EINVAL, "empty network rule");
	snprintf(r->text, sizeof(r->text), "%s", text);
	if (strlen(text) > 300)
		return wd_err_set(err, -EINVAL, "network rule too long");
	char buf[320];
	snprintf(buf, sizeof(buf), "%s", text);

	char *addr, *port;
	bool bracket = buf[0] == '[';
	if (bracket) {
		char *rb = strchr(buf, ']');
		if (!rb)
			return wd_err_set(err, -EINVAL, "'%s': missing ']'",
					  text);
		*rb = 0;
		addr = buf + 1;
		if (rb[1] != ':')
			return wd_err_set(err, -EINVAL,
					  "'%s': missing ':port' after ']' "
					  "(use :* for any port)",
					  text);
		port = rb + 2;
	} else {
		char *c = strrchr(buf, ':');
		if (!c)
			return wd_err_set(err, -EINVAL,
					  "'%s': missing ':port' (use :* for "
					  "any port)",
					  text);
		*c = 0;
		port = c + 1;
		addr = buf;
		if (strchr(addr, ':'))
			return wd_err_set(err, -EINVAL,
					  "'%s': IPv6 addresses must be "
					  "written in brackets, e.g. [::1]:443",
					  text);
	}
	int rc = parse_port(port, &r->port, err, text);
	if (rc < 0)
		return rc;
	if (!*addr)
		return wd_err_set(err, -EINVAL, "'%s': missing address", text);

	char *slash = strchr(addr, '/');
	if (slash)
		*slash = 0;
	struct in_addr a4;
	struct in6_addr a6;
	int prefix;
	if (!bracket && inet_pton(AF_INET, addr, &a4) == 1) {
		prefix = 32;
		if (slash &&
		    (rc = parse_prefix(slash + 1, 32, &prefix, err, text)) < 0)
			return rc;
		r->addr[10] = 0xff;
		r->addr[11] = 0xff;
		memcpy(r->addr + 12, &a4, 4);
		r->prefix = (uint8_t)(prefix + 96);
	} else if (bracket && inet_pton(AF_INET6, addr, &a6) == 1) {
		prefix = 128;
		if (slash &&
		    (rc = parse_prefix(slash + 1, 128, &prefix, err, text)) < 0)
			return rc;
		memcpy(r->addr, &a6, 16);
		r->prefix = (uint8_t)prefix;
	} else if (bracket) {
		return wd_err_set(err, -EINVAL,
				  "'%s': '%s' is not an IPv6 address", text,
				  addr);
	} else {
		if (slash)
			return wd_err_set(err, -EINVAL,
					  "'%s': a prefix needs an address, "
					  "not a host name",
					  text);
		/* dotted digits that inet_pton rejected: a bad IPv4, not a
		 * host name (no TLD is all digits) */
		const char *dot = strrchr(addr, '.');
		const char *last = dot ? dot + 1 : addr;
		bool numeric = *last;
		for (const char *p = last; *p; p++)
			if (*p < '0' || *p > '9')
				numeric = false;
		if (numeric || !valid_hostname(addr))
			return wd_err_set(err, -EINVAL,
					  "'%s': '%s' is not an IPv4 address "
					  "or host name",
					  text, addr);
		r->needs_resolve = true;
		size_t i;
		for (i = 0; addr[i] && i < sizeof(r->host) - 1; i++)
			r->host[i] = (char)((addr[i] >= 'A' && addr[i] <= 'Z')
						? addr[i] + 32
						: addr[i]);
		r->host[i] = 0;
		return 0;
	}
	if (!host_bits_clear(r->addr, r->prefix))
		return wd_err_set(err, -EINVAL,
				  "'%s': address has bits set beyond the "
				  "/%d prefix",
				  text, slash ? prefix : 0);
	return 0;
}

/* ---- socket families / mechanisms
 * -------------------------------------------- */

static const struct {
	const char *name;
	int af;
} families[] = {
    {"unix", AF_UNIX},
    {"inet", AF_INET},
    {"inet6", AF_INET6},
    {"netlink", AF_NETLINK},
    {"packet", AF_PACKET},
    {"key", AF_KEY},
    {"alg", AF_ALG},
    {"vsock", AF_VSOCK},
    {"bluetooth", AF_BLUETOOTH},
    {"can", AF_CAN},
    {"xdp", AF_XDP},
    {"tipc", AF_TIPC},
    {"rds", AF_RDS},
    {"llc", AF_LLC},
    {"ax25", AF_AX25},
    {"x25", AF_X25},
    {"appletalk", AF_APPLETALK},
    {"ipx", AF_IPX},
    {"netrom", AF_NETROM},
    {"rose", AF_ROSE},
    {"decnet", AF_DECnet},
    {"atmpvc", AF_ATMPVC},
    {"atmsvc", AF_ATMSVC},
    {"irda", AF_IRDA},
    {"pppox", AF_PPPOX},
    {"isdn", AF_ISDN},
    {"phonet", AF_PHONET},
    {"ieee802154", AF_IEEE802154},
    {"caif", AF_CAIF},
    {"nfc", AF_NFC},
    {"rxrpc", AF_RXRPC},
    {"qipcrtr", AF_QIPCRTR},
    {"smc", AF_SMC},
    {"mctp", 45},
};

int wd_socket_family_parse(const char *name)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(families); i++)
		if (!strcmp(name, families[i].name))
			return families[i].af;
	return -1;
}

static const char *const mechanisms[] = {"bpf_lsm", "landlock", "seccomp",
					 "bpf_egress", "cgroup"};

bool wd_mechanism_known(const char *name)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(mechanisms); i++)
		if (!strcmp(name, mechanisms[i]))
			return true;
	return false;
}

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

static int f_memory(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	uint64_t x;
	if (wd_y_uint(w, v, "'memory_mb'", 1, 1048576, &x) < 0)
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

static int net_allow(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	struct wd_manifest *m = M(o);
	if (v->type != YAML_SEQUENCE_NODE) {
		wd_y_err(w, v,
			 "'network.allow' must be a list of \"host:port\", "
			 "not %s",
			 wd_y_kind(v));
		return -EINVAL;
	}
	int rc = 0;
	yaml_node_item_t *it = v->data.sequence.items.start;
	int cnt = (int)(v->data.sequence.items.top - it);
	struct wd_net_rule *rules = wd_calloc((size_t)cnt + 1, sizeof(*rules));
	int k = 0;
	for (int i = 0; i < cnt; i++) {
		yaml_node_t *item = wd_y_get(w, it[i]);
		char *s = NULL;
		struct wd_err err = {0};
		if (!item) {
			rc = -EINVAL;
			break;
		}
		if (wd_y_str(w, item, "'network.allow' entry", &s) < 0) {
			rc = -EINVAL;
			continue;
		}
		if (wd_net_rule_parse(s, &rules[k], &err) < 0) {
			wd_y_err(w, item, "network.allow: %s", err.msg);
			rc = -EINVAL;
		} else {
			k++;
		}
		free(s);
	}
	if (rc < 0) {
		free(rules);
		return rc;
	}
	free(m->net_allow);
	m->net_allow = rules;
	m->n_net_allow = k;
	return 0;
}

static int family_check(struct wd_ywalk *w, yaml_node_t *item, const char *s,
			void *arg)
{
	if (wd_socket_family_parse(s) < 0) {
		wd_y_err(w, item,
			 "network.families: unknown socket family '%s'", s);
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
	for (int i = 0; i < n; i++) {
		int af = wd_socket_family_parse(v_[i]);
		bool dup = false;
		for (int j = 0; j < m->n_socket_families; j++)
			dup = dup || m->socket_family_nums[j] == af;
		if (af == AF_UNIX || af == AF_INET || af == AF_INET6 || dup) {
			free(v_[i]);
			continue;
		}
		m->socket_families[m->n_socket_families] = v_[i];
		m->socket_family_nums[m->n_socket_families++] = af;
	}
	free(v_);
	return 0;
}

static int f_network(struct wd_ywalk *w, yaml_node_t *v, void *o)
{
	static const struct wd_y_key keys[] = {
	    {"allow", net_allow, false},
	    {"families", net_families, false},
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
	static const char *const words[] = {"none", "internal", "external"};
	int i;
	if (wd_y_enum(w, v, "'side_effects'", words, 3, &i) < 0)
		return -EINVAL;
	M(o)->side_effects = (enum wd_side_effects)i;
	return 0;
}

static int thresholds(struct wd_ywalk *w, yaml_node_t *v, const char *what,
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
	return thresholds(w, v, "'approval.required_above'", &M(o)->approval);
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

static const struct wd_y_key manifest_keys[] = {
    {"name", f_name, true},
    {"description", f_description, false},
    {"tier", f_tier, true},
    {"exec", f_exec, false},
    {"input", f_input, false},
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
};

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

/* Checks across fields: a manifest that cannot work as written is an
 * error at load rather than a confusing denial at call time. */
static void cross_field(struct wd_ywalk *w, struct mctx *c)
{
	struct wd_manifest *m = c->m;
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
	wd_y_map(w, root, "manifest", manifest_keys,
		 WD_ARRAY_SIZE(manifest_keys), &c);

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
		thresholds(w, c.approval_threshold_node, "'approval_threshold'",
			   &c.m->approval);

	if (w->nerr == errs)
		cross_field(w, &c);
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
	struct wd_diag local = {0};
	struct wd_diag *d = diag ? diag : &local;
	int before = d->n + d->dropped;
	*out = NULL;
	*n = 0;
	int rc = wd_y_load(st.file, text, len, d, load_doc, &st);
	if (rc == 0)
		wd_diag_add(d, st.file, 0, 0, "no manifest in file");
	if (rc <= 0 || d->n + d->dropped != before) {
		wd_manifest_free_all(st.v, st.n);
		wd_diag_free(&local);
		return -EINVAL;
	}
	wd_diag_free(&local);
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
	char *text = NULL;
	size_t len = 0;
	*out = NULL;
	*n = 0;
	int rc = wd_read_file(path, &text, &len);
	if (rc < 0) {
		wd_diag_add(diag, path, 0, 0, "cannot read: %s", strerror(-rc));
		return rc;
	}
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

void wd_manifest_free(struct wd_manifest *m)
{
	if (!m)
		return;
	free(m->source);
	free(m->name);
	free(m->description);
	wd_y_strv_free(m->exec, m->n_exec);
	free(m->input_field);
	free(m->args_schema);
	free(m->net_allow);
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
	free(m);
}

void wd_manifest_free_all(struct wd_manifest **v, int n)
{
	for (int i = 0; i < n; i++)
		wd_manifest_free(v[i]);
	free(v);
}
