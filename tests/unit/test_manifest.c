/* Tool manifest parser: shipped manifests, every field, exact diagnostics
 * (file:line:col) for each kind of error, the network rule parser and path
 * canonicalisation. Run from the repository root. */
#include "policy/manifest.h"
#include "t.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define FIX "tests/fixtures/policy/"

static bool has_path(const struct wd_path_list *pl, const char *p)
{
	for (int i = 0; i < pl->n; i++)
		if (!strcmp(pl->v[i], p))
			return true;
	return false;
}

static void test_shipped(void)
{
	DIR *d = opendir("policy/tools");
	int n = 0;
	struct dirent *e;
	if (!d) {
		T_FAIL("shipped-tools", "cannot open policy/tools");
		return;
	}
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 6 || strcmp(e->d_name + l - 5, ".yaml"))
			continue;
		char path[PATH_MAX], name[128];
		snprintf(path, sizeof(path), "policy/tools/%s", e->d_name);
		snprintf(name, sizeof(name), "shipped-%s", e->d_name);
		struct wd_manifest *m = NULL;
		struct wd_diag dg = {0};
		int rc = wd_manifest_load_file(path, &m, &dg);
		T_OK(rc == 0, name, "rc %d: %s", rc, dg.n ? dg.msgs[0] : "");
		if (m) {
			/* the file is named after the tool */
			char want[128];
			snprintf(want, sizeof(want), "%s.yaml", m->name);
			T_OK(!strcmp(want, e->d_name), name,
			     "name '%s' does not match file", m->name);
			/* deny by default: every shipped tool lists what it
			 * reads and writes, nothing writable outside scratch */
			T_OK(m->filesystem_ephemeral || m->fs_read.n > 0, name,
			     "no filesystem.read list");
			for (int i = 0; i < m->fs_read.n; i++) {
				struct stat st;
				T_OK(stat(m->fs_read.v[i], &st) == 0, name,
				     "read path %s does not exist",
				     m->fs_read.v[i]);
			}
			T_OK(m->fs_write.n == 0, name, "writable paths");
			n++;
		}
		wd_manifest_free(m);
		wd_diag_free(&dg);
	}
	closedir(d);
	T_OK(n >= 5, "shipped-count", "only %d manifests", n);
}

