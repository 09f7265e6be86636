/* Strict walking of a libyaml document, shared by the policy parsers
 * (tools, agents, users). Every check that fails adds one diagnostic
 * "file:line:col: message" pointing at the offending node and returns
 * -EINVAL; callers keep going so one pass reports several errors.
 *
 * Threats handled here rather than in each parser:
 *  - a typo'd key must never silently weaken a policy: unknown keys and
 *    duplicate keys are errors;
 *  - aliases can make a document a DAG or even a cycle (libyaml registers
 *    an anchor before its children are loaded), so every node visit is
 *    counted against a budget and recursion is depth-limited;
 *  - a double-quoted "\0" puts a NUL inside a scalar: such strings are
 *    rejected (a path "/etc\0..." must not become "/etc");
 *  - tags: the parsers read a value by its form, so a tag outside YAML's
 *    core schema (`!!python/object`, `!custom`) or one that would change
 *    a value's type is an error (wd_y_check_tags).
 */
#ifndef WD_POLICY_YWALK_H
#define WD_POLICY_YWALK_H

#include <stdbool.h>
#include <stdint.h>
#include <yaml.h>

#include "policy/manifest.h"

#define WD_Y_NODE_BUDGET 1000000
#define WD_Y_MAX_DEPTH	 64

struct wd_ywalk {
	yaml_document_t *doc;
	const char *file;
	struct wd_diag *diag;
	long budget; /* node visits left */
	bool budget_reported;
	int nerr; /* errors added through this walker */
};

/* Add a diagnostic at node n (n may be NULL: line/col of the document). */
void wd_y_err(struct wd_ywalk *w, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Count one visit; false (and one diagnostic) when the budget is spent. */
bool wd_y_visit(struct wd_ywalk *w, const yaml_node_t *n);
yaml_node_t *wd_y_get(struct wd_ywalk *w, int idx);

const char *wd_y_kind(const yaml_node_t *n); /* "a mapping", ... */
bool wd_y_is_null(const yaml_node_t *n);
/* The scalar's text if n is a scalar without embedded NUL, else NULL. */
const char *wd_y_scalar(const yaml_node_t *n);

/* Typed readers. `what` names the field in messages ("'timeout_ms'"). */
int wd_y_str(struct wd_ywalk *w, yaml_node_t *n, const char *what, char **out);
int wd_y_uint(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	      uint64_t min, uint64_t max, uint64_t *out);
int wd_y_double(struct wd_ywalk *w, yaml_node_t *n, const char *what,
		double min_excl, double max, double *out);
int wd_y_bool(struct wd_ywalk *w, yaml_node_t *n, const char *what, bool *out);
/* One of a fixed set of words; returns the index in `words`. */
int wd_y_enum(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	      const char *const *words, int nwords, int *out);
/* A sequence of strings. *out is NULL-terminated (n entries). If `check` is
 * given it is called per item and may reject it (adding a diagnostic). */
typedef int (*wd_y_item_check)(struct wd_ywalk *w, yaml_node_t *item,
			       const char *s, void *arg);
int wd_y_strlist(struct wd_ywalk *w, yaml_node_t *n, const char *what,
		 char ***out, int *nout, wd_y_item_check check, void *arg);
void wd_y_strv_free(char **v, int n);

/* Levenshtein distance of two words (99 past 40 bytes), for "did you
 * mean" hints on unknown keys and names. */
int wd_y_edit_distance(const char *a, const char *b);

/* A mapping with a fixed set of keys. Each key's handler gets the value
 * node and `obj`. Unknown keys, duplicate keys and missing required keys
 * are errors. Returns 0 or -EINVAL. */
struct wd_y_key {
	const char *name;
	int (*fn)(struct wd_ywalk *w, yaml_node_t *val, void *obj);
	bool required;
};
int wd_y_map(struct wd_ywalk *w, yaml_node_t *n, const char *what,
	     const struct wd_y_key *keys, size_t nkeys, void *obj);

/* Convert a node to JSON (YAML 1.2 core schema for plain scalars).
 * NULL + a diagnostic on failure. */
struct json_t;
struct json_t *wd_y_to_json(struct wd_ywalk *w, yaml_node_t *n, int depth);

/* Parse every document of `text`; call fn(w, root, arg) for each non-empty
 * one. YAML syntax errors become diagnostics. Returns the number of
 * documents seen (>= 0) or -EINVAL if any diagnostic was added. */
typedef void (*wd_y_doc_fn)(struct wd_ywalk *w, yaml_node_t *root, void *arg);
int wd_y_load(const char *file, const char *text, size_t len,
	      struct wd_diag *diag, wd_y_doc_fn fn, void *arg);
/* How a plain scalar reads (YAML 1.2 core schema, as wd_y_to_json):
 * "null", "bool", "int", "float" or "str". */
const char *wd_y_plain_type(const char *v);
/* YAML tags in every document of `text`: the core schema's (!!str !!int
 * !!float !!bool !!null !!seq !!map) where they agree with the value's
 * form, and the non-specific ones; anything else is a diagnostic.
 * wd_y_load() runs it; a parser loading YAML itself must too. Returns the
 * number of diagnostics added. */
int wd_y_check_tags(const char *file, const char *text, size_t len,
		    struct wd_diag *diag);
/* wd_y_load for a policy file: 0, or -EINVAL when the stream had no
 * document (diag gets `none`) or anything was reported (diag may be NULL:
 * the messages are then dropped). */
int wd_y_load_docs(const char *file, const char *text, size_t len,
		   const char *none, struct wd_diag *diag, wd_y_doc_fn fn,
		   void *arg);
/* A policy file's text (free it), or -errno with "cannot read" in diag. */
int wd_y_read_path(const char *path, char **text, size_t *len,
		   struct wd_diag *diag);

/* Name syntax shared by tools, agents, teams, users, groups:
 * [a-z0-9_-]{1,64}. */
bool wd_y_valid_name(const char *s);
int wd_y_name(struct wd_ywalk *w, yaml_node_t *n, const char *what, char **out);

/* A mapping of named entries {name: value}: `what` names the mapping and
 * `shape` shows its form in the error when it is something else. Each key
 * must be a valid `item` name ("user" -> "user name") not seen before
 * (seen(ctx, name)); then add(w, key, name, value, ctx) takes name. Goes on
 * past a bad entry so every error is reported; -EINVAL if any. */
struct wd_y_named {
	const char *what, *shape, *item;
	bool (*seen)(void *ctx, const char *name);
	int (*add)(struct wd_ywalk *w, yaml_node_t *k, char *name,
		   yaml_node_t *v, void *ctx);
};
int wd_y_each_named(struct wd_ywalk *w, yaml_node_t *map,
		    const struct wd_y_named *spec, void *ctx);

#endif
