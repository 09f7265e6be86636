/* OpenAI Chat Completions wire format (POST {base}/v1/chat/completions);
 * also what llama.cpp server, vLLM and Ollama speak. Those servers differ in
 * small ways, handled here defensively: tool-call ids may be missing,
 * arguments may be "" or already an object, finish_reason may say "stop"
 * although tool calls are present, usage may be absent. */
#include <string.h>

#include "gateway/provider.h"

static json_t *openai_build(const struct wd_complete_req *req,
			    const struct wd_provider_cfg *prov,
			    const char *model, struct wd_err *err)
{
	const struct wd_provider_desc *d =
	    wd_provider_desc_of(WD_PROVIDER_OPENAI);
	char why[256];
	if (wd_model_temperature_check(d, model, req->temperature, why,
				       sizeof(why)) < 0) {
		/* the policy loader refuses these (wd_route_check_params);
		 * never send what the API answers with a 400 */
		wd_err_set(err, -EINVAL, "openai: %s", why);
		return NULL;
	}
	json_t *body = json_object(), *msgs = json_array();

	json_object_set_new(body, "model", json_string(model));
	/* max_tokens by default: every compatible server understands it;
	 * OpenAI's reasoning models want max_completion_tokens instead */
	json_object_set_new(
	    body,
	    prov && prov->max_completion_tokens ? "max_completion_tokens"
						: "max_tokens",
	    json_integer(req->max_tokens ? req->max_tokens : 4096));
	if (req->temperature >= 0)
		json_object_set_new(body, "temperature",
				    json_real(req->temperature));
	if (req->seed_set)
		json_object_set_new(body, "seed", json_integer(req->seed));
	for (int i = 0; i < req->n_msgs; i++) {
		const struct wd_msg *m = &req->msgs[i];
		json_t *jm = json_object();

		json_object_set_new(jm, "role",
				    json_string(wd_role_name(m->role)));
		switch (m->role) {
		case WD_ROLE_SYSTEM:
		case WD_ROLE_USER:
			json_object_set_new(jm, "content",
					    wd_json_text(m->text));
			break;
		case WD_ROLE_ASSISTANT:
			/* null content is only valid next to tool_calls */
			json_object_set_new(
			    jm, "content",
			    !wd_text_blank(m->text) ? wd_json_text(m->text)
			    : m->n_tool_calls	    ? json_null()
						    : json_string(""));
			if (m->n_tool_calls) {
				json_t *tcs = json_array();
				for (int j = 0; j < m->n_tool_calls; j++) {
					const struct wd_tool_call *c =
					    &m->tool_calls[j];
					/* unparsable text goes back as the
					 * model wrote it */
					char *args =
					    json_is_string(c->arguments)
						? wd_strdup(json_string_value(
						      c->arguments))
					    : c->arguments
						? json_dumps(c->arguments,
							     JSON_COMPACT)
						: NULL;
					json_array_append_new(
					    tcs,
					    json_pack("{s:o,s:s,s:{s:o,s:s}}",
						      "id", wd_json_text(c->id),
						      "type", "function",
						      "function", "name",
						      wd_json_text(c->name),
						      "arguments",
						      args ? args : "{}"));
					free(args);
				}
				json_object_set_new(jm, "tool_calls", tcs);
			}
			break;
		case WD_ROLE_TOOL: {
			/* no is_error field in this API: say it in the text */
			char *t = m->is_error
				      ? wd_asprintf("[tool error] %s",
						    m->text ? m->text : "")
				      : NULL;
			json_object_set_new(jm, "tool_call_id",
					    wd_json_text(m->tool_call_id));
			json_object_set_new(jm, "content",
					    wd_json_text(t ? t : m->text));
			free(t);
			break;
		}
		}
		json_array_append_new(msgs, jm);
	}
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
				"{s:s,s:{s:o,s:o,s:o}}", "type", "function",
				"function", "name",
				wd_json_text(req->tools[i].name), "description",
				wd_json_text(req->tools[i].description
						 ? req->tools[i].description
						 : ""),
				"parameters", p));
		}
		json_object_set_new(body, "tools", tools);
	}
	return body;
}