static void test_all_fields(void)
{
	struct wd_manifest *m = NULL;
	struct wd_diag dg = {0};
	int rc = wd_manifest_load_file(FIX "good-all.yaml", &m, &dg);
	T_OK(rc == 0 && m, "all-fields-load", "rc %d: %s", rc,
	     dg.n ? dg.msgs[0] : "");
	if (!m)
		return;
	T_OK(!strcmp(m->name, "all_fields"), "field-name", "%s", m->name);
	T_OK(!strcmp(m->description, "every field"), "field-description", "%s",
	     m->description);
	T_OK(m->tier == WD_TIER_2, "field-tier", "%d", m->tier);
	T_OK(m->n_exec == 3 && !strcmp(m->exec[0], "/bin/sh") &&
		 !strcmp(m->exec[2], "cat") && m->exec[3] == NULL,
	     "field-exec", "n %d", m->n_exec);
	T_OK(m->input == WD_INPUT_STDIN_FIELD && m->input_field &&
		 !strcmp(m->input_field, "code"),
	     "field-input", "%d", m->input);
	T_OK(m->args_schema &&
		 !strcmp(m->args_schema,
			 "{\"type\":\"object\",\"required\":[\"code\"],"
			 "\"properties\":{\"code\":{\"type\":\"string\","
			 "\"maxLength\":10},\"n\":{\"type\":\"integer\"}}}"),
	     "field-args_schema", "%s", m->args_schema);
	T_OK(m->timeout_ms == 1234, "field-timeout_ms", "%u", m->timeout_ms);
	T_OK(m->memory_mb == 77, "field-memory_mb", "%u", m->memory_mb);
	T_OK(m->cpus == 1.5, "field-cpus", "%g", m->cpus);
	T_OK(m->pids == 9, "field-pids", "%u", m->pids);
	T_OK(m->n_net_allow == 5, "field-network-allow", "%d", m->n_net_allow);
	if (m->n_net_allow == 5) {
		struct wd_net_rule *r = m->net_allow;
		T_OK(r[0].port == 9200 && r[0].prefix == 128 &&
			 !r[0].needs_resolve,
		     "field-network-v4", "port %u prefix %u", r[0].port,
		     r[0].prefix);
		T_OK(r[1].port == 0 && r[1].prefix == 104, "field-network-cidr",
		     "port %u prefix %u", r[1].port, r[1].prefix);
		T_OK(r[4].needs_resolve && !strcmp(r[4].host, "example.com") &&
			 r[4].port == 443 && r[4].prefix == 0,
		     "field-network-hostname-not-resolved", "host '%s'",
		     r[4].host);
	}
	T_OK(m->n_net_private == 3 && m->net_private[0].prefix == 104 &&
		 m->net_private[0].port == 0 && m->net_private[1].prefix == 8 &&
		 m->net_private[2].prefix == 128 &&
		 !strcmp(m->net_private[1].text, "fd00::/8"),
	     "field-network-allow-private", "n %d", m->n_net_private);
	T_OK(m->n_socket_families == 2 &&
		 !strcmp(m->socket_families[0], "netlink") &&
		 m->socket_family_nums[0] == AF_NETLINK &&
		 m->socket_family_nums[1] == AF_PACKET,
	     "field-network-families", "n %d (unix dropped, duplicate dropped)",
	     m->n_socket_families);
	char lib[PATH_MAX];
	T_OK(realpath("/lib", lib) && has_path(&m->fs_read, lib),
	     "field-filesystem-read-symlink", "%s", m->fs_read.v[0]);
	T_OK(has_path(&m->fs_read, "/usr/share/doc"),
	     "field-filesystem-read-normalised", "%s", m->fs_read.v[1]);
	T_OK(has_path(&m->fs_read, "/nonexistent-warden/b"),
	     "field-filesystem-read-missing", "%s", m->fs_read.v[2]);
	T_OK(m->fs_write.n == 1 && !strcmp(m->fs_write.v[0], "/tmp/warden-x"),
	     "field-filesystem-write-canonical", "%s", m->fs_write.v[0]);
	char sh[PATH_MAX];
	T_OK(realpath("/bin/sh", sh) && m->fs_exec.n == 1 &&
		 !strcmp(m->fs_exec.v[0], sh),
	     "field-filesystem-exec", "%s", m->fs_exec.v[0]);
	T_OK(!m->filesystem_ephemeral, "field-filesystem-not-ephemeral", "set");
	T_OK(m->n_syscalls_deny == 2 &&
		 !strcmp(m->syscalls_deny[1], "personality"),
	     "field-syscalls", "n %d", m->n_syscalls_deny);
	T_OK(m->auth_mode == WD_AUTH_SERVICE && m->n_auth_scopes == 2 &&
		 !strcmp(m->auth_scopes[1], "email:send"),
	     "field-auth", "mode %d n %d", m->auth_mode, m->n_auth_scopes);
	T_OK(m->rate_limit.count == 5 && m->rate_limit.per_s == 3600 &&
		 !strcmp(m->rate_limit.scope, "user"),
	     "field-rate_limit", "%d/%d %s", m->rate_limit.count,
	     m->rate_limit.per_s, m->rate_limit.scope);
	T_OK(m->side_effects == WD_SE_INTERNAL, "field-side_effects", "%d",
	     m->side_effects);
	T_OK(!m->approval.always && m->approval.n_above == 2 &&
		 !strcmp(m->approval.above_keys[0], "recipients") &&
		 m->approval.above_vals[0] == 1 &&
		 m->approval.above_vals[1] == 100.5,
	     "field-approval", "n %d", m->approval.n_above);
	T_OK(m->output_max_bytes == 4096, "field-output", "%u",
	     m->output_max_bytes);
	T_OK(m->mode == WD_MODE_AUDIT, "field-mode", "%d", m->mode);
	T_OK(m->n_require == 2 && !strcmp(m->require[0], "bpf_lsm"),
	     "field-require", "n %d", m->n_require);
	wd_manifest_free(m);
	wd_diag_free(&dg);
}

