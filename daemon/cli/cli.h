/* The warden CLI is a table of verbs, one file per verb. A verb file
 * registers itself with WD_VERB(); main.c finds the table through the
 * linker section, so adding a verb touches no shared file.
 *
 * A verb returns the process exit code: 0 ok, 1 failed, 2 usage
 * (DESIGN.md §4); `warden exec` returns the command's own exit code.
 */
#ifndef WD_CLI_H
#define WD_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* `warden run` also: 3 the answer was cut at max_tokens (run_end status
 * truncated), 4 the model refused (refused), 5 the conversation did not
 * fit the model's context window (context_exceeded). */
enum {
	WD_EXIT_OK = 0,
	WD_EXIT_FAIL = 1,
	WD_EXIT_USAGE = 2,
	WD_EXIT_TRUNCATED = 3,
	WD_EXIT_REFUSED = 4,
	WD_EXIT_CONTEXT = 5,
};
int wd_cli_run_exit(const char *status); /* run_end status -> exit code */
/* Follow a run queued in the fleet (run_fleet.c) until it ended or was
 * interrupted; prints where it ran and how it ended; the exit code. */
int wd_cli_run_follow_fleet(const char *sock, const char *run_id, bool json);

struct wd_verb {
	const char *name;
	const char *summary;		   /* one line for `warden --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the verb name */
};

#define WD_VERB(ident, vname, vsummary, vrun)                                  \
	static const struct wd_verb wd_verb_##ident                            \
	    __attribute__((used, section("wd_verbs"), aligned(8))) = {         \
		.name = vname, .summary = vsummary, .run = vrun}

struct option;
/* GNU style for a verb with subcommands (`warden trace --state D show
 * RUN`): moves the first argument that is not an option (nor an option's
 * value, per opts: long options with required_argument take the next
 * argument unless written --name=value) to argv[1], in place, so the
 * subcommand can be read there and every option parsed by the
 * subcommand's permuting getopt_long. Returns its old index, or 0 if there
 * is none. A `--` ends the options: the argument after it is the
 * subcommand. */
int wd_cli_sub_first(int argc, char **argv, const struct option *opts);
/* True if argv has -h/--help before "--". */
bool wd_cli_wants_help(int argc, char **argv);
/* The daemon socket: --socket value, else $WARDEN_SOCKET, else default. */
const char *wd_cli_socket(const char *flag_value);

struct json_t;
/* One request to wardend (body may be NULL; not consumed). The response,
 * or NULL after "warden VERB: why" on stderr when the request failed or
 * the status is not `want`; *status (may be NULL) gets the status, 0 if
 * there was none. */
struct json_t *wd_cli_api(const char *verb, const char *sock,
			  const char *method, const char *path,
			  struct json_t *body, long want, long *status);
/* JSON on stdout, one line (or indented) and a newline; `empty` if j is
 * NULL or cannot be printed. */
void wd_cli_print_json(const struct json_t *j, size_t flags, const char *empty);

/* One trace record as a `warden run` / `warden replay` step line. */
void wd_cli_print_step(const struct json_t *r);

#define WD_VERSION	  "0.1.0"
#define WD_DEFAULT_SOCKET "/run/warden/wardend.sock"

/* warden fleet verify [RUN] | gc [--metadata-days N] (fleet_trace.c),
 * after verb_fleet parsed the options: sub is "verify" or "gc". */
int wd_cli_fleet_trace(const char *sock, const char *sub, const char *run,
		       const char *days, bool json);
/* `warden trace gc|verify --fleet ...` (argv from "trace"): the same;
 * asked: is this such a command line? */
bool wd_cli_trace_fleet_asked(int argc, char **argv, const char *sub);
int wd_cli_trace_fleet(int argc, char **argv, const char *sub);

#endif
