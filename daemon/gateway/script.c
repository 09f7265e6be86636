/* The script provider (format in script.h). Stateless: everything it needs
 * (the step, the last tool result) is read from the conversation itself, so
 * one loaded script serves any number of runs and threads. */
#include <ctype.h>
#include <jansson.h>
#include <regex.h>
#include <string.h>

#include "gateway/gateway.h"
#include "gateway/script.h"

struct rule {
	int line;
	int step; /* -1 = any */
	char *after;
	bool has_re;
	regex_t re;
	bool has_sys; /* "system": regex over the system prompt */
	regex_t sys;
	int error; /* -1 = any, else 0/1 */
	char *text;
	json_t *tool_calls; /* array of {name, arguments} or NULL */
	int stop;	    /* -1 = derive */
	bool has_usage;
	struct wd_usage usage;
};

struct wd_script {
	char *file;
	struct rule *rules;
	int n_rules;
};

/* ---- templates ------------------------------------------------------------
 */

/* Checks a {{...}} expression's grammar; NULL if fine, else the reason. */
static const char *tmpl_check(const char *e, size_t n)
{
	if ((n == 4 && !memcmp(e, "task", 4)) ||
	    (n == 4 && !memcmp(e, "last", 4)) ||
	    (n == 4 && !memcmp(e, "step", 4)) ||
	    (n == 12 && !memcmp(e, "task.numbers", 12)))
		return NULL;
	if (n >= 6 && !memcmp(e, "result", 6)) {
		if (n == 6 || e[6] == '.' || e[6] == ':')
			return NULL;
	}
	return "unknown template (want task, last, step, task.numbers, "
	       "result[:TOOL][.path])";
}

static int tmpl_validate(const char *s, const char **why)
{
	const char *p = s, *q;

	while ((p = strstr(p, "{{"))) {
		q = strstr(p + 2, "}}");
		if (!q) {
			*why = "unterminated {{";
			return -EINVAL;
		}
		const char *b = p + 2, *e = q;
		while (b < e && isspace((unsigned char)*b))
			b++;
		while (e > b && isspace((unsigned char)e[-1]))
			e--;
		if ((*why = tmpl_check(b, (size_t)(e - b))))
			return -EINVAL;
		p = q + 2;
	}
	return 0;
}

static int json_validate_tmpl(json_t *v, const char **why)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v))
		return tmpl_validate(json_string_value(v), why);
	if (json_is_object(v)) {
		json_object_foreach(
		    v, k, x) if (json_validate_tmpl(x, why)) return -EINVAL;
	} else if (json_is_array(v)) {
		json_array_foreach(
		    v, i, x) if (json_validate_tmpl(x, why)) return -EINVAL;
	}
	return 0;
}

/* Tool name a tool-result message answers. */
static const char *result_tool(const struct wd_complete_req *req, int idx)
{
	const struct wd_msg *m = &req->msgs[idx];

	if (m->tool_name)
		return m->tool_name;
	if (!m->tool_call_id)
		return NULL;
	for (int i = idx - 1; i >= 0; i--) {
		const struct wd_msg *a = &req->msgs[i];
		if (a->role != WD_ROLE_ASSISTANT)
			continue;
		for (int j = 0; j < a->n_tool_calls; j++)
			if (a->tool_calls[j].id &&
			    !strcmp(a->tool_calls[j].id, m->tool_call_id))
				return a->tool_calls[j].name;
	}
	return NULL;
}

static void append_trimmed(struct wd_buf *b, const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	wd_buf_append(b, s, n);
}

/* The longest list of numbers in s: numbers separated only by spaces,
 * commas, semicolons or "and" form one list ("above 50: 45, 80, 62 and 63"
 * gives [45, 80, 62, 63], not the 50). Digits inside words are no numbers. */