static void test_defaults_json_seed(void)
{
	const char *y = "name: d\ntier: 1\n";
	struct wd_manifest *m = NULL;
	struct wd_diag dg = {0};
	int rc = wd_manifest_load_str("d.yaml", y, strlen(y), &m, &dg);
	T_OK(rc == 0 && m, "defaults-load", "rc %d", rc);
	if (m) {
		T_OK(m->timeout_ms == WD_DEFAULT_TIMEOUT_MS &&
			 m->memory_mb == WD_DEFAULT_MEMORY_MB &&
			 m->pids == WD_DEFAULT_PIDS &&
			 m->output_max_bytes == WD_DEFAULT_OUTPUT_MAX &&
			 m->cpus == 0,
		     "defaults-numbers", "timeout %u", m->timeout_ms);
		T_OK(m->side_effects == WD_SE_EXTERNAL &&
			 m->auth_mode == WD_AUTH_ON_BEHALF_OF_USER &&
			 m->mode == WD_MODE_ENFORCE &&
			 m->input == WD_INPUT_STDIN_JSON,
		     "defaults-safe", "side_effects %d", m->side_effects);
		T_OK(m->n_net_allow == 0 && m->fs_read.n == 0 && m->fs_read.v &&
			 m->syscalls_deny && !m->exec,
		     "defaults-deny", "lists not empty");
		T_OK(m->args_schema &&
			 !strcmp(m->args_schema, "{\"type\":\"object\"}"),
		     "defaults-schema", "%s", m->args_schema);
	}
	wd_manifest_free(m);
	wd_diag_free(&dg);

	/* JSON is YAML; the seed's approval form */
	rc = wd_manifest_load_file(FIX "good-seedform.json", &m, &dg);
	T_OK(rc == 0 && m && m->tier == WD_TIER_3 && m->filesystem_ephemeral &&
		 m->approval.n_above == 1 && m->approval.above_vals[0] == 2,
	     "json-seed-approval-form", "rc %d %s", rc, dg.n ? dg.msgs[0] : "");
	wd_manifest_free(m);
	wd_diag_free(&dg);

	/* the seed's three manifests, as one multi-document file */
	struct wd_manifest **v = NULL;
	int n = 0;
	rc = wd_manifest_load_all(FIX "seed-000.yaml", &v, &n, &dg);
	T_OK(rc == 0 && n == 3, "seed-multidoc", "rc %d n %d %s", rc, n,
	     dg.n ? dg.msgs[0] : "");
	if (rc == 0 && n == 3) {
		T_OK(!strcmp(v[0]->name, "search_internal_docs") &&
			 v[0]->net_allow[0].needs_resolve &&
			 v[0]->rate_limit.count == 60 &&
			 v[0]->rate_limit.per_s == 60,
		     "seed-doc1", "%s", v[0]->name);
		T_OK(v[1]->filesystem_ephemeral && v[1]->memory_mb == 512 &&
			 v[1]->n_net_allow == 0 && v[1]->line == 14,
		     "seed-doc2", "line %d", v[1]->line);
		T_OK(v[2]->approval.n_above == 1 &&
			 !strcmp(v[2]->approval.above_keys[0], "recipients") &&
			 v[2]->side_effects == WD_SE_EXTERNAL,
		     "seed-doc3", "%d", v[2]->approval.n_above);
	}
	wd_manifest_free_all(v, n);
	wd_diag_free(&dg);

	/* empty documents (a trailing or doubled ---) are skipped */
	const char *mt = "---\n---\nname: a\ntier: 1\n---\n---\nname: b\n"
			 "tier: 2\n---\n";
	rc = wd_manifest_load_all_str("mt.yaml", mt, strlen(mt), &v, &n, &dg);
	T_OK(rc == 0 && n == 2 && !strcmp(v[1]->name, "b") && v[1]->line == 7,
	     "empty-documents-skipped", "rc %d n %d %s", rc, n,
	     dg.n ? dg.msgs[0] : "");
	wd_manifest_free_all(v, n);
	wd_diag_free(&dg);
	rc = wd_manifest_load_str("s.yaml", "hello\n", 6, &m, &dg);
	T_OK(
	    rc == -EINVAL && dg.n == 1 &&
		!strcmp(dg.msgs[0],
			"s.yaml:1:1: manifest must be a mapping, not a scalar"),
	    "scalar-document", "%s", dg.n ? dg.msgs[0] : "");
	wd_diag_free(&dg);

	/* load_file yields the first document */
	rc = wd_manifest_load_file(FIX "seed-000.yaml", &m, &dg);
	T_OK(rc == 0 && m && !strcmp(m->name, "search_internal_docs"),
	     "seed-load-file-first", "rc %d", rc);
	wd_manifest_free(m);
	wd_diag_free(&dg);

	rc = wd_manifest_load_str("e.yaml", "", 0, &m, &dg);
	T_OK(rc == -EINVAL && !m && dg.n == 1 &&
		 !strcmp(dg.msgs[0], "e.yaml:1:1: no manifest in file"),
	     "empty-file", "rc %d %s", rc, dg.n ? dg.msgs[0] : "");
	wd_diag_free(&dg);
}

