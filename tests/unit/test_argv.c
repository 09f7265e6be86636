/* input: argv: where each value lands on the command line (template or
 * schema order after "--"), what is refused (unknown keys whatever
 * additionalProperties says, values starting with '-', null/objects/lists
 * of lists), how values render, the template's load-time checks at
 * file:line:col, and that the broker's check 3 reports a refusal as a
 * schema error for the model. */
#include "broker/argv.h"
#include "broker/broker.h"
#include "t.h"

static struct wd_manifest *load(const char *name, const char *yaml)
{
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	if (wd_manifest_load_str("a.yaml", yaml, strlen(yaml), &m, &d)) {
		T_FAIL(name, "manifest does not load: %s",
		       d.n ? d.msgs[0] : "?");
		m = NULL;
	}
	wd_diag_free(&d);
	return m;
}

/* argv as "a|b|c" (exec included), or "ERR: msg" */
static void argv_of(const struct wd_manifest *m, const char *args, char *out,
		    size_t len)
{
	json_t *a = json_loads(args, JSON_ALLOW_NUL, NULL);
	char **v = NULL;
	struct wd_err e = {0};
	if (wd_argv_build(m, a, &v, &e)) {
		snprintf(out, len, "ERR: %s", e.msg);
	} else {
		size_t off = 0;
		out[0] = 0;
		for (size_t i = 0; v[i]; i++)
			off += (size_t)snprintf(out + off, len - off, "%s%s",
						i ? "|" : "", v[i]);
		for (size_t i = 0; v[i]; i++)
			free(v[i]);
		free(v);
	}
	json_decref(a);
}

static void expect(const char *name, const struct wd_manifest *m,
		   const char *args, const char *want)
{
	char got[1024];
	if (!m)
		return;
	argv_of(m, args, got, sizeof(got));
	bool ok = !strncmp(want, "ERR: ", 5) ? strstr(got, want + 5) != NULL
					     : !strcmp(got, want);
	T_OK(ok, name, "args %s: got '%s' want '%s'", args, got, want);
}

static void load_err(const char *name, const char *yaml, const char *want)
{
	struct wd_manifest *m = NULL;
	struct wd_diag d = {0};
	int rc = wd_manifest_load_str("a.yaml", yaml, strlen(yaml), &m, &d);
	bool found = false;
	for (int i = 0; i < d.n; i++)
		found = found || !strncmp(d.msgs[i], want, strlen(want));
	T_OK(rc == -EINVAL && found, name, "want '%s', got '%s'", want,
	     d.n ? d.msgs[0] : "(none)");
	wd_manifest_free(m);
	wd_diag_free(&d);
}

static const struct wd_manifest *lookup(void *arg, const char *name)
{
	const struct wd_manifest *m = arg;
	return !strcmp(m->name, name) ? m : NULL;
}

#define HEAD "name: f\ntier: 1\nexec: [/usr/bin/find]\ninput: argv\n"

