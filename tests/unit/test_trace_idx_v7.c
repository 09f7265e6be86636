/* Index format 7 (trace/index.c): the prompt and result hash keys in
 * hkeys(b, key, seq), b = seq >> WD_IDX_HKEY_SHIFT, not in two indexes on
 * records. A lookup by hash finds its records in every bucket (the hash
 * at seq 2 and past the first bucket), and only those of its own kind (a
 * prompt hash that is another record's result hash). An index of format 6
 * (records.prompt_key/result_key and their indexes, no hkeys) is rebuilt
 * from the segments at open, in place: the rows and the answers equal a
 * fresh index's. Were the format not bumped, the format 6 file would be
 * read as it is (no hkeys: every lookup fails). */
#include "t.h"
#include "test_trace_util.h"
#include "trace/trace_int.h" /* WD_IDX_HKEY_SHIFT */

#define H(c)                                                                   \
	"sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	    c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
		c

/* "run,run," of the runs (or "seq,seq," of the records) a query finds;
 * "error" if it fails */
static char *found(struct wd_trace *t, const char *prompt, const char *result,
		   bool records)
{
	struct wd_err err = {0};
	struct wd_trace_query q = {.prompt_hash = prompt,
				   .result_hash = result};
	json_t *a = NULL;
	int r = records ? wd_trace_query_records(t, &q, &a, &err)
			: wd_trace_query_runs(t, &q, &a, &err);
	if (r < 0)
		return wd_strdup("error");
	struct wd_buf b = {0};
	size_t i;
	json_t *x;
	json_array_foreach(a, i, x)
	{
		if (records)
			wd_buf_printf(&b, "%lld,",
				      (long long)json_integer_value(
					  json_object_get(x, "seq")));
		else
			wd_buf_printf(
			    &b, "%s,",
			    json_string_value(json_object_get(x, "run_id")));
	}
	json_decref(a);
	wd_buf_append(&b, "", 1);
	return b.data;
}

static json_t *hrec(const char *run, int step, const char *type,
		    const char *member, const char *hash)
{
	json_t *r = tt_rec(run, step, type);
	json_object_set_new(r, member, json_string(hash));
	return r;
}

/* The answers the test expects, as one string: runs by prompt a, records
 * by prompt a, records by result b, records by prompt b, runs by result
 * a (none) */
static char *answers(struct wd_trace *t)
{
	char *v[5] = {
	    found(t, H("a"), NULL, false), found(t, H("a"), NULL, true),
	    found(t, NULL, H("b"), true),  found(t, H("b"), NULL, true),
	    found(t, NULL, H("a"), false),
	};
	char *s = wd_asprintf("%s|%s|%s|%s|%s", v[0], v[1], v[2], v[3], v[4]);
	for (int i = 0; i < 5; i++)
		free(v[i]);
	return s;
}

int main(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {0};
	if (!dir || wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("idx-v7-open", "%s", err.msg);
		return T_DONE();
	}
	tt_append(t, tt_rec("v7-a", 0, "run_start"), false);
	tt_append(t, hrec("v7-a", 1, "model_call", "prompt_hash", H("a")),
		  false);
	tt_append(t, hrec("v7-a", 2, "tool_result", "result_hash", H("b")),
		  false);
	/* past the first bucket */
	uint64_t n = (1u << WD_IDX_HKEY_SHIFT) + 10;
	for (uint64_t i = 3; i < n; i++) {
		static const char *const types[] = {"model_call",
						    "tool_attempt", "flag"};
		char run[32];
		snprintf(run, sizeof(run), "v7-fill-%llu",
			 (unsigned long long)i / 50);
		json_t *r = tt_rec(run, (int)(i % 50), types[i % 3]);
		json_object_set_new(r, "gen_ai.usage.input_tokens",
				    json_integer((json_int_t)i));
		json_object_set_new(r, "gen_ai.tool.name", json_string("t"));
		tt_append(t, r, false);
	}
	tt_append(t, tt_rec("v7-b", 0, "run_start"), false);
	tt_append(t, hrec("v7-b", 1, "model_call", "prompt_hash", H("a")),
		  false);
	/* the prompt of this one is the result of v7-a's tool_result */
	tt_append(t, hrec("v7-b", 2, "model_call", "prompt_hash", H("b")),
		  false);
	int fr = wd_trace_flush(t, &err);
	char *want =
	    wd_asprintf("v7-a,v7-b,|2,%llu,|3,|%llu,|",
			(unsigned long long)n + 2, (unsigned long long)n + 3);
	char *live = answers(t);
	/* the rows the index thread wrote, many a statement, equal a
	 * rebuild's, one a statement */
	char *dump = tt_dump_index(dir);
	int rr = wd_trace_reindex(t, &err);
	char *rebuilt = tt_dump_index(dir);
	T_OK(rr == 0 && dump && rebuilt && strlen(dump) > 1000000 &&
		 !strcmp(dump, rebuilt),
	     "idx-v7-live-equals-rebuilt", "reindex %d, same %d", rr,
	     dump && rebuilt && !strcmp(dump, rebuilt));
	free(dump);
	free(rebuilt);
	wd_trace_close(t);
	char *dbp = wd_asprintf("%s/trace/index.db", dir);
	T_OK(!fr && !strcmp(live, want) &&
		 tt_db_int(dbp, "SELECT count(*) FROM hkeys") == 4 &&
		 tt_db_int(dbp, "SELECT count(DISTINCT b) FROM hkeys") == 2 &&
		 tt_db_int(dbp, "PRAGMA user_version") == 7,
	     "idx-v7-hash-lookups", "found %s, want %s; hkeys %d, version %d",
	     live, want, tt_db_int(dbp, "SELECT count(*) FROM hkeys"),
	     tt_db_int(dbp, "PRAGMA user_version"));
	char *before = tt_dump_index(dir);

	/* the same index as format 6 had it: keys in records, indexed there,
	 * no hkeys */
	int rc = tt_db_exec(
	    dbp, "DROP TABLE hkeys;"
		 "ALTER TABLE records ADD COLUMN prompt_key INTEGER;"
		 "ALTER TABLE records ADD COLUMN result_key INTEGER;"
		 "CREATE INDEX rec_prompt ON records(prompt_key) WHERE "
		 "prompt_key IS NOT NULL;"
		 "CREATE INDEX rec_result ON records(result_key) WHERE "
		 "result_key IS NOT NULL;"
		 "PRAGMA user_version = 6;");
	int orc = wd_trace_open(dir, &o, &t, &err);
	char *again = orc == 0 ? answers(t) : NULL;
	if (orc == 0)
		wd_trace_close(t);
	char *after = tt_dump_index(dir);
	T_OK(rc == SQLITE_OK && orc == 0 && before && after &&
		 !strcmp(before, after) && again && !strcmp(again, want) &&
		 tt_db_int(dbp, "PRAGMA user_version") == 7 &&
		 tt_count_broken(dir) == 0,
	     "idx-v6-rebuilt-as-v7",
	     "sqlite %d, open %d (%s), same rows %d, found %s", rc, orc,
	     err.msg, before && after && !strcmp(before, after),
	     again ? again : "(none)");
	free(want);
	free(live);
	free(again);
	free(before);
	free(after);
	free(dbp);
	free(dir);
	tt_cleanup();
	return T_DONE();
}