struct bad_case {
	const char *file;
	const char *msgs[16];
};

static const struct bad_case bad[] = {
    {"bad-unknown-key.yaml",
     {"3:1: unknown key 'timout_ms' in manifest (did you mean "
      "'timeout_ms'?)"}},
    {"bad-deep-key.yaml",
     {"5:3: unknown key 'deny' in 'network'",
      "8:3: unknown key 'wirte' in 'filesystem' (did you mean 'write'?)",
      "11:3: unknown key 'when' in 'approval'"}},
    {"bad-types.yaml",
     {"2:7: 'tier' must be an integer, not a string",
      "3:7: 'exec' must be a list of strings, not a scalar",
      "4:13: 'timeout_ms' must be an integer, not 'soon'",
      "5:7: 'cpus': 0 is out of range (0, 4096]",
      "6:7: 'pids': -3 is out of range 1..4194304",
      "7:12: 'memory_mb' must be an integer, not '1.5'",
      "8:10: 'network' must be a mapping, not a list",
      "9:15: 'side_effects': 'maybe' is not one of none|internal|external",
      "10:7: 'mode' must be one of enforce|audit, not a list",
      "11:21: 'output.max_bytes': 0 is out of range 1..1073741824"}},
    {"bad-missing.yaml",
     {"1:1: missing required key 'name' in manifest",
      "1:1: missing required key 'tier' in manifest"}},
    {"bad-net.yaml",
     {"5:7: network.allow: '127.0.0.1': missing ':port' (use :* for any "
      "port)",
      "6:7: network.allow: '127.0.0.1:65536': port must be 1-65535 or '*'",
      "7:7: network.allow: '10.0.0.0/33:443': prefix length 33 exceeds 32",
      "8:7: network.allow: '10.1.0.0/8:443': address has bits set beyond "
      "the /8 prefix",
      "9:7: network.allow: '[::1]:http': port must be 1-65535 or '*'",
      "10:7: network.allow: 'fd00::1:443': IPv6 addresses must be written "
      "in brackets, e.g. [::1]:443",
      "11:7: network.allow: '[fd00::/8:443': missing ']'",
      "12:7: network.allow: 'bad_host!:80': 'bad_host!' is not an IPv4 "
      "address or host name",
      "13:7: network.allow: '300.1.2.3:80': '300.1.2.3' is not an IPv4 "
      "address or host name",
      "14:7: network.allow: '443': missing ':port' (use :* for any port)",
      "15:7: network.allow: '*.com:80': a wildcard is '*.' and a suffix of "
      "two labels or more (*.svc.internal:443): it stands for one label",
      "16:7: network.allow: 'a.*.example:80': 'a.*.example' is not an IPv4 "
      "address or host name",
      "17:23: network.families: 'carrier_pigeon' is not a socket family a "
      "tool can be allowed (unix, inet and inet6 always are; a manifest "
      "may add: netlink, packet, vsock, alg, xdp, bluetooth, can, tipc, "
      "icmp)",
      "18:19: network.allow_private: '10.0.0.0/33' is not an address or "
      "range (10.0.0.0/8, fd00::/8): prefix length 33 exceeds 32",
      "18:34: network.allow_private: 'example.com' is not an address or "
      "range (10.0.0.0/8, fd00::/8)"}},
    {"bad-tier3-allow.yaml",
     {"4:10: 'network.allow' '[::1]:9200': tier 3's link carries IPv4 "
      "only (use tier 1 or 2)"}},
    {"bad-paths.yaml",
     {"3:8: 'exec[0]' must be an absolute path, not 'bin/sh'",
      "5:18: 'filesystem.read': path 'usr/lib' must be absolute",
      "5:29: 'filesystem.read': path '' must be absolute",
      "6:11: 'filesystem.write': path './tmp' must be absolute",
      "7:10: 'filesystem.exec': path '42' must be absolute"}},
    {"bad-syscall.yaml",
     {"4:18: syscalls.deny: unknown system call 'not_a_syscall'",
      "4:33: syscalls.deny: unknown system call 'open at'",
      "5:20: require: unknown mechanism 'selinux' (known: bpf_lsm, "
      "landlock, seccomp, bpf_egress, cgroup)"}},
    {"bad-syntax.yaml",
     {"4:1: YAML syntax error: did not find expected ',' or '}' while "
      "parsing a flow mapping"}},
    {"bad-approval.yaml",
     {"3:11: 'approval: required_above' needs 'approval_threshold: {arg: "
      "number}'"}},
    {"bad-approval2.yaml",
     {"4:41: approval threshold 'recipients' must be >= 0",
      "3:21: 'approval_threshold' needs 'approval: required_above'"}},
    {"bad-dup.yaml", {"4:1: duplicate key 'network' in manifest"}},
    {"bad-multi.yaml",
     {"6:7: 'tier': 4 is out of range 1..3",
      "8:1: duplicate manifest name 'first' (also at line 1)"}},
    {"bad-nul.yaml", {"3:8: 'exec': string contains a NUL byte"}},
    {"bad-cross.yaml",
     {"4:8: 'input': field 'url' is not in args_schema.properties",
      "3:8: 'exec[0]' /usr/bin/curl (/usr/bin/curl) is not under any "
      "filesystem.exec path"}},
    {"bad-write.yaml",
     {"4:22: 'filesystem.write': '/' contains /etc; refused",
      "4:27: 'filesystem.write': '/etc' is a system path (/etc); refused",
      "4:35: 'filesystem.write': '/usr/lib/x' is a system path (/usr); "
      "refused",
      "4:45: 'filesystem.write': '/proc/sys/kernel' is a system path "
      "(/proc); refused",
      "4:65: 'filesystem.write': '/var' contains /var/lib/warden; refused",
      "4:86: 'filesystem.write': '/run' contains /run/warden; refused"}},
    {"bad-misc.yaml",
     {"1:7: 'name' 'Upper Case' must match [a-z0-9_-]{1,64}",
      "3:8: 'input': field name 'bad-field' must match [A-Za-z0-9_]+",
      "4:13: 'rate_limit': '60 per minute' is not \"N/sec|min|hour per "
      "run|user|agent\"",
      "5:14: 'auth.mode': 'root' is not one of on_behalf_of_user|service",
      "5:29: auth.scopes: 'docs read' is not a scope name "
      "([A-Za-z0-9_.:/-]+)",
      "6:14: 'args_schema' must have type: object",
      "7:13: 'filesystem' must be 'ephemeral' or a mapping {read, write, "
      "exec}"}},
};

