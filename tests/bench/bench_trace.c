/* Trace store figures (issue 5): appends/s with group commit (~1 KB
 * records), p50/p99 latency of a durable tool_attempt, time to find the runs
 * sharing a prompt hash among N records, bytes on disk per step against the
 * raw JSON. Prints figures; asserts nothing. The appends/s figure is printed
 * next to its peer measured in the same run: the same ~1 KB JSON lines
 * appended with plain write() and one fdatasync per batch of PEER_BATCH
 * lines, by the same number of threads, into one file on the same
 * filesystem (no framing, no chain, no index: the floor of the I/O).
 * Both append paths are measured, each in a store of its own: the JSON
 * path (wd_trace_append of a jansson record each thread reuses: the old
 * figure) and the typed path (trace/recw.h, each record built whole, as a
 * caller does), printed side by side as a ratio.
 *   bench_trace [DIR] [N_RECORDS] [noindex]
 *   (default: a temp dir, 1000000 records, with the index) */
#include "recw_model_call.h"
#include "trace/recw.h"
#include "trace/trace.h"
#include "trace/trace_int.h" /* wd_trace_iq_overflows */

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *loadavg(void)
{
	static char b[64];
	FILE *f = fopen("/proc/loadavg", "r");
	if (!f || !fgets(b, sizeof(b), f))
		snprintf(b, sizeof(b), "?\n");
	if (f)
		fclose(f);
	return b;
}

/* CPU seconds used so far by this process's thread named `name` (the
 * store's writer and index threads), from /proc/self/task/N/stat. */
