/* The catch-up's strict scanner (trace/idxscan.c) against jansson: every
 * line it takes gives the index fields, seq and ts that json_loadb +
 * wd_idx_extract give; a line jansson rejects is never taken; the lines
 * the store writes (jansson's and the typed encoder's) are taken. */
#include "t.h"
#include "trace/trace_int.h"

#include <string.h>

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_rec(const struct wd_idxrec *a, const struct wd_idxrec *b)
{
	for (int i = 0; i < WD_IDXREC_NSTR; i++)
		if (!same_str(a->s[i], b->s[i]))
			return false;
	if (a->nrefs != b->nrefs)
		return false;
	for (unsigned i = 0; i < a->nrefs; i++)
		if (!same_str(a->refs[i], b->refs[i]))
			return false;
	return a->step == b->step && a->in_tokens == b->in_tokens &&
	       a->out_tokens == b->out_tokens && a->cost_nusd == b->cost_nusd &&
	       a->rd == b->rd && a->cached_tokens == b->cached_tokens &&
	       a->uid == b->uid && a->replay_from == b->replay_from &&
	       a->diverged_at == b->diverged_at &&
	       a->replay_converged == b->replay_converged &&
	       a->has_cost == b->has_cost && a->has_rd == b->has_rd &&
	       a->flagged == b->flagged && a->has_uid == b->has_uid &&
	       a->has_diverged == b->has_diverged;
}

/* 1: taken and equal to jansson's; 0: left to jansson; -1: differs, or
 * taken where jansson rejects the line */
static int check(const char *line)
{
	size_t len = strlen(line);
	char *scratch = wd_malloc(len + 1);
	struct wd_idxvals v;
	uint64_t seq = 0;
	const char *ts;
	int sr = wd_idx_scan_line(line, len, scratch, &v, &seq, &ts);
	json_t *rec = NULL;
	int jr = wd_trace_parse_line(line, len, &rec);
	int res;
	if (sr < 0) {
		res = 0;
	} else if (jr < 0) {
		res = -1;
	} else {
		struct wd_idxrec *a = wd_idx_build(&v);
		struct wd_idxrec *b = wd_idx_extract(rec);
		const char *jts = json_string_value(json_object_get(rec, "ts"));
		res = same_rec(a, b) &&
			      seq == (uint64_t)json_integer_value(
					 json_object_get(rec, "seq")) &&
			      same_str(ts, jts)
			  ? 1
			  : -1;
		free(a);
		free(b);
	}
	json_decref(rec);
	free(scratch);
	return res;
}

#define R                                                                      \
	"\"sha256:"                                                            \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""
#define HEAD "{\"seq\":7,\"ts\":\"2026-01-10T12:00:01.123456Z\",\"prev\":\"x\","

/* taken and equal */
static const char *const taken[] = {
    HEAD "\"run_id\":\"r1\",\"step\":0,\"type\":\"run_start\",\"agent\":"
	 "\"a\",\"team\":\"t\",\"user\":\"u\",\"uid\":1000,\"model\":\"m\","
	 "\"trace\":{\"payloads\":\"hash_only\",\"retention_days\":30,"
	 "\"x\":[1,{\"y\":null}]},\"replay_of\":{\"run_id\":\"r0\","
	 "\"from_step\":3,\"head\":\"h\"}}",
    HEAD "\"run_id\":\"r1\",\"step\":2,\"type\":\"model_call\","
	 "\"gen_ai.request.model\":\"m\",\"prompt_hash\":" R
	 ",\"prompt_ref\":" R
	 ",\"gen_ai.usage.input_tokens\":6412,\"gen_ai.usage.output_tokens\":"
	 "184,\"cached_tokens\":5,\"cost_usd\":0.0231,\"latency_ms\":1840,"
	 "\"response\":{\"stop_reason\":\"tool_use\",\"text\":\"a \\\"q\\\" "
	 "\\\\ \\/ \\n\\t\\r\\b\\f\"}}",
    HEAD "\"run_id\":\"r1\",\"step\":3,\"type\":\"tool_result\",\"tool\":"
	 "\"send\",\"call_id\":\"c\",\"status\":\"refused\",\"check\":\"auth\","
	 "\"result_hash\":" R ",\"args_ref\":" R ",\"stdout_ref\":\"nope\","
	 "\"x_ref\":5,\"cost_usd\":\"0.5\",\"flagged\":true}",
    HEAD "\"run_id\":\"r1\",\"step\":9,\"type\":\"run_end\",\"status\":\"ok\","
	 "\"reason\":\"done\",\"cost_usd\":-1.5e-3,\"flagged\":false,"
	 "\"replay\":{\"converged\":false,\"diverged_at\":4},\"uid\":null,"
	 "\"retention_days\":7.5}",
    " { \"seq\" : -0 , \"prev\" : \"\" , \"run_id\" : \"r\" , \"type\" : "
    "\"flag\" , \"step\" : 1.0 , \"a\" : [ ] , \"b\" : { } } ",
    /* UTF-8, in a read value, a key and a dropped one */
    HEAD "\"run_id\":\"r\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"type\":"
	 "\"x\",\"\xc3\xa9\":1,\"text\":\"\xed\x9f\xbf\xf4\x8f\xbf\xbf\"}",
    HEAD "\"run_id\":\"r\",\"type\":\"x\",\"trace\":\"not an object\","
	 "\"replay\":[1,2],\"step\":9223372036854775807,\"in\":1e308}",
};