static int openai_parse(const char *body, size_t len,
			struct wd_complete_resp *resp, struct wd_err *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *choice, *msg, *tcs, *tc,
	       *u, *v;
	const char *fin;
	size_t i;

	if (!root)
		return wd_err_set(err, -EBADMSG,
				  "openai: response is not JSON (%s at line "
				  "%d column %d)",
				  je.text, je.line, je.column);
	choice = json_array_get(json_object_get(root, "choices"), 0);
	msg = json_object_get(choice, "message");
	if (!json_is_object(msg)) {
		json_decref(root);
		return wd_err_set(err, -EBADMSG,
				  "openai: response has no choices[0].message");
	}
	v = json_object_get(msg, "content");
	if (json_is_string(v)) {
		resp->text =
		    wd_strndup(json_string_value(v), json_string_length(v));
	} else if (json_is_array(v)) { /* content parts */
		struct wd_buf b = {0};
		json_t *part;
		json_array_foreach(v, i, part)
		{
			json_t *t = json_object_get(part, "text");
			if (json_is_string(t))
				wd_buf_append(&b, json_string_value(t),
					      json_string_length(t));
		}
		wd_buf_append(&b, "", 1);
		resp->text = wd_strdup(b.data);
		wd_buf_free(&b);
	} else {
		resp->text = wd_strdup("");
	}
	tcs = json_object_get(msg, "tool_calls");
	resp->tool_calls =
	    wd_calloc(json_array_size(tcs) ? json_array_size(tcs) : 1,
		      sizeof(*resp->tool_calls));
	json_array_foreach(tcs, i, tc)
	{
		json_t *fn = json_object_get(tc, "function");
		const char *name =
		    json_string_value(json_object_get(fn, "name"));
		const char *id = json_string_value(json_object_get(tc, "id"));
		json_t *args = json_object_get(fn, "arguments");
		struct wd_tool_call *c;

		if (!name || !*name) {
			json_decref(root);
			return wd_err_set(err, -EBADMSG,
					  "openai: tool_calls[%zu] has no "
					  "function name",
					  i);
		}
		c = &resp->tool_calls[resp->n_tool_calls++];
		c->name = wd_strdup(name);
		if (id && *id) {
			c->id = wd_strdup(id);
		} else {
			char hex[25];
			wd_rand_hex(hex, 24);
			c->id = wd_asprintf("call_%s", hex);
		}
		if (json_is_string(args))
			c->arguments = wd_parse_arguments(
			    json_string_value(args), json_string_length(args),
			    &c->parse_error);
		else if (json_is_object(args))
			c->arguments = json_incref(args);
		else if (!args || json_is_null(args))
			c->arguments = json_object();
		else {
			c->arguments = json_incref(args);
			c->parse_error = true;
		}
	}
	fin = json_string_value(json_object_get(choice, "finish_reason"));
	wd_resp_set_stop_desc(resp, fin,
			      wd_provider_desc_of(WD_PROVIDER_OPENAI));
	/* a refusal comes as message.refusal (content null), whatever
	 * finish_reason says: the run ends `refused` with that text */
	v = json_object_get(msg, "refusal");
	if (json_is_string(v) && json_string_length(v)) {
		free(resp->text);
		resp->text =
		    wd_strndup(json_string_value(v), json_string_length(v));
		resp->stop_reason = WD_STOP_REFUSAL;
	}

	u = json_object_get(root, "usage");
	if (json_is_object(u)) {
		resp->usage.input_tokens =
		    wd_json_count(json_object_get(u, "prompt_tokens"));
		resp->usage.output_tokens =
		    wd_json_count(json_object_get(u, "completion_tokens"));
		resp->usage.cached_tokens = wd_json_count(
		    json_object_get(json_object_get(u, "prompt_tokens_details"),
				    "cached_tokens"));
		if (resp->usage.cached_tokens > resp->usage.input_tokens)
			resp->usage.cached_tokens = resp->usage.input_tokens;
	}
	wd_resp_set_model_id(resp, root);
	json_t *fp = json_object_get(root, "system_fingerprint");
	if (json_is_string(fp))
		resp->system_fingerprint = wd_strdup(json_string_value(fp));
	json_decref(root);
	return 0;
}

const struct wd_provider_ops wd_openai_ops = {
    .kind = WD_PROVIDER_OPENAI,
    .build = openai_build,
    .parse = openai_parse,
    .error_message = wd_error_body_message,
};
