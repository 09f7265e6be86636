/* YAML tags in policy files (see wd_y_check_tags in ywalk.h): an event
 * pass over the whole stream, so a tag is judged as written, %TAG
 * directives resolved, before any parser reads the values. */
#include "policy/ywalk.h"

#include <stdlib.h>
#include <string.h>

#define CORE_TAG "tag:yaml.org,2002:"

/* One tagged node (the event of a scalar, sequence or mapping). The
 * parsers read values by their form, never by their tag, so a tag is
 * allowed only where it says what the form already says: a tag that
 * would change a value's type (`!!str 5`, `!!int "5"`, `! 5`) or that
 * names anything else (`!!python/object`, `!foo`) is an error, not a
 * value read some other way than the file's author meant. */
static void tag_check(const char *file, const yaml_event_t *ev,
		      struct wd_diag *diag, int *nerr)
{
	const char *tag, *want = "str", *val = NULL;
	bool plain = false;
	if (ev->type == YAML_SCALAR_EVENT) {
		tag = (const char *)ev->data.scalar.tag;
		val = (const char *)ev->data.scalar.value;
		plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		if (plain)
			want = wd_y_plain_type(val);
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		tag = (const char *)ev->data.sequence_start.tag;
		want = "seq";
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		tag = (const char *)ev->data.mapping_start.tag;
		want = "map";
	} else {
		return;
	}
	if (!tag)
		return;
	int line = (int)ev->start_mark.line + 1,
	    col = (int)ev->start_mark.column + 1;
	if (!strcmp(tag, "!")) {
		/* non-specific: a plain scalar becomes a string */
		if (val && plain && strcmp(want, "str")) {
			wd_diag_add(diag, file, line, col,
				    "the tag '!' makes '%s' a string where it "
				    "reads as %s: quote it instead",
				    val, want);
			(*nerr)++;
		}
		return;
	}
	static const char *const core[] = {"str",  "int", "float", "bool",
					   "null", "seq", "map"};
	size_t pl = strlen(CORE_TAG);
	const char *name = !strncmp(tag, CORE_TAG, pl) ? tag + pl : NULL;
	bool known = false;
	for (size_t i = 0; name && i < WD_ARRAY_SIZE(core); i++)
		known = known || !strcmp(name, core[i]);
	if (!known) {
		wd_diag_add(diag, file, line, col,
			    "YAML tag '%s%s' is not allowed in a policy file "
			    "(only the core schema's !!str !!int !!float "
			    "!!bool !!null !!seq !!map)",
			    name ? "!!" : "", name ? name : tag);
		(*nerr)++;
		return;
	}
	bool ok = !strcmp(name, want) ||
		  (!strcmp(name, "float") && !strcmp(want, "int"));
	if (ok)
		return;
	if (val && !strcmp(name, "str"))
		wd_diag_add(diag, file, line, col,
			    "'!!str %s': warden reads '%s' by its form (%s "
			    "here), not by its tag: quote it instead",
			    val, val, want);
	else if (val && (!strcmp(name, "seq") || !strcmp(name, "map")))
		wd_diag_add(diag, file, line, col, "tag '!!%s' on a scalar",
			    name);
	else if (val)
		wd_diag_add(diag, file, line, col,
			    "tag '!!%s' on '%s', which reads as %s%s", name,
			    val, want, plain ? "" : " (quoted)");
	else
		wd_diag_add(diag, file, line, col, "tag '!!%s' on a %s", name,
			    !strcmp(want, "seq") ? "list" : "mapping");
	(*nerr)++;
}

int wd_y_check_tags(const char *file, const char *text, size_t len,
		    struct wd_diag *diag)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int nerr = 0;
	bool done = false;
	if (!yaml_parser_initialize(&p))
		abort();
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	/* a syntax error stops the walk: the loader reports it */
	while (!done && yaml_parser_parse(&p, &ev)) {
		tag_check(file, &ev, diag, &nerr);
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return nerr;
}