static void test_bad(void)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(bad); i++) {
		char path[256], name[128];
		snprintf(path, sizeof(path), FIX "%s", bad[i].file);
		snprintf(name, sizeof(name), "diag-%s", bad[i].file);
		struct wd_manifest **v = NULL;
		int n = 0;
		struct wd_diag dg = {0};
		int rc = wd_manifest_load_all(path, &v, &n, &dg);
		int want = 0;
		while (want < 16 && bad[i].msgs[want])
			want++;
		bool ok = rc == -EINVAL && !v && n == 0 && dg.n == want;
		const char *why = "count";
		for (int k = 0; ok && k < want; k++) {
			char full[512];
			snprintf(full, sizeof(full), "%s:%s", path,
				 bad[i].msgs[k]);
			if (strcmp(dg.msgs[k], full)) {
				ok = false;
				why = dg.msgs[k];
			}
		}
		T_OK(ok, name,
		     "rc %d, %d messages (want %d); first mismatch: %s", rc,
		     dg.n, want, dg.n ? why : "none");
		if (!ok)
			for (int k = 0; k < dg.n; k++)
				printf("    got: %s\n", dg.msgs[k]);
		wd_diag_free(&dg);
	}
	/* structured items match the message */
	struct wd_diag dg = {0};
	struct wd_manifest *m = NULL;
	wd_manifest_load_file(FIX "bad-unknown-key.yaml", &m, &dg);
	T_OK(dg.n == 1 && dg.items[0].line == 3 && dg.items[0].col == 1 &&
		 !strcmp(dg.items[0].file, FIX "bad-unknown-key.yaml") &&
		 !strncmp(dg.items[0].msg, "unknown key", 11),
	     "diag-items", "n %d", dg.n);
	wd_diag_free(&dg);
}

