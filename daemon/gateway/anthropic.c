/* Anthropic Messages API wire format (POST {base}/v1/messages,
 * anthropic-version 2023-06-01). */
#include <string.h>

#include "gateway/provider.h"

/* Append a content block to the last message if it has the same role (the
 * API wants user/assistant turns to alternate), else start a message. */
static void push_block(json_t *msgs, const char *role, json_t *block)
{
	json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);

	if (last &&
	    !strcmp(json_string_value(json_object_get(last, "role")), role)) {
		json_array_append_new(json_object_get(last, "content"), block);
		return;
	}
	json_array_append_new(
	    msgs, json_pack("{s:s,s:[o]}", "role", role, "content", block));
}

/* {"type": "ephemeral"[, "ttl": "1h"]} for the provider's cache_ttl */
static json_t *cache_mark(const struct wd_provider_cfg *prov)
{
	json_t *c = json_pack("{s:s}", "type", "ephemeral");
	if (prov->cache_ttl == WD_CACHE_1H)
		json_object_set_new(c, "ttl", json_string("1h"));
	return c;
}

/* Mark the last content block of message `m` as a cache breakpoint. */
static void mark_last_block(json_t *m, const struct wd_provider_cfg *prov)
{
	json_t *content = json_object_get(m, "content");
	json_t *b = json_array_get(content, json_array_size(content) - 1);
	if (b)
		json_object_set_new(b, "cache_control", cache_mark(prov));
}

