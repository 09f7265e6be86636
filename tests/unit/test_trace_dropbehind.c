/* The trace writer leaves no segment bytes in the page cache but the
 * newest (trace/store.c, drop_behind): ~40 MB of ~1 KB model_call records
 * into a store on a real filesystem with 24 MiB segments, flushed; then
 * mincore() over each segment file says which pages are still cached. The
 * rotated segment must be gone from the cache, the current one's older
 * bytes too, its newest 4 MiB still there (readers following the tail);
 * and every record must read back intact (verify over the whole store,
 * one early run's records, from the disk). On a filesystem without a page
 * cache of its own to drop (tmpfs) the check is skipped, said why. */
#include "t.h"
#include "common/util.h"
#include "trace/recw.h"
#include "trace/trace.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static char text[800];

/* The fraction of [from, to) of the file at path that is in the page
 * cache, or -1. */
static double resident(const char *path, uint64_t from, uint64_t to)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || to > (uint64_t)st.st_size ||
	    from >= to) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	long pg = sysconf(_SC_PAGESIZE);
	void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	size_t np = (st.st_size + pg - 1) / pg;
	unsigned char *v = malloc(np);
	double r = -1;
	if (v && mincore(m, st.st_size, v) == 0) {
		size_t a = from / pg, b = (to + pg - 1) / pg, in = 0;
		for (size_t i = a; i < b; i++)
			in += v[i] & 1;
		r = (double)in / (double)(b - a);
	}
	free(v);
	munmap(m, st.st_size);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	for (size_t k = 0; k < sizeof(text) - 1; k++)
		text[k] = "abcdefghij klmnopqrstuvwxyz.,"[k * 7 % 29];
	text[sizeof(text) - 1] = 0;

	char dir[] = "/var/tmp/wd-dropbehind.XXXXXX";
	if (!mkdtemp(dir)) {
		T_FAIL("dropbehind mkdtemp", "%s", strerror(errno));
		return T_DONE();
	}
	struct statfs sf;
	if (statfs(dir, &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
		T_SKIP("dropbehind",
		       "%s is on tmpfs: its pages are the "
		       "file, nothing to drop",
		       dir);
		wd_rm_rf(dir);
		return T_DONE();
	}
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {.segment_bytes = 24u << 20};
	if (wd_trace_open(dir, &o, &t, &err) < 0) {
		T_FAIL("dropbehind open", "%s", err.msg);
		return T_DONE();
	}
	int bad = 0;
	uint64_t n = 40000; /* ~1 KB each: ~40 MB, two segments */
	for (uint64_t i = 0; i < n && !bad; i++) {
		/* a model_call as bench_trace's, without refs: verify
		 * checks every ref's blob, and these name none */
		char run[40];
		snprintf(run, sizeof(run), "run-db-%06llu",
			 (unsigned long long)(i / 20));
		struct wd_recw *w =
		    wd_recw_begin(t, run, (int64_t)(i % 20), WD_REC_MODEL_CALL);
		wd_recw_str(w, "gen_ai.request.model", "claude-sonnet-4");
		wd_recw_int(w, "gen_ai.usage.input_tokens", 6412);
		wd_recw_obj_begin(w, "response");
		wd_recw_str(w, "text", text);
		wd_recw_obj_end(w);
		bad = wd_trace_append_w(t, w, false, NULL, &err) < 0;
		wd_recw_end(w);
	}
	if (!bad)
		bad = wd_trace_flush(t, &err) < 0;
	T_OK(!bad, "dropbehind appends", "%s", err.msg);

	char *segdir = wd_asprintf("%s/trace/segments", dir);
	DIR *d = opendir(segdir);
	char *segs[16];
	int ns = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && ns < 16)
		if (e->d_name[0] != '.')
			segs[ns++] = wd_asprintf("%s/%s", segdir, e->d_name);
	if (d)
		closedir(d);
	qsort(segs, ns, sizeof(segs[0]), cmp_str);
	T_OK(ns == 2, "dropbehind two segments", "%d segment files in %s", ns,
	     segdir);
	if (ns == 2) {
		struct stat a, b;
		stat(segs[0], &a);
		stat(segs[1], &b);
		double r0 = resident(segs[0], 0, a.st_size);
		T_OK(r0 >= 0 && r0 < 0.1,
		     "dropbehind: a rotated segment leaves the page cache",
		     "%.0f%% of %s (%lld bytes) still cached", r0 * 100,
		     segs[0], (long long)a.st_size);
		/* the current one: all but its newest 8 MiB dropped once
		 * synced (a margin of 1 MiB for the page the cut falls in) */
		uint64_t cut = (uint64_t)b.st_size - (9u << 20);
		double r1 =
		    b.st_size > (10 << 20) ? resident(segs[1], 0, cut) : -1;
		T_OK(r1 >= 0 && r1 < 0.1,
		     "dropbehind: the current segment's older bytes leave "
		     "the page cache",
		     "%.0f%% of the first %llu of %lld bytes still cached",
		     r1 * 100, (unsigned long long)cut, (long long)b.st_size);
		double r2 =
		    resident(segs[1], b.st_size - (4u << 20), b.st_size);
		T_OK(r2 > 0.5,
		     "dropbehind: the newest bytes stay for tail readers",
		     "%.0f%% of the last 4 MiB cached", r2 * 100);
	}
	for (int i = 0; i < ns; i++)
		free(segs[i]);
	free(segdir);

	/* dropped bytes read back from the disk, whole */
	json_t *problems = NULL;
	int v = wd_trace_verify(t, NULL, &problems, &err);
	T_OK(v == 0 && json_array_size(problems) == 0,
	     "dropbehind: the whole store verifies",
	     "verify %d, %zu problems: %s", v, json_array_size(problems),
	     err.msg);
	if (json_array_size(problems)) {
		char *s = json_dumps(json_array_get(problems, 0), 0);
		printf("first problem: %s\n", s);
		free(s);
	}
	json_decref(problems);
	json_t *recs = NULL;
	int r = wd_trace_run_records(t, "run-db-000001", &recs, &err);
	T_OK(r == 0 && json_array_size(recs) == 20 &&
		 json_integer_value(
		     json_object_get(json_array_get(recs, 19), "step")) == 19,
	     "dropbehind: an early run's records read back",
	     "%d, %zu records: %s", r, json_array_size(recs), err.msg);
	json_decref(recs);
	wd_trace_close(t);
	wd_rm_rf(dir);
	return T_DONE();
}