static void numbers_of(struct wd_buf *b, const char *s)
{
	const char *best = NULL, *best_end = NULL, *run = NULL, *run_end = NULL;
	int best_n = 0, run_n = 0;
	char prev = ' ';

	while (s && *s) {
		bool sign = *s == '-' && isdigit((unsigned char)s[1]);
		if ((sign || isdigit((unsigned char)*s)) &&
		    !isalnum((unsigned char)prev) && prev != '_' &&
		    prev != '.') {
			const char *e = s + sign, *g;
			while (isdigit((unsigned char)*e))
				e++;
			if (*e == '.' && isdigit((unsigned char)e[1])) {
				e++;
				while (isdigit((unsigned char)*e))
					e++;
			}
			if (isalpha((unsigned char)*e) || *e == '_') {
				prev = *s++; /* "3rd", "x86" */
				continue;
			}
			/* does the gap since the run's last number continue
			 * the list? */
			bool cont = run != NULL;
			for (g = run_end; cont && g < s; g++) {
				if (isspace((unsigned char)*g) || *g == ',' ||
				    *g == ';')
					continue;
				if (!strncmp(g, "and", 3)) {
					g += 2;
					continue;
				}
				cont = false;
			}
			if (!cont) {
				run = s;
				run_n = 0;
			}
			run_n++;
			run_end = e;
			if (run_n > best_n) {
				best_n = run_n;
				best = run;
				best_end = run_end;
			}
			prev = e[-1];
			s = e;
		} else {
			prev = *s++;
		}
	}
	wd_buf_append(b, "[", 1);
	for (s = best; s && s < best_end;) {
		bool sign = *s == '-' && isdigit((unsigned char)s[1]);
		if (sign || isdigit((unsigned char)*s)) {
			const char *e = s + sign;
			while (e < best_end &&
			       (isdigit((unsigned char)*e) || *e == '.'))
				e++;
			if (s != best)
				wd_buf_append(b, ", ", 2);
			wd_buf_append(b, s, (size_t)(e - s));
			s = e;
		} else {
			s++;
		}
	}
	wd_buf_append(b, "]", 1);
}

static void result_expand(struct wd_buf *b, const struct wd_complete_req *req,
			  const char *e, size_t n)
{
	char tool[128] = "", path[256] = "";
	const char *p = e + 6, *end = e + n;
	const char *content = NULL;

	if (p < end && *p == ':') {
		const char *t = ++p;
		while (p < end && *p != '.')
			p++;
		snprintf(tool, sizeof(tool), "%.*s", (int)(p - t), t);
	}
	if (p < end && *p == '.')
		snprintf(path, sizeof(path), "%.*s", (int)(end - p - 1), p + 1);
	for (int i = req->n_msgs - 1; i >= 0; i--) {
		if (req->msgs[i].role != WD_ROLE_TOOL)
			continue;
		if (tool[0]) {
			const char *tn = result_tool(req, i);
			if (!tn || strcmp(tn, tool))
				continue;
		}
		content = req->msgs[i].text ? req->msgs[i].text : "";
		break;
	}
	if (!content)
		return;
	if (!path[0]) {
		append_trimmed(b, content, strlen(content));
		return;
	}
	json_t *root = json_loads(content, JSON_DECODE_ANY, NULL), *v = root;
	if (!root) {
		append_trimmed(b, content, strlen(content));
		return;
	}
	char *save = NULL;
	for (char *tok = strtok_r(path, ".", &save); tok && v;
	     tok = strtok_r(NULL, ".", &save)) {
		if (json_is_object(v))
			v = json_object_get(v, tok);
		else if (json_is_array(v) && isdigit((unsigned char)*tok))
			v = json_array_get(v, strtoul(tok, NULL, 10));
		else
			v = NULL;
	}
	if (v && json_is_string(v)) {
		append_trimmed(b, json_string_value(v), json_string_length(v));
	} else if (v) {
		char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (d)
			wd_buf_append(b, d, strlen(d));
		free(d);
	}
	json_decref(root);
}

static char *tmpl_expand(const char *s, const struct wd_complete_req *req,
			 int step)
{
	struct wd_buf b = {0};
	const char *p = s, *o, *q;
	const char *task = NULL, *last = NULL;

	for (int i = 0; i < req->n_msgs; i++)
		if (req->msgs[i].role == WD_ROLE_USER) {
			task = req->msgs[i].text;
			break;
		}
	if (req->n_msgs)
		last = req->msgs[req->n_msgs - 1].text;
	while ((o = strstr(p, "{{")) && (q = strstr(o + 2, "}}"))) {
		const char *e = o + 2, *ee = q;
		size_t n;

		wd_buf_append(&b, p, (size_t)(o - p));
		while (e < ee && isspace((unsigned char)*e))
			e++;
		while (ee > e && isspace((unsigned char)ee[-1]))
			ee--;
		n = (size_t)(ee - e);
		if (n == 4 && !memcmp(e, "task", 4)) {
			if (task)
				append_trimmed(&b, task, strlen(task));
		} else if (n == 4 && !memcmp(e, "last", 4)) {
			if (last)
				append_trimmed(&b, last, strlen(last));
		} else if (n == 4 && !memcmp(e, "step", 4)) {
			wd_buf_printf(&b, "%d", step);
		} else if (n == 12 && !memcmp(e, "task.numbers", 12)) {
			numbers_of(&b, task);
		} else if (n >= 6 && !memcmp(e, "result", 6)) {
			result_expand(&b, req, e, n);
		}
		p = q + 2;
	}
	wd_buf_append(&b, p, strlen(p));
	wd_buf_append(&b, "", 1); /* NUL */
	return b.data;
}

