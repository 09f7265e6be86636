/* Policy strictness: args_schema types and keywords the validator does not
 * implement, YAML tags outside the core schema, and `pattern` read as
 * ECMA-262 (not POSIX) — each an error at file:line:col at load, and the
 * validator matching patterns the way JSON Schema means them. Uses only
 * the loader and the validator, so the old build (which ignored unknown
 * keywords and tags and matched POSIX) fails here. */
#include "broker/schema.h"
#include "policy/manifest.h"
#include "t.h"

#define HEAD "name: t\ntier: 1\nexec: [/usr/bin/cat]\nside_effects: none\n"

/* Load HEAD + body; expect failure with a diagnostic starting with want
 * ("t.yaml:L:C: ..."), or success when want is NULL. */
static void load_expect(const char *name, const char *body, const char *want)
{
	char text[4096];
	snprintf(text, sizeof(text), HEAD "%s", body);
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	int rc = wd_manifest_load_str("t.yaml", text, strlen(text), &m, &d);
	if (!want) {
		T_OK(rc == 0, name, "rc %d: %s", rc, d.n ? d.msgs[0] : "");
	} else {
		bool found = false;
		for (int i = 0; i < d.n; i++)
			found =
			    found || !strncmp(d.msgs[i], want, strlen(want));
		T_OK(rc == -EINVAL && found, name, "rc %d, want '%s', got '%s'",
		     rc, want, d.n ? d.msgs[0] : "(none)");
	}
	wd_manifest_free(m);
	wd_diag_free(&d);
}

/* validate inst against schema (both JSON); 0 or -EINVAL */
static int val(const char *schema, const char *inst, struct wd_err *e)
{
	json_t *s = json_loads(schema, JSON_DECODE_ANY, NULL);
	json_t *i = json_loads(inst, JSON_DECODE_ANY, NULL);
	memset(e, 0, sizeof(*e));
	int rc = s && i ? wd_schema_validate(s, i, e) : -999;
	json_decref(s);
	json_decref(i);
	return rc;
}

/* pattern p (a JSON string literal's content) against JSON string s */
static void pat(const char *name, const char *p, const char *s, bool want)
{
	char schema[512], inst[256];
	snprintf(schema, sizeof(schema),
		 "{\"type\":\"string\",\"pattern\":\"%s\"}", p);
	snprintf(inst, sizeof(inst), "\"%s\"", s);
	struct wd_err e;
	int rc = val(schema, inst, &e);
	T_OK(want ? rc == 0
		  : (rc == -EINVAL && strstr(e.msg, "does not match")),
	     name, "pattern %s on %s: rc %d %s", p, s, rc, e.msg);
}

