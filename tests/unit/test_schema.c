/* The args_schema validator: each keyword of the subset accepts what it
 * should, rejects what it should, and names the path in its message. */
#include "broker/schema.h"
#include "t.h"

static int check(const char *schema, const char *inst, struct wd_err *err)
{
	json_error_t je;
	json_t *s = json_loads(schema, JSON_DECODE_ANY, &je);
	json_t *i = json_loads(inst, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!s || !i) {
		printf("bad test json: %s / %s\n", schema, inst);
		return -999;
	}
	memset(err, 0, sizeof(*err));
	int rc = wd_schema_validate(s, i, err);
	json_decref(s);
	json_decref(i);
	return rc;
}

#define OK(name, s, i)                                                         \
	do {                                                                   \
		struct wd_err e;                                               \
		int rc = check(s, i, &e);                                      \
		T_OK(rc == 0, name, "rc=%d: %s", rc, e.msg);                   \
	} while (0)
#define BAD(name, s, i, msgre)                                                 \
	do {                                                                   \
		struct wd_err e;                                               \
		int rc = check(s, i, &e);                                      \
		T_OK(rc == -EINVAL && strstr(e.msg, msgre), name,              \
		     "rc=%d msg='%s' want '%s'", rc, e.msg, msgre);            \
	} while (0)

int main(void)
{
	const char *py = "{\"type\":\"object\",\"required\":[\"code\"],"
			 "\"properties\":{\"code\":{\"type\":\"string\","
			 "\"maxLength\":10}},\"additionalProperties\":false}";
	OK("schema/object-ok", py, "{\"code\":\"print(1)\"}");
	BAD("schema/required", py, "{}", "missing required property 'code'");
	BAD("schema/type", py, "{\"code\":5}", "$.code: expected string");
	BAD("schema/maxLength", py, "{\"code\":\"01234567890\"}",
	    "$.code: string of 11 characters is longer than maxLength 10");
	BAD("schema/additionalProperties-false", py,
	    "{\"code\":\"x\",\"shell\":true}", "unexpected property 'shell'");
	OK("schema/maxLength-utf8", py,
	   "{\"code\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
	   "\\u00e9\\u00e9\\u00e9\"}");
	BAD("schema/top-type", py, "[1]", "$: expected object, got array");

	const char *n = "{\"type\":\"integer\",\"minimum\":1,\"maximum\":10}";
	OK("schema/integer-ok", n, "3");
	OK("schema/integer-real-whole", n, "3.0");
	BAD("schema/integer-real", n, "3.5", "expected integer");
	BAD("schema/minimum", n, "0", "less than minimum 1");
	BAD("schema/maximum", n, "11", "greater than maximum 10");
	BAD("schema/exclusiveMaximum", "{\"exclusiveMaximum\":5}", "5",
	    "must be less than 5");
	OK("schema/number-accepts-int", "{\"type\":\"number\"}", "5");

	const char *en = "{\"enum\":[\"a\",\"b\",2]}";
	OK("schema/enum-ok", en, "\"b\"");
	OK("schema/enum-num", en, "2.0");
	BAD("schema/enum-bad", en, "\"c\"", "must be one of [\"a\",\"b\",2]");

	const char *arr = "{\"type\":\"object\",\"properties\":{\"to\":{"
			  "\"type\":\"array\",\"maxItems\":2,\"items\":{"
			  "\"type\":\"string\",\"pattern\":\"^[^@]+@[a-z.]+$\""
			  ",\"minLength\":3}}}}";
	OK("schema/items-ok", arr, "{\"to\":[\"a@x.org\"]}");
	BAD("schema/items-pattern", arr, "{\"to\":[\"a@x.org\",\"nope\"]}",
	    "$.to[1]: string does not match pattern");
	BAD("schema/maxItems", arr, "{\"to\":[\"a@b.c\",\"a@b.c\",\"a@b.c\"]}",
	    "$.to: expected at most 2 items, got 3");
	BAD("schema/items-minLength", arr, "{\"to\":[\"\"]}",
	    "shorter than minLength 3");
	OK("schema/pattern-unanchored", "{\"pattern\":\"b\"}", "\"abc\"");
	BAD("schema/pattern-embedded-nul", "{\"pattern\":\"^a$\"}",
	    "\"a\\u0000b\"", "does not match");

	OK("schema/type-array", "{\"type\":[\"string\",\"null\"]}", "null");
	BAD("schema/type-array-bad", "{\"type\":[\"string\",\"null\"]}", "1",
	    "expected one of");
	BAD("schema/addl-schema",
	    "{\"additionalProperties\":{\"type\":"
	    "\"integer\"}}",
	    "{\"x\":\"s\"}", "$.x: expected integer");
	BAD("schema/malformed-required", "{\"required\":\"x\"}", "{}",
	    "'required' is not an array");
	BAD("schema/malformed-pattern", "{\"pattern\":\"(\"}", "\"x\"",
	    "unclosed '('");
	OK("schema/true", "true", "{\"anything\":1}");

	/* deep nesting cannot blow the stack */
	struct wd_buf b = {0}, v = {0};
	for (int i = 0; i < 100; i++) {
		wd_buf_printf(&b, "{\"items\":");
		wd_buf_printf(&v, "[");
	}
	wd_buf_printf(&b, "{}");
	wd_buf_printf(&v, "1");
	for (int i = 0; i < 100; i++) {
		wd_buf_printf(&b, "}");
		wd_buf_printf(&v, "]");
	}
	BAD("schema/depth-limit", b.data, v.data, "nested too deeply");
	wd_buf_free(&b);
	wd_buf_free(&v);
	return T_DONE();
}