static double task_cpu_s(const char *name)
{
	double sum = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long hz = sysconf(_SC_CLK_TCK);
	while (d && (e = readdir(d))) {
		char p[300], b[1024];
		snprintf(p, sizeof(p), "/proc/self/task/%s/stat", e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t n = fread(b, 1, sizeof(b) - 1, f);
		fclose(f);
		b[n] = 0;
		char *lp = strchr(b, '('), *rp = strrchr(b, ')');
		if (!lp || !rp || (size_t)(rp - lp - 1) != strlen(name) ||
		    strncmp(lp + 1, name, rp - lp - 1))
			continue;
		unsigned long ut = 0, st = 0;
		/* fields after ") ": state(3) ... utime(14) stime(15) */
		if (sscanf(rp + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
			   "%lu",
			   &ut, &st) == 2)
			sum += (double)(ut + st) / hz;
	}
	if (d)
		closedir(d);
	return sum;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t du(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return st.st_blocks * 512;
	uint64_t n = 0;
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = wd_asprintf("%s/%s", path, e->d_name);
		n += du(p);
		free(p);
	}
	if (d)
		closedir(d);
	return n;
}

struct job {
	struct wd_trace *t;
	int id;
	bool typed; /* trace/recw.h, each record built whole every time */
	uint64_t n, raw_bytes;
	unsigned nprompts;
	uint64_t cpu_ns; /* this thread's CPU time in wd_trace_append */
	double build_ns; /* CPU to build one record (not the store's) */
};

/* The hash of prompt n: a real sha256 (index keys spread like real ones,
 * not 56 shared leading zeros). */
static void prompt_hash(char ph[80], uint64_t n)
{
	char h[WD_TRACE_REF_LEN];
	wd_trace_ref_of(&n, sizeof(n), h);
	snprintf(ph, 80, "%s", h);
}

/* a realistic ~1 KB model_call record */
static json_t *mkrec(int thr, uint64_t i, unsigned nprompts)
{
	char run[40], ph[80], text[700];
	snprintf(run, sizeof(run), "run-%d-%06llu", thr,
		 (unsigned long long)(i / 20));
	prompt_hash(ph, i * 2654435761u % nprompts);
	for (size_t k = 0; k < sizeof(text) - 1; k++)
		text[k] = "abcdefghij klmnopqrstuvwxyz.,"[(i + k * 7) % 29];
	text[sizeof(text) - 1] = 0;
	return json_pack(
	    "{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:i, s:f, s:i, "
	    "s:{s:s, s:s}}",
	    "run_id", run, "step", (int)(i % 20), "type", "model_call",
	    "gen_ai.request.model", "claude-sonnet-4", "prompt_hash", ph,
	    "prompt_ref", ph, "gen_ai.usage.input_tokens", 6412,
	    "gen_ai.usage.output_tokens", 184, "cost_usd", 0.0231, "latency_ms",
	    1840, "response", "stop_reason", "tool_use", "text", text);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec c;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
	return c.tv_sec * 1000000000ull + c.tv_nsec;
}

/* The next record in a thread's stream, made from its previous one: run,
 * step and prompt hash change, the head fields the store added go. The
 * store does all its work on it again (redaction scans every string, the
 * encoder writes every member); only jansson's building of the ~700-byte
 * text is not repeated. */
static void next_rec(json_t *r, int thr, uint64_t i, unsigned nprompts)
{
	char run[40], ph[80];
	snprintf(run, sizeof(run), "run-%d-%06llu", thr,
		 (unsigned long long)(i / 20));
	prompt_hash(ph, i * 2654435761u % nprompts);
	json_object_del(r, "seq");
	json_object_del(r, "ts");
	json_object_del(r, "prev");
	json_object_set_new(r, "run_id", json_string(run));
	json_object_set_new(r, "step", json_integer((json_int_t)(i % 20)));
	json_object_set_new(r, "prompt_hash", json_string(ph));
	json_object_set_new(r, "prompt_ref", json_string(ph));
}

/* The same record through the typed encoder (trace/recw.h), built whole
 * for every append: the typed path's figure includes its building. */
static int append_typed(struct wd_trace *t, int thr, uint64_t i,
			unsigned nprompts, const char *text, struct wd_err *err)
{
	char run[40], ph[80];
	snprintf(run, sizeof(run), "run-%d-%06llu", thr,
		 (unsigned long long)(i / 20));
	prompt_hash(ph, i * 2654435761u % nprompts);
	return wd_test_append_model_call(t, run, (int64_t)(i % 20), ph, text,
					 err);
}

static void *appender(void *arg)
{
	struct job *j = arg;
	struct wd_err err = {0};
	if (j->typed) {
		json_t *r = mkrec(j->id, 0, j->nprompts);
		const char *text = json_string_value(
		    json_object_get(json_object_get(r, "response"), "text"));
		char *line = json_dumps(r, JSON_COMPACT);
		size_t rl = line ? strlen(line) + 1 : 0;
		free(line);
		uint64_t c0 = thread_cpu_ns();
		for (uint64_t i = 0; i < j->n; i++) {
			if (append_typed(j->t, j->id, i, j->nprompts, text,
					 &err) < 0) {
				fprintf(stderr, "append: %s\n", err.msg);
				break;
			}
			if (i % 64 == 0) /* raw size, sampled */
				j->raw_bytes += rl * 64;
		}
		j->cpu_ns = thread_cpu_ns() - c0;
		json_decref(r);
		return NULL;
	}
	/* what building a whole record costs (reported, not in the rate) */
	uint64_t c0 = thread_cpu_ns();
	for (uint64_t i = 0; i < 20000; i++)
		json_decref(mkrec(j->id, i, j->nprompts));
	j->build_ns = (thread_cpu_ns() - c0) / 20000.0;
	json_t *r = mkrec(j->id, 0, j->nprompts);
	c0 = thread_cpu_ns();
	for (uint64_t i = 0; i < j->n; i++) {
		next_rec(r, j->id, i, j->nprompts);
		if (wd_trace_append(j->t, r, false, NULL, &err) < 0) {
			fprintf(stderr, "append: %s\n", err.msg);
			break;
		}
		if (i % 64 == 0) { /* raw size, sampled */
			char *s = json_dumps(r, JSON_COMPACT);
			j->raw_bytes += (strlen(s) + 1) * 64;
			free(s);
		}
	}
	json_decref(r);
	j->cpu_ns = thread_cpu_ns() - c0;
	return NULL;
}

#define PEER_BATCH 256 /* lines per fdatasync in the peer */

struct peer_job {
	int fd, id;
	uint64_t n;
	unsigned nprompts;
	int err;
};

/* The peer: the same record stream as JSON lines, write() per line,
 * fdatasync per PEER_BATCH lines. Lines are rendered before the clock
 * starts (the peer pays no encoding, as the store pays its own). */
static void *peer_appender(void *arg)
{
	struct peer_job *j = arg;
	uint64_t nl = j->n < 20000 ? j->n : 20000;
	char **lines = calloc(nl, sizeof(char *));
	size_t *lens = calloc(nl, sizeof(size_t));
	json_t *r = mkrec(j->id, 0, j->nprompts);
	for (uint64_t i = 0; i < nl; i++) {
		next_rec(r, j->id, i, j->nprompts);
		char *s = json_dumps(r, JSON_COMPACT);
		lens[i] = strlen(s) + 1;
		lines[i] = realloc(s, lens[i]);
		lines[i][lens[i] - 1] = '\n';
	}
	json_decref(r);
	/* wait for the start signal (fd < 0 until then) */
	while (__atomic_load_n(&j->fd, __ATOMIC_ACQUIRE) < 0)
		;
	for (uint64_t i = 0; i < j->n && !j->err; i++) {
		if (write(j->fd, lines[i % nl], lens[i % nl]) !=
		    (ssize_t)lens[i % nl])
			j->err = errno ? errno : EIO;
		if (i % PEER_BATCH == PEER_BATCH - 1 && fdatasync(j->fd) < 0)
			j->err = errno;
	}
	if (!j->err && fdatasync(j->fd) < 0)
		j->err = errno;
	for (uint64_t i = 0; i < nl; i++)
		free(lines[i]);
	free(lines);
	free(lens);
	return NULL;
}

/* appends/s of the peer, or 0 on failure */
static double peer_rate(const char *dir, uint64_t total, int threads)
{
	char *path = wd_asprintf("%s/peer-plain-write.jsonl", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
		      0640);
	if (fd < 0) {
		free(path);
		return 0;
	}
	pthread_t th[8];
	struct peer_job jobs[8];
	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct peer_job){
		    .fd = -1, .id = i, .n = total / threads, .nprompts = 5000};
		pthread_create(&th[i], NULL, peer_appender, &jobs[i]);
	}
	usleep(300000); /* let the threads render their lines */
	uint64_t t0 = wd_now_ns();
	for (int i = 0; i < threads; i++)
		__atomic_store_n(&jobs[i].fd, fd, __ATOMIC_RELEASE);
	int err = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		err |= jobs[i].err;
	}
	uint64_t dt = wd_now_ns() - t0;
	close(fd);
	unlink(path);
	free(path);
	return err ? 0 : total / (dt / 1e9);
}

