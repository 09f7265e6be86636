/* The conversation a run sends its model: the message list serialized
 * once per message (prompt text and token estimates, for the trace and
 * for fitting), fitted to context.budget_tokens, and turned into the
 * gateway's request form. */
#include <string.h>

#include "gateway/gateway.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* Rough token estimate for context fitting: 4 bytes per token. */
static long long msg_tokens(json_t *m)
{
	size_t n = 16;
	const char *t = json_string_value(json_object_get(m, "text"));
	if (t)
		n += strlen(t);
	json_t *tc = json_object_get(m, "tool_calls");
	if (json_array_size(tc)) {
		char *s = json_dumps(tc, JSON_COMPACT);
		n += s ? strlen(s) : 0;
		free(s);
	}
	return (long long)(n / 4);
}

static long long ctx_tokens(json_t *msgs)
{
	long long t = 0;
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m) t += msg_tokens(m);
	return t;
}

/* Bring the serialized conversation and the token estimates up to date
 * with r->msgs: only the messages appended since the last call are
 * serialized (a step used to serialize the whole conversation, twice). */
static void conv_cache(struct wd_run *r)
{
	size_t n = json_array_size(r->msgs);
	if (r->pgen != r->msgs_gen || r->pn > n) {
		r->ptext.len = 0;
		r->pn = 0;
		r->ptok_sum = 0;
		r->pgen = r->msgs_gen;
	}
	if (r->pn == n && r->ptext.len)
		return;
	r->ptok = wd_realloc(r->ptok, (n ? n : 1) * sizeof(*r->ptok));
	if (!r->ptext.len)
		wd_buf_append(&r->ptext, "[", 1);
	for (size_t i = r->pn; i < n; i++) {
		json_t *m = json_array_get(r->msgs, i);
		char *s = json_dumps(m, JSON_COMPACT);
		if (i)
			wd_buf_append(&r->ptext, ",", 1);
		if (s)
			wd_buf_append(&r->ptext, s, strlen(s));
		free(s);
		r->ptok[i] = msg_tokens(m);
		r->ptok_sum += r->ptok[i];
	}
	r->pn = n;
}

/* The conversation as JSON text (what json_dumps(msgs, JSON_COMPACT)
 * gives), freshly allocated. */
char *rt_conv_text(struct wd_run *r)
{
	conv_cache(r);
	char *s = wd_malloc(r->ptext.len + 2);
	memcpy(s, r->ptext.data, r->ptext.len);
	memcpy(s + r->ptext.len, "]", 2);
	return s;
}

/* ctx_tokens(r->msgs), from the cache. */
static long long conv_tokens(struct wd_run *r)
{
	conv_cache(r);
	return r->ptok_sum;
}

static const char *role_of(json_t *m)
{
	return json_string_value(json_object_get(m, "role"));
}

/* Fit the conversation into context.budget_tokens: first externalise
 * older tool results to the trace (a blob; the message keeps a reference
 * the run's trace can resolve), then slide the window by dropping the
 * oldest whole turns (an assistant message with its tool results, so no
 * provider sees a tool result without its call). The system prompt and
 * the task stay. */
