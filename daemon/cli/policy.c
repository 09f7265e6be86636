/* warden policy check [--json] PATH...
 *
 * Validates policy files with the daemon's own parsers: tool manifests,
 * agent definitions (files under an agents/ directory), users.yaml,
 * gateway.yaml and daemon.yaml. A directory is checked recursively (*.yaml,
 * *.yml, *.json; a directory named monitoring/ is skipped: Prometheus rules
 * and dashboards, checked by promtool). When a directory holds tools/ and
 * agents/, references across files are checked too: every tool an agent lists
 * must exist, tool and agent names must be unique, an agent's model must exist
 * in gateway.yaml, and every sub-agent an agent lists must exist without a
 * delegation cycle. Errors go to stderr as "file:line:col: message"; exit 0 ok,
 * 1 errors, 2 usage.
 *
 * warden policy show FILE: a tool manifest as loaded, as JSON.
 */
#include "cli/cli.h"
#include "common/log.h"
#include "policy/agent.h"
#include "policy/daemon_config.h"
#include "policy/gateway_config.h"
#include "policy/manifest.h"
#include "policy/users.h"

#include <dirent.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

enum kind { K_TOOL, K_AGENT, K_USERS, K_GATEWAY, K_DAEMON };

/* Everything parsed under one root argument, for the cross-file checks. */
struct tree {
	struct wd_manifest **tools;
	int n_tools;
	char **failed_tool_files; /* basenames of tool files that failed */
	int n_failed_tools;
	struct wd_agent **agents;
	int n_agents;
	struct wd_gateway_config *gateway;
	bool gateway_failed;
};

struct ctx {
	struct wd_diag diag;
	int files;
	const char *root; /* directory argument being walked, or NULL */
	struct tree *tree;
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool has_ext(const char *name)
{
	size_t n = strlen(name);
	return (n > 5 && !strcmp(name + n - 5, ".yaml")) ||
	       (n > 4 && !strcmp(name + n - 4, ".yml")) ||
	       (n > 5 && !strcmp(name + n - 5, ".json"));
}

static bool stem_is(const char *path, const char *stem)
{
	const char *b = base_name(path);
	size_t n = strlen(stem);
	return !strncmp(b, stem, n) && b[n] == '.' && has_ext(b);
}

/* An agent definition lives in a directory named "agents". */
static enum kind classify(const char *path)
{
	if (stem_is(path, "users"))
		return K_USERS;
	if (stem_is(path, "gateway"))
		return K_GATEWAY;
	if (stem_is(path, "daemon"))
		return K_DAEMON;
	const char *b = base_name(path);
	if (b - path >= 7 && !strncmp(b - 7, "agents/", 7) &&
	    (b - path == 7 || b[-8] == '/'))
		return K_AGENT;
	return K_TOOL;
}

/* gateway_config reports "file:line:col: message" lines in one string. */
static void add_gateway_errors(struct wd_diag *d, const char *path,
			       const char *msg)
{
	size_t pl = strlen(path);
	char *copy = wd_strdup(msg), *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		int ln = 0, col = 0, off = 0;
		if (!strncmp(line, path, pl) && line[pl] == ':' &&
		    sscanf(line + pl + 1, "%d:%d: %n", &ln, &col, &off) == 2 &&
		    off > 0)
			wd_diag_add(d, path, ln, col, "%s",
				    line + pl + 1 + off);
		else if (!strncmp(line, path, pl) && line[pl] == ':')
			wd_diag_add(d, path, 0, 0, "%s",
				    line + pl + 1 + (line[pl + 1] == ' '));
		else
			wd_diag_add(d, path, 0, 0, "%s", line);
	}
	free(copy);
}