struct figs {
	double ret, dur, all;	    /* appends/s: returned, synced, indexed */
	double caller_us, proc_us;  /* CPU per append */
	double writer_us, index_us; /* the store's threads, per record */
	double build_us;	    /* building a jansson record */
	uint64_t raw;
};

/* One group-commit run into a store at dir: the JSON path or the typed
 * one. The store is closed unless keep (then left open there). */
static int phase(const char *dir, const struct wd_trace_opts *o, bool typed,
		 uint64_t total, int threads, struct figs *f,
		 struct wd_trace **keep)
{
	struct wd_trace *t;
	struct wd_err err = {0};
	if (wd_trace_open(dir, o, &t, &err) < 0) {
		fprintf(stderr, "bench_trace: open: %s\n", err.msg);
		return -1;
	}
	pthread_t th[8];
	struct job jobs[8];
	struct timespec p0, p1;
	unsigned long ov0 = wd_trace_iq_overflows;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
	uint64_t t0 = wd_now_ns();
	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct job){.t = t,
				       .id = i,
				       .typed = typed,
				       .n = total / threads,
				       .nprompts = 5000};
		pthread_create(&th[i], NULL, appender, &jobs[i]);
	}
	uint64_t cpu = 0;
	double build = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		f->raw += jobs[i].raw_bytes;
		cpu += jobs[i].cpu_ns;
		build += jobs[i].build_ns / threads;
	}
	uint64_t t_app = wd_now_ns() - t0;
	/* a durable append returns once it and everything before it is
	 * written and fdatasync'ed; the index may still be catching up */
	json_t *mark = json_pack("{s:s, s:i, s:s}", "run_id", "bench-mark",
				 "step", 0, "type", "flag");
	wd_trace_append(t, mark, true, NULL, &err);
	json_decref(mark);
	uint64_t t_dur = wd_now_ns() - t0;
	wd_trace_flush(t, &err);
	uint64_t t_all = wd_now_ns() - t0;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
	f->ret = total / (t_app / 1e9);
	f->dur = total / (t_dur / 1e9);
	f->all = total / (t_all / 1e9);
	f->caller_us = cpu / 1e3 / total;
	f->build_us = build / 1e3;
	f->proc_us = ((p1.tv_sec - p0.tv_sec) * 1e9 + p1.tv_nsec - p0.tv_nsec -
		      (typed ? 0 : 20000.0 * threads * build)) /
		     1e3 / total;
	f->writer_us = task_cpu_s("wd-trace-write") * 1e6 / total;
	f->index_us = task_cpu_s("wd-trace-index") * 1e6 / total;
	const char *name = typed ? "typed (recw)" : "JSON path";
	printf("%s: appends/s returned %.0f, incl. write+fdatasync %.0f, "
	       "incl. write+fdatasync+index %.0f (index caught up %.2f s "
	       "after the last append)\n",
	       name, f->ret, f->dur, f->all, (t_all - t_app) / 1e9);
	printf("%s: CPU per append %.2f us in the caller (%.0f appends/s per "
	       "core), %.2f us for the whole process; writer thread %.2f us, "
	       "index thread %.2f us (from /proc, 10 ms ticks); index queue "
	       "overflowed %lu times (then caught up from the segments); load "
	       "average now %s",
	       name, f->caller_us, total / (cpu / 1e9), f->proc_us,
	       f->writer_us, f->index_us, wd_trace_iq_overflows - ov0,
	       loadavg());
	if (keep)
		*keep = t;
	else
		wd_trace_close(t);
	return 0;
}

