/* How an `input: argv` tool's arguments become its command line (after
 * the manifest's exec). The program parses its argv, so a value the model
 * chose must never be read as something else:
 *   - with an `argv` template, each element is copied with its
 *     {property} placeholders filled; a placeholder that is a whole
 *     element and holds a list becomes one element per item; an element
 *     whose property is absent is dropped;
 *   - without one, "--" and then the values in the schema's property
 *     order (the manifest file's order, never the model's JSON key order);
 *   - a key that is not a schema property is refused, whatever
 *     additionalProperties says (nothing could place it safely);
 *   - a value whose text starts with '-' is refused unless its property
 *     says x-warden-allow-dash: true (`find DIR` reads "-delete" as an
 *     action even after "--");
 *   - strings as they are, integers in decimal, other numbers in the
 *     shortest form that reads back the same, booleans as true/false;
 *     null, objects and lists of lists are refused.
 * A refusal is a schema error for the model (the broker's check 3); like
 * wd_schema_validate's, its message names the property and the rule, never
 * the value.
 */
#ifndef WD_BROKER_ARGV_H
#define WD_BROKER_ARGV_H

#include <jansson.h>

#include "common/util.h"
#include "policy/manifest.h"

/* 0 with *out a NULL-terminated argv (exec first; free each and the
 * array), or -EINVAL with a message for the model in err (JSON path
 * first, like wd_schema_validate's). */
int wd_argv_build(const struct wd_manifest *m, const json_t *args, char ***out,
		  struct wd_err *err);

#endif
