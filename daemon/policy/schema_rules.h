/* The one table of args_schema keywords: what the validator
 * (broker/schema.c) enforces, and the load-time check that refuses
 * anything else (a keyword accepted but not enforced, or a typo'd type,
 * is a policy that reads stricter than it is).
 *
 *   assertions   type required properties additionalProperties enum
 *                minimum maximum exclusiveMinimum exclusiveMaximum
 *                minLength maxLength pattern items minItems maxItems
 *   annotations  title description $comment default examples (they
 *                constrain nothing, so accepting them weakens nothing)
 *   warden       x-warden-allow-dash: true on a property of an
 *                `input: argv` tool: its values may start with '-'
 *                (otherwise refused: a value like "-delete" would be read
 *                as an option by the program; see broker/argv.c)
 */
#ifndef WD_SCHEMA_RULES_H
#define WD_SCHEMA_RULES_H

#include <jansson.h>
#include <stdbool.h>

#define WD_SCHEMA_ALLOW_DASH "x-warden-allow-dash"

enum wd_schema_kw_kind {
	WD_KW_TYPE,
	WD_KW_ENUM,
	WD_KW_NUMBER,
	WD_KW_COUNT, /* a non-negative integer */
	WD_KW_PATTERN,
	WD_KW_REQUIRED,
	WD_KW_PROPERTIES,
	WD_KW_ADDITIONAL,
	WD_KW_ITEMS,
	WD_KW_TEXT,	/* annotation: a string */
	WD_KW_ANY,	/* annotation: any value */
	WD_KW_EXAMPLES, /* annotation: a list */
	WD_KW_DASH,	/* x-warden-allow-dash */
};

struct wd_schema_kw {
	const char *name;
	enum wd_schema_kw_kind kind;
};

/* The keyword's entry, or NULL when warden does not implement it. */
const struct wd_schema_kw *wd_schema_kw_find(const char *name);

/* A JSON Schema type name warden knows (string number integer boolean
 * object array null)? */
bool wd_schema_type_known(const char *t);

/* A problem in a schema, located by its path from the root: keys and
 * array indices (decimal) in `path[0..depth)`. at_key: the problem is the
 * last key itself (an unknown keyword), not its value. */
typedef void (*wd_schema_report)(void *arg, const char *const *path, int depth,
				 bool at_key, const char *msg);

/* Check a whole args_schema (every subschema, reached or not). argv: the
 * tool takes `input: argv` (x-warden-allow-dash is allowed on its
 * top-level properties, and nowhere else). Returns the number of problems
 * reported. */
int wd_schema_check(const json_t *schema, bool argv, wd_schema_report fn,
		    void *arg);

#endif