static void test_aliases(void)
{
	/* billion laughs and a self-referencing alias: must end quickly
	 * with an error, not blow up */
	const char *lol = "name: t\ntier: 1\nargs_schema:\n  type: object\n"
			  "  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
			  "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
			  "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
			  "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
			  "  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
			  "  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
	struct wd_manifest *m = NULL;
	struct wd_diag dg = {0};
	int rc = wd_manifest_load_str("lol.yaml", lol, strlen(lol), &m, &dg);
	T_OK(rc == -EINVAL && dg.n >= 1 && strstr(dg.msgs[0], "too large"),
	     "alias-billion-laughs", "rc %d %s", rc, dg.n ? dg.msgs[0] : "");
	wd_diag_free(&dg);
	const char *cyc = "name: t\ntier: 1\nargs_schema: &s {type: object, "
			  "p: *s}\n";
	rc = wd_manifest_load_str("cyc.yaml", cyc, strlen(cyc), &m, &dg);
	T_OK(rc == -EINVAL && dg.n >= 1, "alias-cycle", "rc %d %s", rc,
	     dg.n ? dg.msgs[0] : "");
	wd_diag_free(&dg);
}

/* libyaml's scanner is quadratic in flow nesting: 200000 nested brackets
 * took 546 s before the depth pre-scan; now refused at once. */