static json_t *anthropic_build(const struct wd_complete_req *req,
			       const struct wd_provider_cfg *prov,
			       const char *model, struct wd_err *err)
{
	if (req->seed_set) {
		/* the Messages API has no seed: sending the request without
		 * it would claim a pinned call that is not */
		wd_err_set(err, -EINVAL,
			   "anthropic: the Messages API has no seed; a pinned "
			   "request cannot be honoured on this route");
		return NULL;
	}
	const struct wd_provider_desc *d =
	    wd_provider_desc_of(WD_PROVIDER_ANTHROPIC);
	char why[256];
	if (wd_model_temperature_check(d, model, req->temperature, why,
				       sizeof(why)) < 0) {
		/* the policy loader refuses these (wd_route_check_params);
		 * never send what the API answers with a 400 */
		wd_err_set(err, -EINVAL, "anthropic: %s", why);
		return NULL;
	}
	bool cache = prov && prov->cache_ttl != WD_CACHE_OFF;
	json_t *body = json_object(), *msgs = json_array();
	struct wd_buf sys = {0};

	json_object_set_new(body, "model", json_string(model));
	json_object_set_new(
	    body, "max_tokens",
	    json_integer(req->max_tokens ? req->max_tokens : 4096));
	if (req->temperature >= 0)
		json_object_set_new(body, "temperature",
				    json_real(req->temperature));
	for (int i = 0; i < req->n_msgs; i++) {
		const struct wd_msg *m = &req->msgs[i];
		switch (m->role) {
		case WD_ROLE_SYSTEM:
			if (m->text) {
				if (sys.len)
					wd_buf_append(&sys, "\n\n", 2);
				wd_buf_append(&sys, m->text, strlen(m->text));
			}
			break;
		case WD_ROLE_USER:
			/* the API rejects empty and whitespace-only text */
			push_block(
			    msgs, "user",
			    json_pack("{s:s,s:o}", "type", "text", "text",
				      wd_json_text(!wd_text_blank(m->text)
						       ? m->text
						       : "(empty)")));
			break;
		case WD_ROLE_ASSISTANT:
			if (!wd_text_blank(m->text))
				push_block(msgs, "assistant",
					   json_pack("{s:s,s:o}", "type",
						     "text", "text",
						     wd_json_text(m->text)));
			for (int j = 0; j < m->n_tool_calls; j++) {
				const struct wd_tool_call *c =
				    &m->tool_calls[j];
				/* input must be an object: arguments
				 * another route's model sent unparsable
				 * go as {} (their tool_result says so) */
				json_t *in = json_is_object(c->arguments)
						 ? json_deep_copy(c->arguments)
						 : json_object();
				push_block(
				    msgs, "assistant",
				    json_pack(
					"{s:s,s:o,s:o,s:o}", "type", "tool_use",
					"id", wd_json_text(c->id), "name",
					wd_json_text(c->name), "input", in));
			}
			break;
		case WD_ROLE_TOOL: {
			json_t *b = json_pack(
			    "{s:s,s:o,s:o}", "type", "tool_result",
			    "tool_use_id", wd_json_text(m->tool_call_id),
			    "content", wd_json_text(m->text ? m->text : ""));
			if (m->is_error)
				json_object_set_new(b, "is_error", json_true());
			push_block(msgs, "user", b);
			break;
		}
		}
	}
	if (sys.len) {
		wd_buf_append(&sys, "", 1);
		json_t *st = wd_json_text(sys.data);
		if (cache) /* breakpoint 1: tools + system prompt */
			json_object_set_new(
			    body, "system",
			    json_pack("[{s:s,s:o,s:o}]", "type", "text", "text",
				      st, "cache_control", cache_mark(prov)));
		else
			json_object_set_new(body, "system", st);
	}
	/* a conversation that ends with an assistant turn (a paused turn
	 * sent back) is continued from it; the API rejects such a final
	 * turn ending in whitespace */
	json_t *lm = json_array_get(msgs, json_array_size(msgs) - 1);
	if (lm && !strcmp(json_string_value(json_object_get(lm, "role")),
			  "assistant")) {
		json_t *lc = json_object_get(lm, "content");
		json_t *lb = json_array_get(lc, json_array_size(lc) - 1);
		const char *t = json_string_value(json_object_get(lb, "text"));
		if (t) {
			size_t n = strlen(t);
			while (n && strchr(" \t\r\n\v\f", t[n - 1]))
				n--;
			json_object_set_new(lb, "text", json_stringn(t, n));
		}
	}
	/* breakpoints 2 and 3: the end of the conversation (what the next
	 * step repeats) and the end of the previous user turn, so a step
	 * that adds more than the API's 20-block lookback still hits */
	size_t nm = json_array_size(msgs);
	if (cache && nm) {
		mark_last_block(json_array_get(msgs, nm - 1), prov);
		for (size_t k = nm - 1; k-- > 0;) {
			json_t *mk = json_array_get(msgs, k);
			if (!strcmp(
				json_string_value(json_object_get(mk, "role")),
				"user")) {
				mark_last_block(mk, prov);
				break;
			}
		}
	}
	wd_buf_free(&sys);
	json_object_set_new(body, "messages", msgs);
	if (req->n_tools) {
		json_t *tools = json_array();
		for (int i = 0; i < req->n_tools; i++) {
			json_t *p = wd_tool_parameters(&req->tools[i], err);
			if (!p) {
				json_decref(tools);
				json_decref(body);
				return NULL;
			}
			json_array_append_new(
			    tools,
			    json_pack(
				"{s:o,s:o,s:o}", "name",
				wd_json_text(req->tools[i].name), "description",
				wd_json_text(req->tools[i].description
						 ? req->tools[i].description
						 : ""),
				"input_schema", p));
		}
		/* breakpoint 4: the tool schemas (before the system prompt in
		 * the API's cache order) */
		if (cache)
			json_object_set_new(
			    json_array_get(tools, json_array_size(tools) - 1),
			    "cache_control", cache_mark(prov));
		json_object_set_new(body, "tools", tools);
	}
	return body;
}