int main(void)
{
	/* the injection: find DIR + {"zz": "-delete"}; additionalProperties
	 * left open, as in the attack */
	struct wd_manifest *find =
	    load("argv/find", HEAD "args_schema: {type: object, required: "
				   "[dir], properties: {dir: {type: "
				   "string}}}\n");
	expect("argv/find-plain", find, "{\"dir\":\"/srv/x\"}",
	       "/usr/bin/find|--|/srv/x");
	expect("argv/unknown-key-refused", find,
	       "{\"dir\":\"/srv/x\",\"zz\":\"-delete\"}",
	       "ERR: unknown property 'zz'");
	expect("argv/leading-dash-refused", find, "{\"dir\":\"-delete\"}",
	       "ERR: $.dir: a value that starts with '-'");

	/* schema order, not the model's key order */
	struct wd_manifest *ord =
	    load("argv/ord", HEAD
		 "args_schema: {type: object, required: [b, a], properties: "
		 "{b: {type: string}, a: {type: string}, c: {}}}\n");
	expect("argv/schema-order", ord, "{\"a\":\"A\",\"b\":\"B\"}",
	       "/usr/bin/find|--|B|A");
	expect("argv/render-integer", ord, "{\"a\":\"A\",\"b\":\"B\",\"c\":7}",
	       "/usr/bin/find|--|B|A|7");
	expect("argv/render-real", ord, "{\"a\":\"A\",\"b\":\"B\",\"c\":0.1}",
	       "/usr/bin/find|--|B|A|0.1");
	expect("argv/render-bool", ord, "{\"a\":\"A\",\"b\":\"B\",\"c\":true}",
	       "/usr/bin/find|--|B|A|true");
	expect("argv/render-list", ord,
	       "{\"a\":\"A\",\"b\":\"B\",\"c\":[\"x\",2,false]}",
	       "/usr/bin/find|--|B|A|x|2|false");
	expect("argv/negative-number-refused", ord,
	       "{\"a\":\"A\",\"b\":\"B\",\"c\":-5}",
	       "ERR: $.c: a value that starts with '-'");
	expect("argv/dash-in-list-refused", ord,
	       "{\"a\":\"A\",\"b\":\"B\",\"c\":[\"x\",\"-exec\"]}",
	       "ERR: $.c: a value that starts with '-'");
	expect("argv/null-refused", ord, "{\"a\":\"A\",\"b\":\"B\",\"c\":null}",
	       "ERR: $.c: null cannot be passed");
	expect("argv/object-refused", ord,
	       "{\"a\":\"A\",\"b\":\"B\",\"c\":{\"k\":1}}",
	       "ERR: $.c: an object cannot be passed");
	expect("argv/nested-list-refused", ord,
	       "{\"a\":\"A\",\"b\":\"B\",\"c\":[[1]]}",
	       "ERR: $.c: a list inside a list cannot be passed");
	expect("argv/nul-refused", ord, "{\"a\":\"A\\u0000x\",\"b\":\"B\"}",
	       "ERR: $.a: a NUL character");

	/* the property that says so may start with '-' */
	struct wd_manifest *dash =
	    load("argv/dash-ok", HEAD
		 "args_schema: {type: object, required: [expr], properties: "
		 "{expr: {type: string, enum: [-print, -ls], "
		 "x-warden-allow-dash: true}}}\n");
	expect("argv/dash-allowed-where-declared", dash,
	       "{\"expr\":\"-print\"}", "/usr/bin/find|--|-print");

	/* a template: its order, values inside elements, a list spread, an
	 * absent optional element dropped */
	load_err("argv/template-list-must-stand-alone",
		 HEAD "args_schema: {type: object, required: [dir, names], "
		      "properties: {names: {type: array, items: {type: "
		      "string}}, max: {type: integer}, dir: {type: string}}}\n"
		      "argv: [\"{dir}\", \"-maxdepth={max}\", \"-name\", "
		      "\"{{{names}}}\"]\n",
		 "a.yaml:6:45: 'argv': '{names}' may be a list");
	struct wd_manifest *t =
	    load("argv/template",
		 HEAD "args_schema: {type: object, required: [dir, names], "
		      "properties: {names: {type: array, items: {type: "
		      "string}}, max: {type: integer}, dir: {type: string}}}\n"
		      "argv: [\"{{{dir}}}\", \"--maxdepth={max}\", \"--\", "
		      "\"{names}\"]\n");
	expect("argv/template-order", t,
	       "{\"names\":[\"a\",\"b\"],\"max\":2,\"dir\":\"d\"}",
	       "/usr/bin/find|{d}|--maxdepth=2|--|a|b");
	expect("argv/template-optional-dropped", t,
	       "{\"names\":[],\"dir\":\"d\"}", "/usr/bin/find|{d}|--");
	expect("argv/template-unknown-key", t,
	       "{\"names\":[],\"dir\":\"d\",\"x\":1}",
	       "ERR: unknown property 'x'");
	expect("argv/template-dash-inside-element", t,
	       "{\"names\":[],\"dir\":\"-d\"}",
	       "ERR: $.dir: a value that starts with '-'");

	/* template checks at load, at the element */
	load_err("argv/load-unknown-placeholder",
		 HEAD "args_schema: {type: object, properties: {dir: {type: "
		      "string}}}\nargv: [\"{dir}\", \"{dri}\"]\n",
		 "a.yaml:6:17: 'argv': '{dri}' is not a property of "
		 "args_schema");
	load_err("argv/load-property-not-placed",
		 HEAD "args_schema:\n  type: object\n  properties:\n"
		      "    dir: {type: string}\n    extra: {type: string}\n"
		      "argv: [\"{dir}\"]\n",
		 "a.yaml:9:5: property 'extra' is not placed by the 'argv' "
		 "template");
	load_err("argv/load-needs-input-argv",
		 "name: f\ntier: 1\nexec: [/usr/bin/find]\ninput: stdin\n"
		 "argv: [\"x\"]\n",
		 "a.yaml:5:7: 'argv' needs 'input: argv'");
	load_err("argv/load-brace",
		 HEAD "args_schema: {type: object, properties: {dir: {type: "
		      "string}}}\nargv: [\"{dir\"]\n",
		 "a.yaml:6:8: 'argv': '{dir': a '{' without its '}'");
	load_err("argv/load-optional-after-option",
		 HEAD "args_schema: {type: object, properties: {n: {type: "
		      "string}}}\nargv: [\"--name\", \"{n}\"]\n",
		 "a.yaml:6:18: 'argv': optional '{n}' follows option "
		 "'--name'");
	load_err("argv/load-positional-optional-first",
		 HEAD "args_schema:\n  type: object\n  required: [b]\n"
		      "  properties:\n    a: {type: string}\n"
		      "    b: {type: string}\n",
		 "a.yaml:9:5: input: argv without an 'argv' template passes "
		 "values by position: optional property 'a' comes before "
		 "required 'b'");

	/* the broker: a refusal is check 3's schema error, for the model */
	if (find) {
		char *granted[] = {"f"};
		struct wd_broker_run r = {.run_id = "r",
					  .agent = "a",
					  .team = "t",
					  .granted = granted,
					  .n_granted = 1,
					  .user = "u",
					  .uid = 1000,
					  .gid = 1000};
		r.tool_arg = find;
		r.tool = lookup;
		struct wd_ratelimit *rl = wd_ratelimit_new();
		struct wd_broker_call c = {.call_id = "c", .name = "f"};
		c.args =
		    json_loads("{\"dir\":\"/x\",\"zz\":\"-delete\"}", 0, NULL);
		const struct wd_manifest *m;
		char check[16], reason[512];
		enum wd_broker_verdict v = wd_broker_check(
		    &r, &c, rl, false, &m, check, reason, sizeof(reason));
		T_OK(v == WD_BRK_INVALID && !strcmp(check, "schema") &&
			 strstr(reason, "unknown property 'zz'"),
		     "broker/injection-is-schema-error", "v %d check %s: %s", v,
		     check, reason);
		json_decref(c.args);
		c.args = json_loads("{\"dir\":\"/x\"}", 0, NULL);
		v = wd_broker_check(&r, &c, rl, false, &m, check, reason,
				    sizeof(reason));
		T_OK(v == WD_BRK_ALLOW, "broker/plain-call-allowed", "v %d: %s",
		     v, reason);
		json_decref(c.args);
		wd_ratelimit_free(rl);
	}
	wd_manifest_free(find);
	wd_manifest_free(ord);
	wd_manifest_free(dash);
	wd_manifest_free(t);
	return T_DONE();
}
