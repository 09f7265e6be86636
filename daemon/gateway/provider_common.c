/* Helpers shared by the providers and the neutral conversation types. */
#include <string.h>

#include "gateway/provider.h"

const char *wd_role_name(enum wd_role r)
{
	switch (r) {
	case WD_ROLE_SYSTEM:
		return "system";
	case WD_ROLE_USER:
		return "user";
	case WD_ROLE_ASSISTANT:
		return "assistant";
	case WD_ROLE_TOOL:
		return "tool";
	}
	return "?";
}

const char *wd_stop_reason_name(enum wd_stop_reason s)
{
	switch (s) {
	case WD_STOP_END_TURN:
		return "end_turn";
	case WD_STOP_TOOL_USE:
		return "tool_use";
	case WD_STOP_MAX_TOKENS:
		return "max_tokens";
	case WD_STOP_OTHER:
		return "other";
	case WD_STOP_REFUSAL:
		return "refusal";
	case WD_STOP_PAUSE:
		return "pause_turn";
	case WD_STOP_CONTEXT:
		return "context_exceeded";
	}
	return "?";
}

enum wd_stop_reason wd_stop_reason_parse(const char *s)
{
	for (int i = WD_STOP_END_TURN; s && i <= WD_STOP_CONTEXT; i++)
		if (!strcmp(s, wd_stop_reason_name((enum wd_stop_reason)i)))
			return (enum wd_stop_reason)i;
	return WD_STOP_OTHER;
}

void wd_tool_call_copy(struct wd_tool_call *dst, const struct wd_tool_call *src)
{
	dst->id = src->id ? wd_strdup(src->id) : NULL;
	dst->name = src->name ? wd_strdup(src->name) : NULL;
	dst->arguments =
	    src->arguments ? json_deep_copy(src->arguments) : json_object();
	dst->parse_error = src->parse_error;
}

void wd_tool_call_clear(struct wd_tool_call *c)
{
	free(c->id);
	free(c->name);
	json_decref(c->arguments);
	memset(c, 0, sizeof(*c));
}

void wd_complete_resp_free(struct wd_complete_resp *resp)
{
	if (!resp)
		return;
	for (int i = 0; i < resp->n_tool_calls; i++)
		wd_tool_call_clear(&resp->tool_calls[i]);
	free(resp->tool_calls);
	free(resp->stop_raw);
	free(resp->text);
	free(resp->provider);
	free(resp->model);
	free(resp->response_id);
	free(resp->system_fingerprint);
	free(resp->stop_detail);
	free(resp->attempts);
	free(resp->raw_request);
	free(resp->raw_response);
	memset(resp, 0, sizeof(*resp));
}

json_t *wd_tool_parameters(const struct wd_tool_schema *t, struct wd_err *err)
{
	json_error_t je;
	json_t *p;

	if (!t->parameters_json)
		return json_pack("{s:s}", "type", "object");
	p = json_loads(t->parameters_json, 0, &je);
	if (!p || !json_is_object(p)) {
		json_decref(p);
		wd_err_set(err, -EINVAL,
			   "tool '%s': parameters are not a JSON object",
			   t->name ? t->name : "?");
		return NULL;
	}
	return p;
}

json_t *wd_parse_arguments(const char *s, size_t len, bool *parse_error)
{
	json_t *v;
	size_t i = 0;

	*parse_error = false;
	while (i < len &&
	       (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i == len)
		return json_object();
	v = json_loadb(s, len, 0, NULL);
	if (v && json_is_object(v))
		return v;
	json_decref(v);
	/* kept as the model's own text: it goes back to the model verbatim
	 * (OpenAI arguments are a string) and the broker refuses the call
	 * (arguments are not an object) */
	*parse_error = true;
	v = json_stringn(s, len);
	if (v)
		return v;
	/* invalid UTF-8 (or a NUL): bytes replaced; s is not NUL-terminated */
	cleanup_free char *t = wd_strndup(s, len);
	return wd_json_text(t);
}

bool wd_text_blank(const char *s)
{
	for (; s && *s; s++)
		if (!strchr(" \t\r\n\v\f", *s))
			return false;
	return true;
}

uint64_t wd_json_count(json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return (uint64_t)json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) >= 0 &&
	    json_real_value(v) < 1e18)
		return (uint64_t)json_real_value(v);
	return 0;
}

json_t *wd_neutral_request(const struct wd_complete_req *req, const char *model)
{
	json_t *o = json_object(), *msgs = json_array(), *tools = json_array();

	json_object_set_new(o, "model", json_string(model));
	for (int i = 0; i < req->n_msgs; i++) {
		const struct wd_msg *m = &req->msgs[i];
		json_t *jm = json_object();
		json_object_set_new(jm, "role",
				    json_string(wd_role_name(m->role)));
		if (m->text)
			json_object_set_new(jm, "text", wd_json_text(m->text));
		if (m->n_tool_calls) {
			json_t *tc = json_array();
			for (int j = 0; j < m->n_tool_calls; j++)
				json_array_append_new(
				    tc, json_pack("{s:s?,s:s?,s:O?}", "id",
						  m->tool_calls[j].id, "name",
						  m->tool_calls[j].name,
						  "arguments",
						  m->tool_calls[j].arguments));
			json_object_set_new(jm, "tool_calls", tc);
		}
		if (m->role == WD_ROLE_TOOL) {
			json_object_set_new(jm, "tool_call_id",
					    json_string(m->tool_call_id
							    ? m->tool_call_id
							    : ""));
			json_object_set_new(jm, "is_error",
					    json_boolean(m->is_error));
		}
		json_array_append_new(msgs, jm);
	}
	for (int i = 0; i < req->n_tools; i++)
		json_array_append_new(
		    tools, json_pack("{s:s?}", "name", req->tools[i].name));
	json_object_set_new(o, "messages", msgs);
	json_object_set_new(o, "tools", tools);
	return o;
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

json_t *wd_json_text(const char *s)
{
	struct wd_buf b = {0};
	size_t n, i = 0;
	json_t *v;

	if (!s)
		return json_string("");
	v = json_string(s);
	if (v)
		return v;
	/* tool output is arbitrary bytes: keep it, replacing what is not
	 * UTF-8 with U+FFFD, rather than dropping the whole message */
	n = strlen(s);
	while (i < n) {
		size_t l = utf8_seq((const unsigned char *)s + i, n - i);
		if (l) {
			wd_buf_append(&b, s + i, l);
			i += l;
		} else {
			wd_buf_append(&b, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	v = json_stringn(b.data ? b.data : "", b.len);
	wd_buf_free(&b);
	return v ? v : json_string("");
}

void wd_resp_set_model_id(struct wd_complete_resp *resp, json_t *root)
{
	json_t *v = json_object_get(root, "model");
	if (json_is_string(v)) {
		free(resp->model);
		resp->model = wd_strdup(json_string_value(v));
	}
	v = json_object_get(root, "id");
	if (json_is_string(v))
		resp->response_id = wd_strdup(json_string_value(v));
}

void wd_error_body_message(const char *body, size_t len, char *out,
			   size_t outlen)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	json_t *e = json_object_get(root, "error");
	const char *type = json_string_value(json_object_get(e, "type"));
	const char *msg =
	    json_is_string(e)
		? json_string_value(e)
		: json_string_value(json_object_get(e, "message"));
	out[0] = 0;
	if (type || msg)
		snprintf(out, outlen, "%s%s%s", type ? type : "",
			 type && msg ? ": " : "", msg ? msg : "");
	json_decref(root);
}