int main(int argc, char **argv)
{
	char tmpl[] = "/var/tmp/wd-bench-trace.XXXXXX";
	const char *dir = argc > 1 && *argv[1] ? argv[1] : mkdtemp(tmpl);
	uint64_t total = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	int threads = 2;
	/* "noindex": the append path alone, without the index thread
	 * competing for the CPU (the figures below that need the index are
	 * then meaningless) */
	struct wd_trace_opts o = {.no_index =
				      argc > 3 && !strcmp(argv[3], "noindex")};
	struct wd_trace *t;
	struct wd_err err = {0};
	if (!dir) {
		fprintf(stderr, "bench_trace: no directory\n");
		return 1;
	}
	printf("bench_trace: store %s/trace, %llu records of ~1 KB, %d "
	       "appender threads%s\n",
	       dir, (unsigned long long)total, threads,
	       o.no_index ? ", NO INDEX" : "");

	/* 1. group-commit throughput (until everything is on disk): the
	 * JSON path (each thread reuses its jansson record, as before the
	 * typed path) in a store of its own, then the typed path (each
	 * record built whole) in the store the rest of the bench reads */
	struct figs fj = {0}, ft = {0};
	char *jdir = wd_asprintf("%s/json-path", dir);
	mkdir(jdir, 0750);
	if (phase(jdir, &o, false, total, threads, &fj, NULL) < 0 ||
	    phase(dir, &o, true, total, threads, &ft, &t) < 0)
		return 1;
	wd_rm_rf(jdir);
	free(jdir);
	double warden_rate = ft.dur;

	/* the peer, in the same run, same filesystem, same threads */
	double peer = peer_rate(dir, total, threads);
	printf("\n%-44s %12s %12s %8s %s\n", "appends of ~1 KB JSON lines",
	       "warden", "peer", "ratio", "goal");
	if (peer > 0)
		printf("%-44s %10.0f/s %10.0f/s %7.2fx %s\n",
		       "group commit vs write()+fdatasync/256", warden_rate,
		       peer, warden_rate / peer, "goal >= 200k records/s");
	else
		printf("%-44s %10.0f/s %12s %8s %s\n",
		       "group commit vs write()+fdatasync/256", warden_rate,
		       "failed", "-", "goal >= 200k records/s");
	printf("%-44s %10.0f/s %10.0f/s %7.2fx %s\n",
	       "typed (recw) vs JSON path, fdatasync'ed", ft.dur, fj.dur,
	       ft.dur / fj.dur, "goal >= 200k records/s");
	printf("%-44s %10.0f/s %10.0f/s %7.2fx %s\n",
	       "typed vs JSON path, index caught up", ft.all, fj.all,
	       ft.all / fj.all, "goal >= 150k records/s");
	printf("%-44s %10.2fus %10.2fus %7.2fx %s\n",
	       "caller CPU per append (typed: incl. build)", ft.caller_us,
	       fj.caller_us, ft.caller_us / fj.caller_us,
	       "JSON path: + the jansson build below");
	printf("(warden: appends until written and fdatasync'ed, %d threads; "
	       "peer: %d threads, write() per line, fdatasync per %d lines, "
	       "one file; JSON path: wd_trace_append of a reused jansson "
	       "record, building one costs %.2f us more)\n\n",
	       threads, threads, PEER_BATCH, fj.build_us);

	/* 2. durable tool_attempt latency */
	enum { ND = 300 };
	uint64_t lat[ND];
	for (int i = 0; i < ND; i++) {
		json_t *r =
		    json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:{s:s}}",
			      "run_id", "durable-run", "step", i, "type",
			      "tool_attempt", "gen_ai.tool.name", "send_mail",
			      "gen_ai.tool.call.id", "call-1", "side_effects",
			      "external", "args", "to", "someone@example.com");
		uint64_t s = wd_now_ns();
		wd_trace_append(t, r, true, NULL, &err);
		lat[i] = wd_now_ns() - s;
		json_decref(r);
	}
	qsort(lat, ND, sizeof(lat[0]), cmp_u64);
	printf("durable tool_attempt latency: p50 %.3f ms, p99 %.3f ms "
	       "(fdatasync)\n",
	       lat[ND / 2] / 1e6, lat[ND * 99 / 100] / 1e6);

	/* 3. runs sharing a prompt hash */
	char ph[80];
	prompt_hash(ph, 1234);
	struct wd_trace_query q = {.prompt_hash = ph};
	json_t *a = NULL;
	uint64_t best = UINT64_MAX, s;
	for (int i = 0; i < 20; i++) {
		s = wd_now_ns();
		json_decref(a);
		wd_trace_query_runs(t, &q, &a, &err);
		s = wd_now_ns() - s;
		best = s < best ? s : best;
	}
	s = wd_now_ns();
	json_decref(a);
	wd_trace_query_runs(t, &q, &a, &err);
	s = wd_now_ns() - s;
	printf("runs sharing a prompt hash among %llu records: %zu runs in "
	       "%.3f ms (best of 20: %.3f ms)\n",
	       (unsigned long long)total, json_array_size(a), s / 1e6,
	       best / 1e6);
	json_decref(a);
	wd_trace_close(t);

	/* 4. bytes on disk */
	char *seg = wd_asprintf("%s/trace/segments", dir);
	char *idx = wd_asprintf("%s/trace/index.db", dir);
	char *wal = wd_asprintf("%s/trace/index.db-wal", dir);
	uint64_t dseg = du(seg), didx = du(idx) + du(wal);
	printf("bytes per step: raw JSON %.0f, segments %.0f (%.2fx), "
	       "index %.0f, total %.2fx raw\n",
	       (double)ft.raw / total, (double)dseg / total,
	       (double)dseg / ft.raw, (double)didx / total,
	       (double)(dseg + didx) / ft.raw);
	free(seg);
	free(idx);
	free(wal);
	if (dir == tmpl) /* a temporary store (no DIR given, or "") */
		wd_rm_rf(dir);
	return 0;
}