static void test_deep_nesting(void)
{
	const int n = 200000;
	const char *head = "name: t\ntier: 1\nargs_schema: {type: object, x: ";
	size_t hl = strlen(head), len = hl + 2 * (size_t)n + 2;
	char *y = wd_malloc(len + 1);
	memcpy(y, head, hl);
	memset(y + hl, '[', n);
	memset(y + hl + n, ']', n);
	memcpy(y + hl + 2 * n, "}\n", 3);
	struct wd_manifest *m = NULL;
	struct wd_diag dg = {0};
	uint64_t t0 = wd_now_ns();
	int rc = wd_manifest_load_str("deep.yaml", y, len, &m, &dg);
	double s = (double)(wd_now_ns() - t0) / 1e9;
	T_OK(rc == -EINVAL && dg.n == 1 &&
		 !strcmp(dg.msgs[0],
			 "deep.yaml:3:94: nested deeper than 64 levels"),
	     "deep-nesting-refused", "rc %d %s", rc, dg.n ? dg.msgs[0] : "");
	T_OK(s < 2.0, "deep-nesting-fast", "took %.2f s", s);
	wd_diag_free(&dg);
	free(y);
}

struct net_case {
	const char *text;
	int ok;
	const char *addr; /* inet_ntop of the 16-byte form */
	int prefix, port, resolve;
};

static const struct net_case nets[] = {
    {"1.2.3.4:443", 1, "::ffff:1.2.3.4", 128, 443, 0},
    {"127.0.0.1:*", 1, "::ffff:127.0.0.1", 128, 0, 0},
    {"10.0.0.0/8:443", 1, "::ffff:10.0.0.0", 104, 443, 0},
    {"0.0.0.0/0:53", 1, "::ffff:0.0.0.0", 96, 53, 0},
    {"192.168.1.0/24:1", 1, "::ffff:192.168.1.0", 120, 1, 0},
    {"[::1]:8080", 1, "::1", 128, 8080, 0},
    {"[fd00::/8]:443", 1, "fd00::", 8, 443, 0},
    {"[::/0]:*", 1, "::", 0, 0, 0},
    {"[::ffff:10.1.2.3]:80", 1, "::ffff:10.1.2.3", 128, 80, 0},
    {"[2001:db8::1]:65535", 1, "2001:db8::1", 128, 65535, 0},
    {"search-svc.internal:9200", 1, "::", 0, 9200, 1},
    {"localhost:*", 1, "::", 0, 0, 1},
    {"1.2.3.4:0", 0, NULL, 0, 0, 0},
    {"1.2.3.4:65536", 0, NULL, 0, 0, 0},
    {"1.2.3.4:-1", 0, NULL, 0, 0, 0},
    {"1.2.3.4:", 0, NULL, 0, 0, 0},
    {"1.2.3.4:44x", 0, NULL, 0, 0, 0},
    {"1.2.3.4", 0, NULL, 0, 0, 0},
    {"1.2.3.4/33:1", 0, NULL, 0, 0, 0},
    {"1.2.3.4/:1", 0, NULL, 0, 0, 0},
    {"1.2.3.4/x:1", 0, NULL, 0, 0, 0},
    {"1.2.3.4/24:1", 0, NULL, 0, 0, 0},
    {"[fd00::/129]:1", 0, NULL, 0, 0, 0},
    {"[fd00::1/8]:1", 0, NULL, 0, 0, 0},
    {"[::1]", 0, NULL, 0, 0, 0},
    {"[::1]8080", 0, NULL, 0, 0, 0},
    {"[1.2.3.4]:80", 0, NULL, 0, 0, 0},
    {"::1:80", 0, NULL, 0, 0, 0},
    {"256.0.0.1:80", 0, NULL, 0, 0, 0},
    {"1.2.3:80", 0, NULL, 0, 0, 0},
    {"host.example/8:80", 0, NULL, 0, 0, 0},
    {"-bad.example:80", 0, NULL, 0, 0, 0},
    {"a..b:80", 0, NULL, 0, 0, 0},
    {":80", 0, NULL, 0, 0, 0},
    {"", 0, NULL, 0, 0, 0},
};