static int anthropic_parse(const char *body, size_t len,
			   struct wd_complete_resp *resp, struct wd_err *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *content, *blk, *u, *v;
	struct wd_buf text = {0};
	const char *stop;
	size_t i, ncalls = 0;

	if (!root)
		return wd_err_set(err, -EBADMSG,
				  "anthropic: response is not JSON (%s at "
				  "line %d column %d)",
				  je.text, je.line, je.column);
	if (!json_is_object(root)) {
		json_decref(root);
		return wd_err_set(err, -EBADMSG,
				  "anthropic: response is not a JSON object");
	}
	content = json_object_get(root, "content");
	if (!json_is_array(content)) {
		json_decref(root);
		return wd_err_set(err, -EBADMSG,
				  "anthropic: response has no 'content' array");
	}
	json_array_foreach(content, i, blk)
	{
		const char *t = json_string_value(json_object_get(blk, "type"));
		if (t && !strcmp(t, "tool_use"))
			ncalls++;
	}
	resp->tool_calls =
	    wd_calloc(ncalls ? ncalls : 1, sizeof(*resp->tool_calls));
	json_array_foreach(content, i, blk)
	{
		const char *t = json_string_value(json_object_get(blk, "type"));
		if (!t)
			continue;
		if (!strcmp(t, "text")) {
			v = json_object_get(blk, "text");
			if (json_is_string(v))
				wd_buf_append(&text, json_string_value(v),
					      json_string_length(v));
		} else if (!strcmp(t, "tool_use")) {
			const char *id =
			    json_string_value(json_object_get(blk, "id"));
			const char *name =
			    json_string_value(json_object_get(blk, "name"));
			json_t *in = json_object_get(blk, "input");
			struct wd_tool_call *c;
			if (!id || !name || !*name) {
				json_decref(root);
				wd_buf_free(&text);
				return wd_err_set(err, -EBADMSG,
						  "anthropic: tool_use block "
						  "without id or name");
			}
			c = &resp->tool_calls[resp->n_tool_calls++];
			c->id = wd_strdup(id);
			c->name = wd_strdup(name);
			if (json_is_object(in)) {
				c->arguments = json_incref(in);
			} else if (in) {
				c->arguments = json_incref(in);
				c->parse_error = true;
			} else {
				c->arguments = json_object();
			}
		}
		/* thinking, redacted_thinking, server tool blocks: ignored */
	}
	wd_buf_append(&text, "", 1);
	resp->text = wd_strdup(text.data);
	wd_buf_free(&text);

	stop = json_string_value(json_object_get(root, "stop_reason"));
	wd_resp_set_stop_desc(resp, stop,
			      wd_provider_desc_of(WD_PROVIDER_ANTHROPIC));
	/* a refusal's stop_details: {type: refusal, category, explanation}
	 * (either may be null); the content is often empty */
	json_t *sd = json_object_get(root, "stop_details");
	const char *sdt = json_string_value(json_object_get(sd, "type"));
	if (sdt && !strcmp(sdt, "refusal")) {
		const char *cat =
		    json_string_value(json_object_get(sd, "category"));
		const char *ex =
		    json_string_value(json_object_get(sd, "explanation"));
		if (cat || ex)
			resp->stop_detail =
			    wd_asprintf("%s%s%s", cat ? cat : "",
					cat && ex ? ": " : "", ex ? ex : "");
	}

	u = json_object_get(root, "usage");
	if (json_is_object(u)) {
		uint64_t in = wd_json_count(json_object_get(u, "input_tokens"));
		uint64_t cr = wd_json_count(
		    json_object_get(u, "cache_read_input_tokens"));
		uint64_t cc = wd_json_count(
		    json_object_get(u, "cache_creation_input_tokens"));
		resp->usage.input_tokens = in + cr + cc;
		resp->usage.cached_tokens = cr;
		resp->usage.cache_write_tokens = cc;
		/* usage.cache_creation splits the writes by TTL */
		resp->usage.cache_write_1h_tokens =
		    WD_MIN(cc, wd_json_count(json_object_get(
				   json_object_get(u, "cache_creation"),
				   "ephemeral_1h_input_tokens")));
		resp->usage.output_tokens =
		    wd_json_count(json_object_get(u, "output_tokens"));
	}
	wd_resp_set_model_id(resp, root);
	json_decref(root);
	return 0;
}

const struct wd_provider_ops wd_anthropic_ops = {
    .kind = WD_PROVIDER_ANTHROPIC,
    .build = anthropic_build,
    .parse = anthropic_parse,
    .error_message = wd_error_body_message,
};