static json_t *json_expand(json_t *v, const struct wd_complete_req *req,
			   int step)
{
	const char *k;
	json_t *x, *out;
	size_t i;

	if (json_is_string(v)) {
		char *s = tmpl_expand(json_string_value(v), req, step);
		out = json_string(s);
		free(s);
		return out ? out : json_string("");
	}
	if (json_is_object(v)) {
		out = json_object();
		json_object_foreach(v, k, x)
		    json_object_set_new(out, k, json_expand(x, req, step));
		return out;
	}
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, x)
		    json_array_append_new(out, json_expand(x, req, step));
		return out;
	}
	return json_deep_copy(v);
}

/* ---- loading ---------------------------------------------------------------
 */

static void rule_clear(struct rule *r)
{
	free(r->after);
	free(r->text);
	if (r->has_re)
		regfree(&r->re);
	if (r->has_sys)
		regfree(&r->sys);
	json_decref(r->tool_calls);
}

void wd_script_free(struct wd_script *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_rules; i++)
		rule_clear(&s->rules[i]);
	free(s->rules);
	free(s->file);
	free(s);
}

static int usage_num(json_t *u, const char *k, uint64_t *out)
{
	json_t *v = json_object_get(u, k);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_rule(const char *file, int line, json_t *o, struct rule *r,
		      struct wd_err *err)
{
	static const char *const keys[] = {"step",	 "after", "match",
					   "system",	 "error", "text",
					   "tool_calls", "stop",  "usage"};
	const char *k, *why = NULL;
	json_t *v;

	r->line = line;
	r->step = -1;
	r->error = -1;
	r->stop = -1;
	if (!json_is_object(o))
		return wd_err_set(err, -EINVAL,
				  "%s:%d:1: a rule is a JSON object", file,
				  line);
	json_object_foreach(o, k, v)
	{
		bool ok = false;
		for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++)
			ok |= !strcmp(keys[i], k);
		if (!ok)
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: unknown key '%s'", file,
					  line, k);
	}
	if ((v = json_object_get(o, "step"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 1000000)
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'step' must be an integer "
					  ">= 0",
					  file, line);
		r->step = (int)json_integer_value(v);
	}
	if ((v = json_object_get(o, "after"))) {
		if (!json_is_string(v))
			return wd_err_set(
			    err, -EINVAL,
			    "%s:%d:1: 'after' must be a tool name", file, line);
		r->after = wd_strdup(json_string_value(v));
	}
	if ((v = json_object_get(o, "match"))) {
		int rc;
		if (!json_is_string(v))
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'match' must be a regex",
					  file, line);
		rc = regcomp(&r->re, json_string_value(v),
			     REG_EXTENDED | REG_NOSUB);
		if (rc) {
			char eb[128];
			regerror(rc, &r->re, eb, sizeof(eb));
			return wd_err_set(err, -EINVAL, "%s:%d:1: 'match': %s",
					  file, line, eb);
		}
		r->has_re = true;
	}
	if ((v = json_object_get(o, "system"))) {
		int rc = json_is_string(v)
			     ? regcomp(&r->sys, json_string_value(v),
				       REG_EXTENDED | REG_NOSUB)
			     : -1;
		if (rc)
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'system' must be a regex",
					  file, line);
		r->has_sys = true;
	}
	if ((v = json_object_get(o, "error"))) {
		if (!json_is_boolean(v))
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'error' must be a boolean",
					  file, line);
		r->error = json_is_true(v);
	}
	if ((v = json_object_get(o, "text"))) {
		if (!json_is_string(v))
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'text' must be a string",
					  file, line);
		if (tmpl_validate(json_string_value(v), &why))
			return wd_err_set(err, -EINVAL, "%s:%d:1: 'text': %s",
					  file, line, why);
		r->text = wd_strdup(json_string_value(v));
	}
	if ((v = json_object_get(o, "tool_calls"))) {
		size_t i;
		json_t *tc;
		if (!json_is_array(v))
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'tool_calls' must be an "
					  "array",
					  file, line);
		json_array_foreach(v, i, tc)
		{
			json_t *n = json_object_get(tc, "name");
			json_t *a = json_object_get(tc, "arguments");
			if (!json_is_object(tc) || !json_is_string(n) ||
			    (a && !json_is_object(a)) ||
			    json_object_size(tc) != (a ? 2u : 1u))
				return wd_err_set(
				    err, -EINVAL,
				    "%s:%d:1: tool_calls[%zu]: want {\"name\": "
				    "string, \"arguments\": object}",
				    file, line, i);
			if (a && json_validate_tmpl(a, &why))
				return wd_err_set(
				    err, -EINVAL,
				    "%s:%d:1: tool_calls[%zu]: %s", file, line,
				    i, why);
		}
		r->tool_calls = json_incref(v);
	}
	if ((v = json_object_get(o, "stop"))) {
		const char *s = json_string_value(v);
		if (s && !strcmp(s, "end_turn"))
			r->stop = WD_STOP_END_TURN;
		else if (s && !strcmp(s, "tool_use"))
			r->stop = WD_STOP_TOOL_USE;
		else if (s && !strcmp(s, "max_tokens"))
			r->stop = WD_STOP_MAX_TOKENS;
		else
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'stop' must be end_turn, "
					  "tool_use or max_tokens",
					  file, line);
	}
	if ((v = json_object_get(o, "usage"))) {
		if (!json_is_object(v) ||
		    usage_num(v, "input_tokens", &r->usage.input_tokens) ||
		    usage_num(v, "output_tokens", &r->usage.output_tokens) ||
		    usage_num(v, "cached_tokens", &r->usage.cached_tokens))
			return wd_err_set(err, -EINVAL,
					  "%s:%d:1: 'usage' wants non-negative "
					  "integer token counts",
					  file, line);
		r->has_usage = true;
	}
	if (!r->text && !r->tool_calls)
		return wd_err_set(err, -EINVAL,
				  "%s:%d:1: a rule needs 'text' or "
				  "'tool_calls'",
				  file, line);
	return 0;
}