static void test_net(void)
{
	for (size_t i = 0; i < WD_ARRAY_SIZE(nets); i++) {
		const struct net_case *c = &nets[i];
		struct wd_net_rule r;
		struct wd_err err = {0};
		char name[128], a[INET6_ADDRSTRLEN] = "";
		snprintf(name, sizeof(name), "net-rule '%s'", c->text);
		int rc = wd_net_rule_parse(c->text, &r, &err);
		if (!c->ok) {
			T_OK(rc == -EINVAL && err.msg[0], name,
			     "accepted (rc %d)", rc);
			continue;
		}
		inet_ntop(AF_INET6, r.addr, a, sizeof(a));
		T_OK(rc == 0 && !strcmp(a, c->addr) && r.prefix == c->prefix &&
			 r.port == c->port && r.needs_resolve == c->resolve &&
			 !strcmp(r.text, c->text),
		     name, "rc %d %s addr %s/%u port %u resolve %d", rc,
		     err.msg, a, r.prefix, r.port, r.needs_resolve);
	}
}

static void test_paths(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"/", "/"},
	    {"//", "/"},
	    {"/usr/./bin/../lib", "/usr/lib"},
	    {"/nonexistent-warden//x/./y/../z/", "/nonexistent-warden/x/z"},
	    {"/../..", "/"},
	    {"/tmp/nonexistent-warden/..", "/tmp"},
	};
	for (size_t i = 0; i < WD_ARRAY_SIZE(cases); i++) {
		char *out = NULL, name[128];
		snprintf(name, sizeof(name), "path '%s'", cases[i].in);
		int rc = wd_path_canonical(cases[i].in, &out, NULL);
		T_OK(rc == 0 && out && !strcmp(out, cases[i].out), name,
		     "rc %d -> '%s' want '%s'", rc, out ? out : "",
		     cases[i].out);
		free(out);
	}
	/* symlinks resolved: /lib -> /usr/lib on merged-usr, also for a
	 * path below it that does not exist yet */
	char lib[PATH_MAX], want[PATH_MAX + 32];
	char *out = NULL;
	if (realpath("/lib", lib)) {
		snprintf(want, sizeof(want), "%s/nonexistent-warden", lib);
		int rc =
		    wd_path_canonical("/lib/nonexistent-warden", &out, NULL);
		T_OK(rc == 0 && !strcmp(out, want), "path-symlink-prefix",
		     "'%s' want '%s'", out ? out : "", want);
		free(out);
	} else {
		T_SKIP("path-symlink-prefix", "no /lib on this system");
	}
	/* a symlink we create: resolution is real, not textual */
	char dir[] = "/tmp/wd-test-manifest.XXXXXX";
	if (mkdtemp(dir)) {
		char ln[PATH_MAX], in[PATH_MAX];
		snprintf(ln, sizeof(ln), "%s/link", dir);
		snprintf(in, sizeof(in), "%s/link/passwd", dir);
		if (symlink("/etc", ln) == 0) {
			int rc = wd_path_canonical(in, &out, NULL);
			T_OK(rc == 0 && !strcmp(out, "/etc/passwd"),
			     "path-own-symlink", "'%s'", out ? out : "");
			free(out);
			unlink(ln);
		}
		rmdir(dir);
	}
	struct wd_err err = {0};
	T_OK(wd_path_canonical("relative", &out, &err) == -EINVAL &&
		 strstr(err.msg, "not absolute"),
	     "path-relative", "%s", err.msg);
	char big[PATH_MAX + 10];
	memset(big, 'a', sizeof(big));
	big[0] = '/';
	big[sizeof(big) - 1] = 0;
	T_OK(wd_path_canonical(big, &out, NULL) == -ENAMETOOLONG,
	     "path-too-long", "accepted");
}

int main(void)
{
	test_shipped();
	test_all_fields();
	test_defaults_json_seed();
	test_bad();
	test_aliases();
	test_deep_nesting();
	test_net();
	test_paths();
	return T_DONE();
}
