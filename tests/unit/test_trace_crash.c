/* Crash safety and fail-closed:
 * - a child appends records (some durable, some with blobs) and reports each
 *   acknowledged durable seq on a pipe; it is SIGKILLed at a random moment,
 *   50 times; after each kill the store reopens, every acknowledged record
 *   is there, a torn tail (also simulated: a half-written line, as a power
 *   cut leaves) is cut, and verify passes;
 * - disk full on a small tmpfs: a durable append returns -ENOSPC and the
 *   store reports itself unhealthy. */
#include "t.h"
#include "test_trace_util.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>

static void child(const char *dir, int wfd, int iter)
{
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(dir,
			  &(struct wd_trace_opts){.segment_bytes = 256 << 10},
			  &t, &err) < 0) {
		dprintf(2, "child open: %s\n", err.msg);
		_exit(3);
	}
	char run[32], pad[3000];
	snprintf(run, sizeof(run), "crash-%d", iter);
	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = 0;
	for (int i = 0;; i++) {
		json_t *r =
		    tt_rec(run, i, i % 3 ? "model_call" : "tool_attempt");
		json_object_set_new(r, "pad", json_string(pad + (i % 2000)));
		if (i % 7 == 0) {
			char ref[72], payload[64];
			snprintf(payload, sizeof(payload), "payload %d/%d",
				 iter, i);
			if (wd_trace_put_blob(t, run, payload, strlen(payload),
					      ref, &err) < 0)
				_exit(4);
			json_object_set_new(r, "result_ref", json_string(ref));
		}
		bool durable = i % 3 == 0;
		uint64_t seq;
		if (wd_trace_append(t, r, durable, &seq, &err) < 0)
			_exit(5);
		json_decref(r);
		if (durable && write(wfd, &seq, sizeof(seq)) != sizeof(seq))
			_exit(6);
	}
}

static void test_crash(void)
{
	char *dir = tt_tmpdir();
	unsigned seed = (unsigned)wd_now_ns();
	int lost_total = 0, bad_verify = 0, bad_open = 0, torn_cut = 0,
	    torn_made = 0;
	uint64_t acked_total = 0;
	srand(seed);
	for (int iter = 0; iter < 50; iter++) {
		int p[2];
		if (pipe(p) < 0)
			break;
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			child(dir, p[1], iter);
			_exit(0);
		}
		close(p[1]);
		/* kill at a random point: after a random number of acks (so
		 * the writer is well into its stream even on a loaded
		 * machine), plus a random few milliseconds */
		uint64_t *acked = NULL, s;
		size_t n = 0, want = 1 + rand() % 40;
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		while (n < want && poll(&pf, 1, 5000) > 0 &&
		       read(p[0], &s, sizeof(s)) == sizeof(s)) {
			acked = wd_realloc(acked, (n + 1) * sizeof(*acked));
			acked[n++] = s;
		}
		usleep(rand() % 5000);
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		if (!WIFSIGNALED(st))
			printf("# iter %d: writer exited early (%d)\n", iter,
			       WEXITSTATUS(st));
		while (read(p[0], &s, sizeof(s)) == sizeof(s)) {
			acked = wd_realloc(acked, (n + 1) * sizeof(*acked));
			acked[n++] = s;
		}
		close(p[0]);
		acked_total += n;
		/* every 5th time, leave half a line as a power cut would */
		if (iter % 5 == 4) {
			uint64_t *segs = NULL;
			char *segdir = wd_asprintf("%s/trace/segments", dir);
			DIR *d = opendir(segdir);
			struct dirent *e;
			char last[64] = "";
			while (d && (e = readdir(d)))
				if (strlen(e->d_name) == 22 &&
				    strcmp(e->d_name, last) > 0)
					snprintf(last, sizeof(last), "%s",
						 e->d_name);
			if (d)
				closedir(d);
			char *path = wd_asprintf("%s/%s", segdir, last);
			FILE *f = fopen(path, "a");
			if (f) {
				fputs("{\"seq\":999999,\"ts\":\"2024-01-01T00:"
				      "00:00.000000Z\",\"prev\":\"sha256:00",
				      f);
				fclose(f);
				torn_made++;
			}
			free(path);
			free(segdir);
			free(segs);
		}
		struct wd_trace *t;
		struct wd_err err = {0};
		if (wd_trace_open(dir, NULL, &t, &err) < 0) {
			printf("# iter %d: reopen: %s\n", iter, err.msg);
			bad_open++;
			free(acked);
			continue;
		}
		char run[32];
		snprintf(run, sizeof(run), "crash-%d", iter);
		json_t *recs = NULL;
		wd_trace_run_records(t, run, &recs, &err);
		size_t j = 0, lost = 0;
		for (size_t i = 0; i < n; i++) {
			while (j < json_array_size(recs) &&
			       (uint64_t)json_integer_value(json_object_get(
				   json_array_get(recs, j), "seq")) < acked[i])
				j++;
			if (j >= json_array_size(recs) ||
			    (uint64_t)json_integer_value(json_object_get(
				json_array_get(recs, j), "seq")) != acked[i])
				lost++;
		}
		lost_total += lost;
		if (getenv("TRACE_DEBUG"))
			printf("# iter %d: %zu acks, %zu records\n", iter, n,
			       json_array_size(recs));
		json_decref(recs);
		json_t *probs = NULL;
		if (wd_trace_verify(t, NULL, &probs, &err) != 0) {
			bad_verify++;
			char *js = json_dumps(probs, JSON_COMPACT);
			printf("# iter %d: verify: %.300s\n", iter, js);
			free(js);
		}
		json_decref(probs);
		wd_trace_close(t);
		free(acked);
	}
	char *segdir = wd_asprintf("%s/trace/segments", dir);
	DIR *d = opendir(segdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		torn_cut += strstr(e->d_name, ".torn-") != NULL;
	if (d)
		closedir(d);
	free(segdir);
	printf("# 50 kills, %llu durable acks, %d simulated torn tails, %d "
	       "cut (seed %u)\n",
	       (unsigned long long)acked_total, torn_made, torn_cut, seed);
	T_OK(bad_open == 0, "trace-crash-reopen", "%d reopen failures",
	     bad_open);
	T_OK(acked_total > 500 && lost_total == 0, "trace-crash-no-acked-loss",
	     "%d acknowledged records lost (of %llu)", lost_total,
	     (unsigned long long)acked_total);
	T_OK(torn_made > 0 && torn_cut >= torn_made,
	     "trace-crash-torn-tail-cut", "made %d cut %d", torn_made,
	     torn_cut);
	T_OK(bad_verify == 0, "trace-crash-verify", "%d verify failures",
	     bad_verify);
	wd_rm_rf(dir);
	free(dir);
}