int main(void)
{
	/* the attackers' typo: no validation would happen */
	load_expect("strict/type-typo",
		    "args_schema:\n  type: object\n  properties:\n"
		    "    path: {type: strin}\n",
		    "t.yaml:8:18: args_schema: unknown type 'strin' (did you "
		    "mean 'string'?)");
	load_expect("strict/type-typo-in-list",
		    "args_schema: {type: object, properties: {a: {type: "
		    "[string, nul]}}}\n",
		    "t.yaml:5:61: args_schema: unknown type 'nul'");
	/* keywords accepted but never enforced would weaken the policy */
	load_expect("strict/unknown-keyword",
		    "args_schema:\n  type: object\n  properties:\n"
		    "    mail: {type: string, format: email}\n",
		    "t.yaml:8:26: args_schema: keyword 'format' is not "
		    "supported by warden's validator");
	load_expect("strict/keyword-case-typo",
		    "args_schema:\n  type: object\n  properties:\n"
		    "    q:\n      type: string\n      maxlength: 10\n",
		    "t.yaml:10:7: args_schema: keyword 'maxlength' is not "
		    "supported by warden's validator (did you mean "
		    "'maxLength'?)");
	load_expect("strict/oneOf-refused",
		    "args_schema: {type: object, oneOf: [{required: [a]}]}\n",
		    "t.yaml:5:29: args_schema: keyword 'oneOf' is not "
		    "supported");
	load_expect("strict/nested-items-keyword",
		    "args_schema: {type: object, properties: {l: {type: array, "
		    "items: {type: string, uniqueItems: true}}}}\n",
		    "t.yaml:5:81: args_schema: keyword 'uniqueItems'");
	load_expect("strict/top-level-additionalProperties-schema",
		    "args_schema: {type: object, additionalProperties: {const: "
		    "1}}\n",
		    "t.yaml:5:52: args_schema: keyword 'const'");
	load_expect("strict/minLength-negative",
		    "args_schema: {type: object, properties: {a: {minLength: "
		    "-1}}}\n",
		    "t.yaml:5:57: args_schema: 'minLength' must be a "
		    "non-negative integer");
	load_expect(
	    "strict/dash-needs-argv",
	    "args_schema: {type: object, properties: {a: {type: string, "
	    "x-warden-allow-dash: true}}}\n",
	    "t.yaml:5:81: args_schema: 'x-warden-allow-dash' applies "
	    "only");
	load_expect(
	    "strict/all-supported-keywords",
	    "args_schema:\n  type: object\n  title: T\n"
	    "  description: D\n  $comment: c\n  required: [a]\n"
	    "  additionalProperties: false\n  properties:\n"
	    "    a: {type: string, minLength: 1, maxLength: 5, pattern: "
	    "'^\\w+$', enum: [ab, cd], default: ab, examples: [ab]}\n"
	    "    n: {type: [integer, 'null'], minimum: 0, maximum: 9, "
	    "exclusiveMinimum: -1, exclusiveMaximum: 10}\n"
	    "    l: {type: array, minItems: 0, maxItems: 3, items: "
	    "{type: string}}\n",
	    NULL);

	/* YAML tags: the core schema's, where they agree with the value */
	load_expect("tags/python-object", "timeout_ms: !!python/object 5\n",
		    "t.yaml:5:13: YAML tag '!!python/object' is not allowed");
	load_expect("tags/local-tag", "description: !secret x\n",
		    "t.yaml:5:14: YAML tag '!secret' is not allowed");
	load_expect("tags/str-changes-type",
		    "args_schema: {type: object, properties: {a: {maxLength: "
		    "!!str 5}}}\n",
		    "t.yaml:5:57: '!!str 5': warden reads '5' by its form");
	load_expect("tags/int-on-quoted", "timeout_ms: !!int \"5000\"\n",
		    "t.yaml:5:13: tag '!!int' on '5000', which reads as str "
		    "(quoted)");
	load_expect("tags/core-agreeing",
		    "timeout_ms: !!int 5000\n"
		    "description: !!str hello\n"
		    "network: !!map {allow: !!seq []}\n",
		    NULL);
	load_expect("tags/verbatim-core",
		    "timeout_ms: !<tag:yaml.org,2002:int> 5000\n", NULL);
	/* a %TAG directive can make `!!int` mean something else */
	const char *redef = "%TAG !! tag:example.com,2000:\n---\n" HEAD
			    "timeout_ms: !!int 5000\n";
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	int lrc = wd_manifest_load_str("t.yaml", redef, strlen(redef), &m, &d);
	T_OK(lrc == -EINVAL && d.n &&
		 strstr(d.msgs[0], "t.yaml:7:13: YAML tag "
				   "'tag:example.com,2000:int' is not allowed"),
	     "tags/redefined-handle", "rc %d %s", lrc, d.n ? d.msgs[0] : "");
	wd_manifest_free(m);
	wd_diag_free(&d);

	/* patterns are ECMA-262: POSIX classes are not what they look like */
	load_expect(
	    "regex/posix-class-refused",
	    "args_schema: {type: object, properties: {u: {type: string, "
	    "pattern: '^[^[:space:]]+$'}}}\n",
	    "t.yaml:5:69: args_schema: pattern: a lone ']' or '}'");
	load_expect("regex/lookahead-refused",
		    "args_schema: {type: object, properties: {u: {pattern: "
		    "'^(?!-)'}}}\n",
		    "t.yaml:5:55: args_schema: pattern: lookaround");
	load_expect("regex/backref-refused",
		    "args_schema: {type: object, properties: {u: {pattern: "
		    "'(a)\\1'}}}\n",
		    "t.yaml:5:55: args_schema: pattern: a backreference");
	load_expect("regex/word-boundary-refused",
		    "args_schema: {type: object, properties: {u: {pattern: "
		    "'\\bx'}}}\n",
		    "t.yaml:5:55: args_schema: pattern: a word boundary");

	/* the validator matches as ECMA-262 means it */
	pat("regex/digit-class", "^\\\\d{3}$", "123", true);
	pat("regex/digit-class-no", "^\\\\d{3}$", "12a", false);
	pat("regex/space-class", "^a\\\\sb$", "a\\tb", true);
	pat("regex/non-space", "^\\\\S+$", "a b", false);
	pat("regex/dot-no-newline", "^a.b$", "a\\nb", false);
	pat("regex/dot-code-point", "^.$", "\\u00e9", true);
	pat("regex/dot-astral", "^.$", "\\ud83d\\ude00", true);
	pat("regex/escaped-bracket-in-class", "^[\\\\]a]+$", "]a]", true);
	pat("regex/backslash-not-in-class", "^[\\\\]a]+$", "\\\\", false);
	pat("regex/word-ascii", "^\\\\w+$", "ab_9", true);
	pat("regex/word-not-unicode", "^\\\\w+$", "\\u00e9", false);
	pat("regex/noncapture-group", "^(?:ab)+$", "abab", true);
	pat("regex/named-group", "^(?<x>a|b)c$", "bc", true);
	pat("regex/lazy-same-set", "^a+?$", "aaa", true);
	pat("regex/unicode-escape", "^\\\\u00e9$", "\\u00e9", true);
	pat("regex/dash-in-class", "^[a\\\\-z]+$", "-", true);
	pat("regex/dash-range", "^[a-c]+$", "-", false);
	pat("regex/caret-literal-in-class", "^[\\\\^x]$", "^", true);
	pat("regex/unanchored", "b", "abc", true);
	pat("regex/shipped-url", "^https?://\\\\S+$", "http://x/y z", false);
	pat("regex/shipped-url-ok", "^https?://\\\\S+$", "http://x/y", true);
	pat("regex/shipped-mail", "^[^@\\\\s]+@[^@\\\\s]+$", "a@b", true);
	pat("regex/shipped-mail-space", "^[^@\\\\s]+@[^@\\\\s]+$",
	    "a\\u00a0x@b", false);

	/* anchors where glibc and ECMA-262 disagree (found by a differential
	 * run against node's RegExp with the u flag) are refused */
	static const char *const anchors[] = {"$[^c]", "(a$|b)c", "(a$){2}",
					      "x(^a)", "(a|^b)*", "a^b"};
	for (size_t i = 0; i < sizeof(anchors) / sizeof(anchors[0]); i++) {
		char schema[128], name[64];
		snprintf(schema, sizeof(schema), "{\"pattern\":\"%s\"}",
			 anchors[i]);
		snprintf(name, sizeof(name), "regex/anchor-refused-%zu", i);
		struct wd_err ae;
		int arc = val(schema, "\"\\n \"", &ae);
		T_OK(arc == -EINVAL && strstr(ae.msg, "is not supported"), name,
		     "%s: rc %d %s", anchors[i], arc, ae.msg);
	}
	pat("regex/anchors-in-alternatives", "^(?:^a$|^b$)$", "b", true);
	pat("regex/dollar-then-group-close", "^(a|b$)", "b", true);

	/* the validator refuses what it does not implement, at call time too */
	struct wd_err e;
	int rc = val("{\"type\":\"string\",\"format\":\"email\"}", "\"x\"", &e);
	T_OK(rc == -EINVAL &&
		 strstr(e.msg, "keyword 'format' is not supported"),
	     "validator/unknown-keyword", "rc %d %s", rc, e.msg);
	rc = val("{\"type\":\"strin\"}", "\"x\"", &e);
	T_OK(rc == -EINVAL && strstr(e.msg, "type 'strin' is unknown"),
	     "validator/unknown-type", "rc %d %s", rc, e.msg);
	rc = val("{\"pattern\":\"[[:alpha:]]\"}", "\"x\"", &e);
	T_OK(rc == -EINVAL && strstr(e.msg, "not supported"),
	     "validator/posix-pattern", "rc %d %s", rc, e.msg);
	return T_DONE();
}