static void check_file(struct ctx *c, const char *path)
{
	struct tree *t = c->tree;
	c->files++;
	switch (classify(path)) {
	case K_TOOL: {
		struct wd_manifest **v = NULL;
		int n = 0;
		if (wd_manifest_load_all(path, &v, &n, &c->diag) < 0) {
			if (t) {
				t->failed_tool_files =
				    wd_realloc(t->failed_tool_files,
					       (size_t)(t->n_failed_tools + 1) *
						   sizeof(char *));
				t->failed_tool_files[t->n_failed_tools++] =
				    wd_strdup(base_name(path));
			}
			return;
		}
		if (!t) {
			wd_manifest_free_all(v, n);
			return;
		}
		t->tools = wd_realloc(t->tools, (size_t)(t->n_tools + n) *
						    sizeof(*t->tools));
		memcpy(t->tools + t->n_tools, v, (size_t)n * sizeof(*v));
		t->n_tools += n;
		free(v);
		return;
	}
	case K_AGENT: {
		char *text = NULL;
		size_t len = 0;
		int rc = wd_read_file(path, &text, &len);
		if (rc < 0) {
			wd_diag_add(&c->diag, path, 0, 0, "cannot read: %s",
				    strerror(-rc));
			return;
		}
		struct wd_agent **v = NULL;
		int n = 0;
		rc = wd_agent_load_all_str(path, text, len, &v, &n, &c->diag);
		free(text);
		if (rc < 0)
			return;
		if (!t) {
			wd_agent_free_all(v, n);
			return;
		}
		t->agents = wd_realloc(t->agents, (size_t)(t->n_agents + n) *
						      sizeof(*t->agents));
		memcpy(t->agents + t->n_agents, v, (size_t)n * sizeof(*v));
		t->n_agents += n;
		free(v);
		return;
	}
	case K_DAEMON: {
		struct wd_daemon_config *dc = NULL;
		if (wd_daemon_config_load_file(path, &dc, &c->diag) == 0)
			wd_daemon_config_free(dc);
		return;
	}
	case K_USERS: {
		struct wd_users *u = NULL;
		if (wd_users_load_file(path, &u, &c->diag) == 0)
			wd_users_free(u);
		return;
	}
	case K_GATEWAY: {
		struct wd_gateway_config *g = NULL;
		struct wd_err err = {0};
		int rc = wd_gateway_config_load_file(path, &g, &err);
		if (rc < 0) {
			add_gateway_errors(&c->diag, path,
					   err.msg[0] ? err.msg
						      : strerror(-rc));
			if (t)
				t->gateway_failed = true;
			return;
		}
		/* only the top-level gateway.yaml of a tree is its config */
		if (t && !t->gateway && c->root &&
		    !strcmp(base_name(path), path + strlen(c->root) + 1))
			t->gateway = g;
		else
			wd_gateway_config_free(g);
		return;
	}
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Walk a directory in sorted order (stable output), skipping dot files. */
static void walk(struct ctx *c, const char *dir, int depth)
{
	if (depth > 32) {
		wd_diag_add(&c->diag, dir, 0, 0, "directory tree too deep");
		return;
	}
	DIR *d = opendir(dir);
	if (!d) {
		wd_diag_add(&c->diag, dir, 0, 0, "cannot open: %s",
			    strerror(errno));
		return;
	}
	char **names = NULL;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		names = wd_realloc(names, (size_t)(n + 1) * sizeof(*names));
		names[n++] = wd_strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, (size_t)n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		char *p = wd_asprintf("%s/%s", dir, names[i]);
		struct stat st;
		/* stat, not lstat: a symlinked policy file is checked; a
		 * symlink loop ends at the depth limit */
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			/* Prometheus rules and Grafana dashboards shipped
			 * next to the policy (policy/monitoring/): not warden
			 * policy, checked by promtool and their own test */
			if (strcmp(names[i], "monitoring"))
				walk(c, p, depth + 1);
		} else if (stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
			   has_ext(names[i]))
			check_file(c, p);
		free(p);
		free(names[i]);
	}
	free(names);
}

static bool tool_known(const struct tree *t, const char *name)
{
	for (int i = 0; i < t->n_tools; i++)
		if (!strcmp(t->tools[i]->name, name))
			return true;
	/* a tool whose file failed to parse is already reported */
	for (int i = 0; i < t->n_failed_tools; i++)
		if (!strncmp(t->failed_tool_files[i], name, strlen(name)) &&
		    t->failed_tool_files[i][strlen(name)] == '.')
			return true;
	return false;
}

