/* Small helpers used everywhere.
 *
 * Error convention (the only one in warden): functions return 0 (or a
 * non-negative count) on success and -errno on failure; functions returning a
 * pointer return NULL and set errno. Where a caller needs a human message,
 * the function also takes a `struct wd_err *` (may be NULL) and fills it via
 * wd_err_set(), which returns the -errno it was given so callers can write
 *     return wd_err_set(err, -EINVAL, "bad thing %s", x);
 * Log once, at the boundary with the most context (the CLI verb, the daemon
 * request handler), not at every level.
 */
#ifndef WD_UTIL_H
#define WD_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define WD_MIN(a, b)	 ((a) < (b) ? (a) : (b))
#define WD_MAX(a, b)	 ((a) > (b) ? (a) : (b))

struct wd_err {
	int code;	/* -errno */
	char msg[1024]; /* "" when unset */
};

int wd_err_set(struct wd_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Scope cleanup (bubblewrap/crun style). */
static inline void wd_freep(void *p)
{
	free(*(void **)p);
}
static inline void wd_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void wd_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define cleanup_free   __attribute__((cleanup(wd_freep)))
#define cleanup_close  __attribute__((cleanup(wd_closep)))
#define cleanup_fclose __attribute__((cleanup(wd_fclosep)))

/* Transfer ownership out of a cleanup-scoped variable. */
#define steal_pointer(pp)                                                      \
	({                                                                     \
		__typeof__(*(pp)) _p = *(pp);                                  \
		*(pp) = NULL;                                                  \
		_p;                                                            \
	})
#define steal_fd(fdp)                                                          \
	({                                                                     \
		int _fd = *(fdp);                                              \
		*(fdp) = -1;                                                   \
		_fd;                                                           \
	})

/* Allocation that cannot fail silently: aborts on OOM (as glib does). */
void *wd_malloc(size_t n);
void *wd_calloc(size_t n, size_t sz);
void *wd_realloc(void *p, size_t n);
char *wd_strdup(const char *s);
char *wd_strndup(const char *s, size_t n);
char *wd_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Bounded copy; returns -ENAMETOOLONG if truncated. */
int wd_strlcpy(char *dst, const char *src, size_t size);
/* A command-line number: decimal digits only, whole, in [min, max]: 0,
 * else -EINVAL (not a number: "", "12x", "-1", " 3") or -ERANGE. */
int wd_parse_uint(const char *s, unsigned long long min, unsigned long long max,
		  unsigned long long *out);

/* Files. All return 0 / -errno. */
int wd_read_file(const char *path, char **out, size_t *len);
/* A small file (a sysctl, a /proc value) in one read(2) into buf, NUL
 * terminated: its length, or -errno (-E2BIG when it fills buf). For
 * /proc/sys, where a read of n bytes makes the kernel allocate and zero
 * n + 1 (wd_read_file's 64 KiB reads cost ~20 us each there). */
ssize_t wd_read_small(const char *path, char *buf, size_t len);
int wd_write_file(const char *path, const char *data, size_t len, int mode);
int wd_write_str(const char *path, const char *s); /* sysfs/cgroupfs */
int wd_mkdir_p(const char *path, int mode);
int wd_rm_rf(const char *path);
int wd_write_all(int fd, const void *buf, size_t len);
/* The node's runtime state (call dirs, probe caches): $WARDEN_RUNTIME_DIR,
 * else /run/warden. */
const char *wd_runtime_dir(void);

/* Monotonic and wall clocks. */
uint64_t wd_now_ns(void); /* CLOCK_MONOTONIC */
/* crc32 (zlib) of len bytes: what the node's cache files carry to catch a
 * torn or damaged file (not a forged one: their owner and mode checks). */
uint32_t wd_crc32(const void *p, size_t len);
/* pthread_create on a stack of `stack` bytes (0: glibc's 8 MB), detached
 * or joinable: 0 or pthread_create's error. A small stack spares the
 * exiting thread handing back (madvise) a mostly untouched 8 MB. */
int wd_thread_start(pthread_t *t, size_t stack, bool detached,
		    void *(*fn)(void *), void *arg);
/* A short job on a thread of its own, started on a CPU other than the
 * caller's when the process may run on another: a new thread is queued on
 * its creator's CPU, and on our machines' kernel it waits there until the
 * creator blocks or its slice ends (measured: 1.9 ms for a creator that
 * keeps working; 75 us when placed on the idle other CPU), so a job meant
 * to run while the caller goes on ran after it instead. Once running, the
 * thread may run on any of the caller's CPUs again, and wd_aside_join
 * lets any of the joiner's take a job still waiting to start. A stack of
 * `stack` bytes (0: glibc's). 0 or pthread_create's (positive) error, as
 * wd_thread_start; *a is read by the thread as it starts: it stays where
 * it is until wd_aside_join, called exactly once for a started job. */
struct wd_aside {
	pthread_t t;
	int started;	/* set by the thread as it starts */
	cpu_set_t cpus; /* the caller's CPUs; empty: not placed aside */
	void *(*fn)(void *);
	void *arg;
};
int wd_aside_start(struct wd_aside *a, size_t stack, void *(*fn)(void *),
		   void *arg);
/* pthread_join; the job's return value */
void *wd_aside_join(struct wd_aside *a);
uint64_t wd_wall_ns(void); /* CLOCK_REALTIME */
void wd_iso8601(uint64_t wall_ns, char *buf, size_t len);

/* Random hex id, e.g. for run and call ids. */
void wd_rand_hex(char *buf, size_t nbytes_hex);

/* A growable byte buffer. */
struct wd_buf {
	char *data;
	size_t len, cap;
};
void wd_buf_append(struct wd_buf *b, const void *p, size_t n);
void wd_buf_printf(struct wd_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void wd_buf_free(struct wd_buf *b);
/* Room for n more bytes (and the NUL): where to write them; then
 * wd_buf_end() with the end of what was written. */
char *wd_buf_room(struct wd_buf *b, size_t n);
void wd_buf_end(struct wd_buf *b, char *end);

#endif