int wd_script_load_str(const char *file, const char *text, size_t len,
		       struct wd_script **out, struct wd_err *err)
{
	struct wd_script *s = wd_calloc(1, sizeof(*s));
	const char *p = text, *end = text + len;
	int line = 0, r;

	*out = NULL;
	s->file = wd_strdup(file);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *q = p;
		json_error_t je;
		json_t *o;

		line++;
		while (q < le && isspace((unsigned char)*q))
			q++;
		if (q == le || *q == '#') {
			p = le + 1;
			continue;
		}
		if (memchr(p, 0, (size_t)(le - p))) {
			wd_script_free(s);
			return wd_err_set(err, -EINVAL, "%s:%d:1: NUL byte",
					  file, line);
		}
		o = json_loadb(p, (size_t)(le - p), JSON_REJECT_DUPLICATES,
			       &je);
		if (!o) {
			wd_script_free(s);
			return wd_err_set(err, -EINVAL, "%s:%d:%d: %s", file,
					  line, je.column > 0 ? je.column : 1,
					  je.text);
		}
		s->rules =
		    wd_realloc(s->rules, (s->n_rules + 1) * sizeof(*s->rules));
		memset(&s->rules[s->n_rules], 0, sizeof(*s->rules));
		r = parse_rule(file, line, o, &s->rules[s->n_rules], err);
		s->n_rules++;
		json_decref(o);
		if (r) {
			wd_script_free(s);
			return r;
		}
		p = le + 1;
	}
	if (!s->n_rules) {
		wd_script_free(s);
		return wd_err_set(err, -EINVAL, "%s:1:1: no rules", file);
	}
	*out = s;
	return 0;
}

int wd_script_load_file(const char *path, struct wd_script **out,
			struct wd_err *err)
{
	cleanup_free char *text = NULL;
	size_t len;
	int r;

	*out = NULL;
	r = wd_read_file(path, &text, &len);
	if (r)
		return wd_err_set(err, r, "%s: %s", path, strerror(-r));
	return wd_script_load_str(path, text, len, out, err);
}

/* ---- answering --------------------------------------------------------------
 */

