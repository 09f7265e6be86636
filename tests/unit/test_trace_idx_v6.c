/* Index format 6 (trace/index.c): a record's first distinct ref in
 * records.ref0, the others in refs, read together through the view
 * allrefs in the order refs had (id = seq * 64 + place). An index of
 * format 5 (every ref in refs, no ref0) is rebuilt from the segments at
 * open in place (not set aside as a damaged file), never read as format
 * 6 (nor as 7, the current format): the rows equal a fresh index's and the
 * refs a reader gets (wd_trace_lines) are the same, in the same order. */
#include "t.h"
#include "test_trace_util.h"

#define H(c)                                                                   \
	"sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	    c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
		c

/* each record's refs from wd_trace_lines, "seq:ref ref;..." */
static char *lines_refs(struct wd_trace *t)
{
	struct wd_err err = {0};
	json_t *a = NULL;
	if (wd_trace_lines(t, 0, 0, &a, &err) < 0)
		return NULL;
	struct wd_buf b = {0};
	size_t i;
	json_t *row;
	json_array_foreach(a, i, row)
	{
		wd_buf_printf(
		    &b, "%lld:",
		    (long long)json_integer_value(json_object_get(row, "seq")));
		size_t j;
		json_t *ref;
		json_array_foreach(json_object_get(row, "refs"), j, ref)
		    wd_buf_printf(&b, "%s ", json_string_value(ref));
		wd_buf_printf(&b, ";");
	}
	json_decref(a);
	wd_buf_append(&b, "", 1);
	return b.data;
}

int main(void)
{
	char *dir = tt_tmpdir();
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {0};
	if (!dir || wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("idx-v6-open", "%s", err.msg);
		return T_DONE();
	}
	json_t *r = tt_rec("v6-run", 0, "run_start");
	tt_append(t, r, false);
	/* one ref */
	r = tt_rec("v6-run", 1, "model_call");
	json_object_set_new(r, "prompt_ref", json_string(H("a")));
	tt_append(t, r, false);
	/* three refs, one of them twice: two distinct, in this order */
	r = tt_rec("v6-run", 2, "tool_result");
	json_object_set_new(r, "args_ref", json_string(H("b")));
	json_object_set_new(r, "result_ref", json_string(H("c")));
	json_object_set_new(r, "stdout_ref", json_string(H("b")));
	tt_append(t, r, false);
	r = tt_rec("v6-run", 3, "run_end");
	tt_append(t, r, false);
	int fr = wd_trace_flush(t, &err);
	char *refs = lines_refs(t);
	wd_trace_close(t);
	char *before = tt_dump_index(dir);
	char *dbp = wd_asprintf("%s/trace/index.db", dir);
	T_OK(!fr && refs && strstr(refs, "2:" H("a") " ;") &&
		 strstr(refs, "3:" H("b") " " H("c") " ;") &&
		 strstr(refs, "1:;") && strstr(refs, "4:;"),
	     "idx-v6-refs-in-order", "refs %s", refs ? refs : "(none)");
	T_OK(tt_db_int(dbp, "SELECT count(*) FROM refs") == 1 &&
		 tt_db_int(dbp, "SELECT count(*) FROM records WHERE ref0 IS "
				"NOT NULL") == 2 &&
		 tt_db_int(dbp, "SELECT id FROM refs") == 3 * 64 + 1 &&
		 tt_db_int(dbp, "PRAGMA user_version") == 7,
	     "idx-v6-first-ref-in-records", "refs %d, ref0 %d, version %d",
	     tt_db_int(dbp, "SELECT count(*) FROM refs"),
	     tt_db_int(dbp,
		       "SELECT count(*) FROM records WHERE ref0 IS NOT NULL"),
	     tt_db_int(dbp, "PRAGMA user_version"));

	/* the same index as format 5 wrote it: every ref in refs, no ref0,
	 * no view; and a row of a run the segments never had */
	int rc = tt_db_exec(
	    dbp, "DROP VIEW allrefs;"
		 "INSERT INTO refs(id, seq, ref, run_id) SELECT seq * 64, "
		 "seq, ref0, run_id FROM records WHERE ref0 IS NOT NULL;"
		 "ALTER TABLE records DROP COLUMN ref0;"
		 "INSERT INTO runs(run_id, status) VALUES('v5-ghost', 'ok');"
		 "PRAGMA user_version = 5;");
	int orc = wd_trace_open(dir, &o, &t, &err);
	char *refs5 = orc == 0 ? lines_refs(t) : NULL;
	if (orc == 0)
		wd_trace_close(t);
	char *after = tt_dump_index(dir);
	T_OK(rc == SQLITE_OK && orc == 0 && before && after &&
		 !strcmp(before, after) && refs5 && !strcmp(refs, refs5) &&
		 tt_db_int(dbp, "PRAGMA user_version") == 7 &&
		 !strstr(after, "v5-ghost") && tt_count_broken(dir) == 0,
	     "idx-v5-rebuilt-as-v6",
	     "sqlite %d, open %d (%s), same rows %d, refs %s", rc, orc, err.msg,
	     before && after && !strcmp(before, after),
	     refs5 ? refs5 : "(none)");
	free(refs);
	free(refs5);
	free(before);
	free(after);
	free(dbp);
	free(dir);
	tt_cleanup();
	return T_DONE();
}