void rt_fit_context(struct wd_run *r)
{
	long long budget = r->agent->context_budget_tokens;
	/* a provider said the prompt is over its window (loop.c) */
	if (r->ctx_cut > 0 && (budget <= 0 || r->ctx_cut < budget))
		budget = r->ctx_cut;
	if (budget <= 0 || conv_tokens(r) <= budget)
		return;
	/* what follows edits messages in place */
	r->msgs_gen++;
	/* the last turn (assistant + its results) is never touched */
	size_t n = json_array_size(r->msgs), last_asst = n;
	for (size_t i = n; i-- > 0;)
		if (!strcmp(role_of(json_array_get(r->msgs, i)), "assistant")) {
			last_asst = i;
			break;
		}
	int externalised = 0, dropped = 0;
	for (size_t i = 0; i < last_asst && ctx_tokens(r->msgs) > budget; i++) {
		json_t *m = json_array_get(r->msgs, i);
		if (strcmp(role_of(m), "tool") ||
		    json_is_true(json_object_get(m, "externalised")))
			continue;
		const char *t = json_string_value(json_object_get(m, "text"));
		size_t len = t ? strlen(t) : 0;
		if (len < 256)
			continue;
		char ref[WD_TRACE_REF_LEN];
		struct wd_err e = {0};
		if (wd_trace_put_blob(r->rt->trace, r->id, t, len, ref, &e))
			continue;
		cleanup_free char *note = wd_asprintf(
		    "[earlier result of %s (%zu bytes) moved out of the "
		    "context to the run's trace as %s]",
		    json_string_value(json_object_get(m, "tool_name")), len,
		    ref);
		json_object_set_new(m, "text", json_string(note));
		json_object_set_new(m, "externalised", json_true());
		json_object_set_new(m, "ref", json_string(ref));
		externalised++;
	}
	/* sliding window: drop the oldest turns after the task */
	while (ctx_tokens(r->msgs) > budget) {
		size_t first = 0;
		while (first < json_array_size(r->msgs) &&
		       strcmp(role_of(json_array_get(r->msgs, first)),
			      "assistant"))
			first++;
		n = json_array_size(r->msgs);
		if (first >= n)
			break;
		size_t end = first + 1;
		while (end < n &&
		       !strcmp(role_of(json_array_get(r->msgs, end)), "tool"))
			end++;
		if (end >= n) /* that is the last turn: keep it */
			break;
		for (size_t k = first; k < end; k++)
			json_array_remove(r->msgs, first);
		dropped++;
	}
	if (externalised || dropped) {
		json_t *rec = rt_rec_new(r, "context_fit");
		json_object_set_new(rec, "budget_tokens", json_integer(budget));
		json_object_set_new(rec, "estimated_tokens",
				    json_integer(ctx_tokens(r->msgs)));
		json_object_set_new(rec, "externalised",
				    json_integer(externalised));
		json_object_set_new(rec, "dropped_turns",
				    json_integer(dropped));
		rt_record(r, rec, false, NULL);
		json_decref(rec);
	}
}

void rt_conv_build(json_t *msgs, struct rt_conv *c)
{
	c->n = (int)json_array_size(msgs);
	c->m = wd_calloc((size_t)c->n, sizeof(*c->m));
	c->calls = wd_calloc((size_t)c->n, sizeof(*c->calls));
	for (int i = 0; i < c->n; i++) {
		json_t *j = json_array_get(msgs, (size_t)i);
		const char *role = role_of(j);
		struct wd_msg *m = &c->m[i];
		m->text = json_string_value(json_object_get(j, "text"));
		if (!strcmp(role, "system"))
			m->role = WD_ROLE_SYSTEM;
		else if (!strcmp(role, "user"))
			m->role = WD_ROLE_USER;
		else if (!strcmp(role, "assistant")) {
			m->role = WD_ROLE_ASSISTANT;
			json_t *tc = json_object_get(j, "tool_calls");
			int k = (int)json_array_size(tc);
			c->calls[i] = wd_calloc((size_t)k, sizeof(**c->calls));
			for (int x = 0; x < k; x++) {
				json_t *t = json_array_get(tc, (size_t)x);
				c->calls[i][x].id = (char *)json_string_value(
				    json_object_get(t, "id"));
				c->calls[i][x].name = (char *)json_string_value(
				    json_object_get(t, "name"));
				c->calls[i][x].arguments =
				    json_object_get(t, "arguments");
			}
			m->tool_calls = c->calls[i];
			m->n_tool_calls = k;
		} else {
			m->role = WD_ROLE_TOOL;
			m->tool_call_id = json_string_value(
			    json_object_get(j, "tool_call_id"));
			m->tool_name =
			    json_string_value(json_object_get(j, "tool_name"));
			m->is_error =
			    json_is_true(json_object_get(j, "is_error"));
		}
	}
}

void rt_conv_free(struct rt_conv *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->calls[i]);
	free(c->calls);
	free(c->m);
}