static void test_enospc(void)
{
	char *dir = tt_tmpdir();
	if (mount("wd-trace-test", dir, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=512k") < 0) {
		T_SKIP("trace-enospc", "cannot mount tmpfs: %s",
		       strerror(errno));
		rmdir(dir);
		free(dir);
		return;
	}
	struct wd_trace *t;
	struct wd_err err = {0};
	int r = wd_trace_open(dir, NULL, &t, &err);
	if (r < 0) {
		T_FAIL("trace-enospc", "open: %s", err.msg);
		goto out;
	}
	char pad[4000];
	memset(pad, 'z', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = 0;
	int got = 0, i;
	for (i = 0; i < 2000 && !got; i++) {
		json_t *rec = tt_rec("full", i, "tool_attempt");
		json_object_set_new(rec, "pad", json_string(pad));
		json_object_set_new(rec, "i", json_integer(i));
		got = wd_trace_append(t, rec, true, NULL, &err);
		json_decref(rec);
	}
	T_OK(got == -ENOSPC, "trace-enospc-durable-append-fails",
	     "got %d after %d appends (%s)", got, i, err.msg);
	int code = 0;
	T_OK(!wd_trace_healthy(t, &code) && code == -ENOSPC,
	     "trace-enospc-unhealthy", "healthy or code %d", code);
	json_t *rec = tt_rec("full", 9999, "tool_attempt");
	r = wd_trace_append(t, rec, false, NULL, &err);
	json_decref(rec);
	T_OK(r == -ENOSPC, "trace-enospc-latched",
	     "non-durable append after failure returned %d", r);
	char ref[72];
	r = wd_trace_put_blob(t, NULL, "x", 1, ref, &err);
	T_OK(r < 0, "trace-enospc-blob-refused", "put_blob returned %d", r);
	wd_trace_close(t);
	/* what was acknowledged before is intact */
	r = wd_trace_open(dir, &(struct wd_trace_opts){.read_only = true}, &t,
			  &err);
	json_t *p = NULL;
	if (r == 0) {
		r = wd_trace_verify(t, NULL, &p, &err);
		wd_trace_close(t);
	}
	T_OK(r == 0, "trace-enospc-store-intact", "verify %d %s", r,
	     json_dumps(p, JSON_COMPACT));
	json_decref(p);
out:
	if (umount2(dir, MNT_DETACH) < 0)
		printf("# umount %s: %s\n", dir, strerror(errno));
	rmdir(dir);
	free(dir);
}

int main(void)
{
	test_crash();
	test_enospc();
	return T_DONE();
}
