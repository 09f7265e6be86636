/* A JSON Schema subset for tool arguments (DESIGN.md §4 args_schema):
 * type (string or array of strings), required, properties,
 * additionalProperties (bool or schema), enum, minimum/maximum,
 * exclusiveMinimum/exclusiveMaximum (numbers), minLength/maxLength,
 * items, minItems/maxItems, pattern (ECMA-262, the subset listed in
 * policy/schema_regex.h, unanchored as in JSON Schema), and the
 * annotations of policy/schema_rules.h. That table is the one list: a
 * keyword outside it is an error here and at load (policy check), never
 * ignored — a keyword accepted but not enforced would weaken the policy.
 *
 * The message is written for the model: it names the JSON path and what was
 * expected, so a model that hallucinated an argument shape can correct it.
 * It never quotes the argument's value (the rule's bounds come from the
 * schema): the message is recorded in the trace, the run's view and its
 * approvals, where a hash_only run keeps no value (the model has its own).
 */
#ifndef WD_SCHEMA_H
#define WD_SCHEMA_H

#include <jansson.h>

#include "common/util.h"

/* 0 when `inst` satisfies `schema`; -EINVAL with the first violation in err
 * ("$.recipients: expected at most 10 items, got 12"). A malformed schema is
 * reported as -EINVAL too, naming the keyword. */
int wd_schema_validate(const json_t *schema, const json_t *inst,
		       struct wd_err *err);

#endif