/* left to jansson (taken: a failure); the ones jansson accepts must
 * still parse */
static const char *const left[] = {
    HEAD "\"run_id\":\"r\\u00e9\",\"type\":\"x\"}", /* \u in a value */
    HEAD "\"run_\\u0069d\":\"r\",\"type\":\"x\"}",  /* escape in a key */
    HEAD "\"run_id\":\"r\\n\",\"type\":\"x\"}",	    /* escape, read value */
    HEAD "\"run_id\":\"r\",\"type\":\"x\",\"text\":\"\\u0001\"}",
    /* rejected by jansson too */
    HEAD "\"a\":\"\xc0\xaf\"}", /* overlong */
    HEAD "\"a\":\"\xe0\x80\xaf\"}",
    HEAD "\"a\":\"\xed\xa0\x80\"}",	/* surrogate */
    HEAD "\"a\":\"\xf4\x90\x80\x80\"}", /* > U+10FFFF */
    HEAD "\"a\":\"\xc3\"}",		/* cut */
    HEAD "\"a\":\"\xa9\"}",		/* continuation */
    HEAD "\"a\":\"\xf8\x88\x80\x80\x80\"}",
    HEAD "\"run_id\":\"r\",\"run_id\":\"s\"}",	      /* duplicate */
    HEAD "\"run_id\":\"r\",\"o\":{\"a\":1,\"a\":2}}", /* nested dup */
    HEAD "\"run_id\":\"r\",\"trace\":{\"payloads\":\"a\",\"payloads\":"
	 "\"b\"}}",
    HEAD "\"step\":9223372036854775808}", /* too big */
    HEAD "\"step\":1e400}",		  /* overflow */
    HEAD "\"step\":01}",		  /* leading 0 */
    HEAD "\"step\":1.}",
    HEAD "\"step\":-}",
    HEAD "\"run_id\":\"r\"} x", /* trailing */
    HEAD "\"run_id\":\"r\",}",
    HEAD "\"run_id\":\"r\"",
    HEAD "\"run_id\":\"r\x01\"}", /* control */
    HEAD "\"a\":tru}",
    HEAD "\"a\":[1,]}",
    HEAD "\"a\":\"\\x\"}",	      /* bad escape */
    "{\"seq\":\"7\",\"prev\":\"x\"}", /* seq a string */
    "{\"seq\":7}",		      /* no prev */
    "{\"seq\":7,\"prev\":1}",
    "[1]",
    "{}",
    "",
};

int main(void)
{
	int bad = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(taken); i++)
		if (check(taken[i]) != 1) {
			bad++;
			fprintf(stderr, "taken[%zu]: %d\n", i, check(taken[i]));
		}
	T_OK(bad == 0, "idxscan-same-as-jansson", "%d lines differ", bad);
	bad = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(left); i++)
		if (check(left[i]) != 0) {
			bad++;
			fprintf(stderr, "left[%zu] taken\n", i);
		}
	T_OK(bad == 0, "idxscan-leaves-the-rest-to-jansson", "%d lines taken",
	     bad);
	/* every cut of a good line: taken only where jansson takes it */
	bad = 0;
	for (size_t i = 0; i < WD_ARRAY_SIZE(taken); i++) {
		size_t n = strlen(taken[i]);
		for (size_t k = 0; k < n; k++) {
			char *cut = wd_strdup(taken[i]);
			cut[k] = 0;
			bad += check(cut) < 0;
			/* one byte changed */
			char *mut = wd_strdup(taken[i]);
			mut[k] = mut[k] == '"' ? '}' : '"';
			bad += check(mut) < 0;
			free(cut);
			free(mut);
		}
	}
	T_OK(bad == 0, "idxscan-cut-and-mutated-lines", "%d differ", bad);
	return T_DONE();
}
