/* Internal to `warden status` (status.c builds the report, status_json.c
 * and status_text.c render it). */
#ifndef WD_CLI_STATUS_INT_H
#define WD_CLI_STATUS_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "enforce/lsm.h"
#include "enforce/probe.h"

/* ET(-errno): wd_status_etext() into a temporary buffer. */
#define ET(err) wd_status_etext((err), (char[96]){0}, 96)

/* The report: one row per manifest constraint (a cell per tier), one
 * watch per constraint `mode: audit` can or cannot watch. */
struct cell {
	bool ok;
	char *text; /* mechanism when ok, reason when not */
	char *note; /* a limitation or fallback worth knowing, may be NULL */
};

struct row {
	const char *constraint;
	struct cell t[3];
};

struct watch {
	const char *constraint;
	bool ok;
	char *text; /* mechanism, or reason it cannot be watched */
};

struct report {
	const struct wd_features *f;
	/* BPF LSM hooks as enforce/lsm.c loads them on this node */
	struct wd_lsm_hook_status hooks[WD_LSM_H_NR];
	int n_hooks;
	struct row rows[24];
	int n_rows;
	struct watch watch[24];
	int n_watch;
};

/* A mechanism named by `require:` and whether this node has it. */
struct mech {
	const char *name;
	bool ok;
	char why[256];
};

/* "EPERM (Operation not permitted)" for a -errno value, written into buf. */
const char *wd_status_etext(int err, char *buf, size_t len);
/* Fill m[] (5 entries) with each `require:` mechanism's state on this
 * node; returns how many. */
int wd_status_build_mechs(const struct report *r, struct mech *m);
/* The report as a new JSON object. */
json_t *wd_status_json_report(const struct report *r);
/* Print the report as text on stdout. */
void wd_status_text_report(const struct report *r);
/* wardend's model routes (status_routes.c): a new reference to the
 * model_routes array, or NULL with why (daemon not reachable, ...). */
json_t *wd_status_model_routes(char *why, size_t n);
void wd_status_model_routes_text(void);
/* wardend's fleet state (status_fleet.c): a new reference to /v1/status's
 * "fleet", or NULL with why (not in a fleet, daemon not reachable). */
json_t *wd_status_fleet(char *why, size_t n);
void wd_status_fleet_text(void);
/* The per-call uids warden no longer reuses (status_uids.c): a new
 * object {dir, lost, first_lost?, fix?} or {dir, error}. */
json_t *wd_status_uids(void);
void wd_status_uids_text(void);
/* Print t as the report's text: words wrapped at 78 columns, indented 2,
 * continuation lines 4 (status_routes.c). */
void wd_status_wrap(const char *t);

#endif