static void cross_check(struct ctx *c, const char *root)
{
	struct tree *t = c->tree;
	/* sub-agents: defined, no cycle, bounded delegation depth */
	wd_agents_check_subagents(t->agents, t->n_agents, &c->diag);
	wd_agents_check_resume(t->agents, t->n_agents, t->tools, t->n_tools,
			       &c->diag);
	for (int i = 0; i < t->n_tools; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(t->tools[i]->name, t->tools[j]->name))
				wd_diag_add(&c->diag, t->tools[i]->source,
					    t->tools[i]->line, 1,
					    "tool '%s' is also defined in %s",
					    t->tools[i]->name,
					    t->tools[j]->source);
	for (int i = 0; i < t->n_agents; i++) {
		struct wd_agent *a = t->agents[i];
		for (int j = 0; j < i; j++)
			if (!strcmp(a->name, t->agents[j]->name))
				wd_diag_add(&c->diag, a->source, a->line, 1,
					    "agent '%s' is also defined in %s",
					    a->name, t->agents[j]->source);
		for (int k = 0; k < a->n_tools; k++)
			if (!tool_known(t, a->tools[k]))
				wd_diag_add(&c->diag, a->source,
					    a->tool_line[k], a->tool_col[k],
					    "agent '%s': no tool '%s' in "
					    "%s/tools",
					    a->name, a->tools[k], root);
		if (t->gateway) {
			const char *slash = strchr(a->model, '/');
			bool ok;
			if (slash) {
				char prov[160];
				snprintf(prov, sizeof(prov), "%.*s",
					 (int)(slash - a->model), a->model);
				ok = wd_gateway_config_provider(t->gateway,
								prov) >= 0;
			} else {
				ok = wd_gateway_config_alias(t->gateway,
							     a->model) != NULL;
			}
			if (!ok)
				wd_diag_add(&c->diag, a->source, a->model_line,
					    a->model_col,
					    "agent '%s': model '%s' is not an "
					    "alias or provider in "
					    "%s/gateway.yaml",
					    a->name, a->model, root);
			char why[400];
			if (ok && wd_route_check_params(t->gateway, a->model,
							a->temperature, why,
							sizeof(why)))
				wd_diag_add(&c->diag, a->source,
					    a->temperature_line,
					    a->temperature_col,
					    "agent '%s': %s", a->name, why);
		}
	}
}

static void tree_free(struct tree *t)
{
	wd_manifest_free_all(t->tools, t->n_tools);
	wd_agent_free_all(t->agents, t->n_agents);
	for (int i = 0; i < t->n_failed_tools; i++)
		free(t->failed_tool_files[i]);
	free(t->failed_tool_files);
	wd_gateway_config_free(t->gateway);
	*t = (struct tree){0};
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void check_path(struct ctx *c, const char *arg)
{
	struct stat st;
	if (stat(arg, &st) < 0) {
		wd_diag_add(&c->diag, arg, 0, 0, "%s", strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		check_file(c, arg);
		return;
	}
	/* strip trailing slashes so messages read "dir/tools/x.yaml" */
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s", arg);
	for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--)
		root[l - 1] = 0;
	char *tools = wd_asprintf("%s/tools", root);
	char *agents = wd_asprintf("%s/agents", root);
	struct tree t = {0};
	bool cross = is_dir(tools) && is_dir(agents);
	free(tools);
	free(agents);
	c->root = root;
	c->tree = cross ? &t : NULL;
	walk(c, root, 0);
	if (cross)
		cross_check(c, root);
	c->tree = NULL;
	c->root = NULL;
	tree_free(&t);
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: warden policy check [--json] PATH...\n"
	       "\n"
	       "Validate policy files: tool manifests, agent definitions\n"
	       "(files under agents/), users.yaml, gateway.yaml and\n"
	       "daemon.yaml. A PATH\n"
	       "may be a directory: every *.yaml, *.yml and *.json under it\n"
	       "is checked; if it holds tools/ and agents/, every tool an\n"
	       "agent lists must exist, every agent's model must be in\n"
	       "its gateway.yaml, and every sub-agent an agent lists must\n"
	       "exist, with no delegation cycle and at most 4 levels deep.\n"
	       "\n"
	       "Errors are printed as file:line:col: message on stderr.\n"
	       "  --json   print {ok, files, errors[{file,line,col,message}]}\n"
	       "           on stdout instead\n"
	       "Exit: 0 valid, 1 errors found, 2 usage.\n");
}