static bool rule_matches(const struct rule *r,
			 const struct wd_complete_req *req, int step)
{
	const struct wd_msg *last =
	    req->n_msgs ? &req->msgs[req->n_msgs - 1] : NULL;

	if (r->step >= 0 && r->step != step)
		return false;
	if (r->after) {
		const char *tn;
		if (!last || last->role != WD_ROLE_TOOL)
			return false;
		tn = result_tool(req, req->n_msgs - 1);
		if (!tn || strcmp(tn, r->after))
			return false;
	}
	if (r->error >= 0) {
		if (!last || last->role != WD_ROLE_TOOL ||
		    last->is_error != (bool)r->error)
			return false;
	}
	if (r->has_re) {
		if (!last || !last->text ||
		    regexec(&r->re, last->text, 0, NULL, 0))
			return false;
	}
	if (r->has_sys) {
		bool hit = false;
		for (int i = 0; i < req->n_msgs && !hit; i++)
			hit = req->msgs[i].role == WD_ROLE_SYSTEM &&
			      req->msgs[i].text &&
			      !regexec(&r->sys, req->msgs[i].text, 0, NULL, 0);
		if (!hit)
			return false;
	}
	return true;
}

int wd_script_complete(const struct wd_script *s,
		       const struct wd_complete_req *req,
		       struct wd_complete_resp *resp, struct wd_err *err)
{
	const struct rule *r = NULL;
	size_t in_bytes = 0, out_bytes = 0;
	int step = 0;
	json_t *raw;

	for (int i = 0; i < req->n_msgs; i++) {
		if (req->msgs[i].role == WD_ROLE_ASSISTANT)
			step++;
		if (req->msgs[i].text)
			in_bytes += strlen(req->msgs[i].text);
	}
	for (int i = 0; i < s->n_rules && !r; i++)
		if (rule_matches(&s->rules[i], req, step))
			r = &s->rules[i];
	raw = json_object();
	json_object_set_new(raw, "script", json_string(s->file));
	json_object_set_new(raw, "step", json_integer(step));
	if (!r) {
		resp->text = wd_strdup("(script has no rule for this step)");
		resp->stop_reason = WD_STOP_END_TURN;
		json_object_set_new(raw, "rule_line", json_null());
	} else {
		resp->text =
		    r->text ? tmpl_expand(r->text, req, step) : wd_strdup("");
		json_object_set_new(raw, "rule_line", json_integer(r->line));
		if (r->tool_calls) {
			size_t n = json_array_size(r->tool_calls);
			resp->tool_calls =
			    wd_calloc(n ? n : 1, sizeof(*resp->tool_calls));
			for (size_t i = 0; i < n; i++) {
				json_t *tc = json_array_get(r->tool_calls, i);
				json_t *a = json_object_get(tc, "arguments");
				struct wd_tool_call *c = &resp->tool_calls[i];
				c->id = wd_asprintf("call_%d_%zu", step, i);
				c->name = wd_strdup(json_string_value(
				    json_object_get(tc, "name")));
				c->arguments = a ? json_expand(a, req, step)
						 : json_object();
				resp->n_tool_calls++;
				char *d =
				    json_dumps(c->arguments, JSON_COMPACT);
				out_bytes +=
				    (d ? strlen(d) : 0) + strlen(c->name);
				free(d);
			}
		}
		if (r->stop >= 0)
			resp->stop_reason = (enum wd_stop_reason)r->stop;
		else
			resp->stop_reason = resp->n_tool_calls
						? WD_STOP_TOOL_USE
						: WD_STOP_END_TURN;
	}
	out_bytes += strlen(resp->text);
	resp->stop_raw = wd_strdup(wd_stop_reason_name(resp->stop_reason));
	if (r && r->has_usage) {
		resp->usage = r->usage;
	} else {
		resp->usage.input_tokens = in_bytes / 4 + 1;
		resp->usage.output_tokens = out_bytes / 4 + 1;
	}
	json_object_set_new(raw, "text", json_string(resp->text));
	json_t *calls = json_array();
	for (int i = 0; i < resp->n_tool_calls; i++) {
		json_t *c = json_object();
		json_object_set_new(c, "id",
				    json_string(resp->tool_calls[i].id));
		json_object_set_new(c, "name",
				    json_string(resp->tool_calls[i].name));
		json_object_set(c, "arguments", resp->tool_calls[i].arguments);
		json_array_append_new(calls, c);
	}
	json_object_set_new(raw, "tool_calls", calls);
	json_object_set_new(raw, "stop_reason", json_string(resp->stop_raw));
	resp->raw_response = json_dumps(raw, JSON_COMPACT);
	json_decref(raw);
	(void)err;
	return 0;
}
