#include "cli/cli.h"
#include "api/client.h"
#include "common/log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const struct wd_verb __start_wd_verbs[];
extern const struct wd_verb __stop_wd_verbs[];

bool wd_cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

static bool takes_value(const struct option *opts, const char *arg)
{
	const char *name = arg + 2;
	size_t n = strcspn(name, "=");
	if (name[n] == '=')
		return false;
	for (const struct option *o = opts; o && o->name; o++)
		if (strlen(o->name) == n && !strncmp(o->name, name, n))
			return o->has_arg == required_argument;
	return false;
}

int wd_cli_sub_first(int argc, char **argv, const struct option *opts)
{
	int i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (argv[i][0] != '-' || !argv[i][1])
			break;
		if (argv[i][1] == '-' && takes_value(opts, argv[i]))
			i++;
	}
	if (i >= argc)
		return 0;
	char *sub = argv[i];
	memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof(*argv));
	argv[1] = sub;
	return i;
}

const char *wd_cli_socket(const char *flag_value)
{
	if (flag_value)
		return flag_value;
	const char *e = getenv("WARDEN_SOCKET");
	return e && *e ? e : WD_DEFAULT_SOCKET;
}

json_t *wd_cli_api(const char *verb, const char *sock, const char *method,
		   const char *path, json_t *body, long want, long *status)
{
	struct wd_err err = {0};
	json_t *resp = NULL;
	long st = 0;
	int rc = wd_api_call(sock, method, path, body, &st, &resp, &err);
	if (status)
		*status = rc ? 0 : st;
	if (rc) {
		fprintf(stderr, "warden %s: %s\n", verb, err.msg);
		return NULL;
	}
	if (st != want) {
		fprintf(stderr, "warden %s: %s\n", verb,
			wd_api_error_text(resp, st));
		json_decref(resp);
		return NULL;
	}
	if (err.msg[0]) /* a partial answer says what it lacks */
		fprintf(stderr, "warden %s: %s\n", verb, err.msg);
	return resp;
}

void wd_cli_print_json(const json_t *j, size_t flags, const char *empty)
{
	char *s = j ? json_dumps(j, flags) : NULL;
	printf("%s\n", s ? s : empty);
	free(s);
}

static int cmp_verb(const void *a, const void *b)
{
	return strcmp(((const struct wd_verb *)a)->name,
		      ((const struct wd_verb *)b)->name);
}

static void usage(FILE *f)
{
	size_t n = __stop_wd_verbs - __start_wd_verbs;
	struct wd_verb *v = calloc(n, sizeof(*v));
	if (v && n)
		memcpy(v, __start_wd_verbs, n * sizeof(*v));
	if (v)
		qsort(v, n, sizeof(*v), cmp_verb);
	fprintf(f,
		"usage: warden [-v] VERB [ARGS...]   (warden VERB --help)\n\n"
		"verbs:\n");
	for (size_t i = 0; v && i < n; i++)
		fprintf(f, "  %-10s %s\n", v[i].name, v[i].summary);
	free(v);
}

int main(int argc, char **argv)
{
	wd_log_set_ident("warden");
	const char *lvl = getenv("WARDEN_LOG");
	static const char *const lvls[] = {[WD_LOG_ERROR] = "error",
					   [WD_LOG_WARN] = "warn",
					   [WD_LOG_INFO] = "info",
					   [WD_LOG_DEBUG] = "debug"};
	if (lvl && *lvl) {
		size_t i = 0;
		while (i < WD_ARRAY_SIZE(lvls) && strcasecmp(lvl, lvls[i]))
			i++;
		if (i < WD_ARRAY_SIZE(lvls))
			wd_log_set_level((enum wd_log_level)i);
		else
			fprintf(stderr,
				"warden: WARDEN_LOG='%s' is not error, warn, "
				"info or debug: the default level\n",
				lvl);
	}
	while (argc > 1 && !strcmp(argv[1], "-v")) {
		wd_log_set_level(WD_LOG_DEBUG);
		argv++;
		argc--;
	}
	wd_log_route_libbpf();
	if (argc < 2) {
		usage(stderr);
		return WD_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return WD_EXIT_OK;
	}
	for (const struct wd_verb *v = __start_wd_verbs; v < __stop_wd_verbs;
	     v++)
		if (!strcmp(v->name, argv[1]))
			return v->run(argc - 1, argv + 1);
	fprintf(stderr, "warden: unknown verb '%s'\n", argv[1]);
	usage(stderr);
	return WD_EXIT_USAGE;
}

static int verb_version(int argc, char **argv)
{
	if (wd_cli_wants_help(argc, argv)) {
		printf("usage: warden version\n");
		return WD_EXIT_OK;
	}
	printf("warden %s\n", WD_VERSION);
	return WD_EXIT_OK;
}
WD_VERB(version, "version", "print the version", verb_version);