static int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool json = false;
	int o;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return WD_EXIT_OK;
		default:
			fprintf(stderr,
				"warden policy check: unknown option '%s'\n",
				argv[optind - 1]);
			usage(stderr);
			return WD_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "warden policy check: no PATH given\n");
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	struct ctx c = {0};
	for (int i = optind; i < argc; i++)
		check_path(&c, argv[i]);
	bool ok = c.diag.n == 0 && c.diag.dropped == 0;
	if (json) {
		json_t *errs = json_array();
		for (int i = 0; i < c.diag.n; i++) {
			struct wd_diag_item *it = &c.diag.items[i];
			json_array_append_new(
			    errs, json_pack("{s:s, s:i, s:i, s:s}", "file",
					    it->file, "line", it->line, "col",
					    it->col, "message", it->msg));
		}
		json_t *r = json_pack("{s:b, s:i, s:o, s:i}", "ok", ok, "files",
				      c.files, "errors", errs, "dropped",
				      c.diag.dropped);
		json_dumpf(r, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(r);
	} else {
		for (int i = 0; i < c.diag.n; i++)
			fprintf(stderr, "%s\n", c.diag.msgs[i]);
		if (c.diag.dropped)
			fprintf(stderr, "... and %d more errors\n",
				c.diag.dropped);
		if (ok)
			printf("ok: %d file%s\n", c.files,
			       c.files == 1 ? "" : "s");
		else
			fprintf(stderr, "%d error%s in %d file%s checked\n",
				c.diag.n + c.diag.dropped,
				c.diag.n + c.diag.dropped == 1 ? "" : "s",
				c.files, c.files == 1 ? "" : "s");
	}
	wd_diag_free(&c.diag);
	return ok ? WD_EXIT_OK : WD_EXIT_FAIL;
}

/* warden policy show FILE: the tool manifest as the sandbox will see it
 * (canonical paths, parsed network rules, defaults filled in), as JSON. */
static int cmd_show(int argc, char **argv)
{
	if (argc == 2 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: warden policy show FILE\n"
		       "Print a tool manifest as loaded (canonical paths, "
		       "defaults) as JSON;\n"
		       "an array if the file holds several documents.\n");
		return WD_EXIT_OK;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: warden policy show FILE\n");
		return WD_EXIT_USAGE;
	}
	struct wd_manifest **v = NULL;
	int n = 0;
	struct wd_diag d = {0};
	if (wd_manifest_load_all(argv[1], &v, &n, &d) < 0) {
		for (int i = 0; i < d.n; i++)
			fprintf(stderr, "%s\n", d.msgs[i]);
		wd_diag_free(&d);
		return WD_EXIT_FAIL;
	}
	json_t *out = n == 1 ? wd_manifest_to_json(v[0]) : json_array();
	for (int i = 0; n > 1 && i < n; i++)
		json_array_append_new(out, wd_manifest_to_json(v[i]));
	json_dumpf(out, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
	json_decref(out);
	wd_manifest_free_all(v, n);
	return WD_EXIT_OK;
}

int wd_cli_policy_reload(int argc, char **argv); /* policy_reload.c */

static int cmd_policy(int argc, char **argv)
{
	/* every option of check, show and reload, for finding the
	 * subcommand among them */
	static const struct option all[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	wd_cli_sub_first(argc, argv, all);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? WD_EXIT_USAGE : WD_EXIT_OK;
	}
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "show"))
		return cmd_show(argc - 1, argv + 1);
	if (!strcmp(argv[1], "reload"))
		return wd_cli_policy_reload(argc - 1, argv + 1);
	fprintf(stderr, "warden policy: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return WD_EXIT_USAGE;
}

WD_VERB(policy, "policy",
	"validate policy files (policy check PATH...), show a manifest",
	cmd_policy);
