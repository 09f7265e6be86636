/* The typed append path makes no heap allocation per record once warm
 * (trace/recw.h: "no allocation per record once it has grown"): a store
 * without extra patterns, ~1 KB model_call records built and appended as
 * tests/bench/bench_trace.c appends them (a new run every 20 steps, plain
 * strings), 200 to warm up, then the allocations the appending thread makes
 * over the next 1000 are counted. The store's own threads (writer, index)
 * may allocate; only this thread's calls count. What the appending thread
 * may still allocate is the store's pending batch growing (two buffers,
 * swapped with the writer, kept at the largest batch seen): with a fixed
 * batch size that is none (asserted 0); with the default commit window,
 * where batch sizes follow the writer's timing, a few dozen doublings at
 * most (asserted under one per 10 records).
 *
 * Counting: malloc, calloc, realloc, posix_memalign, aligned_alloc and
 * memalign are defined here over glibc's __libc_* entry points (the
 * binary's definitions interpose the libraries' calls too), each adding one
 * to a per-thread counter. Under a sanitizer, whose runtime owns those
 * names, the runtime's allocation hook counts instead. */
#include "t.h"
#include "common/util.h"
#include "recw_model_call.h"
#include "trace/recw.h"
#include "trace/trace.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* volatile: a compiler may assume malloc() leaves the program's own
 * variables alone (clang does) */
static __thread volatile uint64_t n_alloc;

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WD_SAN_HOOK 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WD_SAN_HOOK 1
#endif

#ifdef WD_SAN_HOOK
#include <sanitizer/allocator_interface.h>

static void on_malloc(const volatile void *p, size_t n)
{
	(void)p;
	(void)n;
	n_alloc++;
}

static void on_free(const volatile void *p)
{
	(void)p;
}

static void count_init(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t k, size_t n);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t a, size_t n);

void *malloc(size_t n)
{
	n_alloc++;
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	n_alloc++;
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	n_alloc++;
	return __libc_realloc(p, n);
}

void *memalign(size_t a, size_t n)
{
	n_alloc++;
	return __libc_memalign(a, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	n_alloc++;
	return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	if (a < sizeof(void *) || (a & (a - 1)))
		return EINVAL;
	n_alloc++;
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static void count_init(void)
{
}
#endif

static char text[800];

/* as bench_trace.c's append_typed: a new run every 20 steps */
static int append_typed(struct wd_trace *t, uint64_t i, struct wd_err *err)
{
	char run[40], ph[WD_TRACE_REF_LEN];
	snprintf(run, sizeof(run), "run-0-%06llu",
		 (unsigned long long)(i / 20));
	uint64_t pn = i * 2654435761u % 1000;
	wd_trace_ref_of(&pn, sizeof(pn), ph);
	return wd_test_append_model_call(t, run, (int64_t)(i % 20), ph, text,
					 err);
}

/* Appends records [from, to) in rounds of `round` (0: one round), each
 * followed by a flush; the allocations the appends (not the flushes) made
 * on this thread. */
static uint64_t appends(struct wd_trace *t, uint64_t from, uint64_t to,
			uint64_t round, int *bad, struct wd_err *err)
{
	uint64_t made = 0;
	for (uint64_t i = from; i < to && !*bad; i++) {
		uint64_t b = n_alloc;
		*bad = append_typed(t, i, err) < 0;
		made += n_alloc - b;
		if (round && (i + 1 - from) % round == 0 && !*bad)
			*bad = wd_trace_flush(t, err) < 0;
	}
	return made;
}

int main(void)
{
	count_init();
	for (size_t k = 0; k < sizeof(text) - 1; k++)
		text[k] = "abcdefghij klmnopqrstuvwxyz.,"[k * 7 % 29];
	text[sizeof(text) - 1] = 0;

	/* the counter sees this thread's calls */
	uint64_t a0 = n_alloc;
	void *volatile p = malloc(16); /* volatile: not elided */
	uint64_t a1 = n_alloc;
	free(p);
	T_OK(a1 == a0 + 1, "recw alloc counter counts",
	     "%llu allocations for one malloc", (unsigned long long)(a1 - a0));

	/* Steady state, made deterministic: the store's pending batch (two
	 * buffers, swapped with the writer) grows to the largest batch seen
	 * and is kept. A commit window far longer than the test and a flush
	 * every 100 records make every batch exactly 100 records (~130 KB,
	 * far under the 1 MiB that writes at once), so two warm-up rounds
	 * size both buffers and the next 1000 records need nothing new. */
	char da[] = "/tmp/wd-recw-alloc-a.XXXXXX";
	char db[] = "/tmp/wd-recw-alloc-b.XXXXXX";
	struct wd_trace *t;
	struct wd_err err = {0};
	struct wd_trace_opts o = {.commit_us = 60u * 1000 * 1000};
	if (!mkdtemp(da) || wd_trace_open(da, &o, &t, &err)) {
		T_FAIL("recw alloc open", "%s", err.msg);
		return T_DONE();
	}
	int bad = 0;
	appends(t, 0, 200, 100, &bad, &err);
	uint64_t made = appends(t, 200, 1200, 100, &bad, &err);
	T_OK(!bad, "recw alloc appends", "%s", err.msg);
	T_OK(made == 0,
	     "recw typed append makes no allocation per record once warm",
	     "%llu allocations by the appending thread over 1000 appends",
	     (unsigned long long)made);
	wd_trace_close(t);
	wd_rm_rf(da);

	/* The default commit window: batch sizes follow the writer's timing,
	 * and a batch larger than any before grows its buffers (doubling:
	 * at most ~26 reallocations for each of the two batches up to 1000
	 * records). Fewer than one allocation per 10 records: none per
	 * record. */
	struct wd_trace_opts od = {0};
	if (!mkdtemp(db) || wd_trace_open(db, &od, &t, &err)) {
		T_FAIL("recw alloc open default", "%s", err.msg);
		return T_DONE();
	}
	bad = 0;
	appends(t, 0, 200, 0, &bad, &err);
	made = appends(t, 200, 1200, 0, &bad, &err);
	T_OK(!bad, "recw alloc appends default window", "%s", err.msg);
	T_OK(made < 100, "recw typed append, default window: batch growth only",
	     "%llu allocations by the appending thread over 1000 appends",
	     (unsigned long long)made);
	wd_trace_close(t);
	wd_rm_rf(db);
	return T_DONE();
}
