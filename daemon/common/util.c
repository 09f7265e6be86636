#include "common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

int wd_err_set(struct wd_err *err, int code, const char *fmt, ...)
{
	if (err) {
		/* through a copy: callers prefix a message with context and
		 * pass the old err->msg as an argument */
		char m[sizeof(err->msg)];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m, sizeof(m), fmt, ap);
		va_end(ap);
		memcpy(err->msg, m, sizeof(m));
		err->code = code;
	}
	return code;
}

static void oom(void)
{
	static const char m[] = "warden: out of memory\n";
	(void)!write(2, m, sizeof(m) - 1);
	abort();
}

void *wd_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *wd_calloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		oom();
	return p;
}

void *wd_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *wd_strdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		oom();
	return p;
}

char *wd_strndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

char *wd_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	va_start(ap, fmt);
	if (vasprintf(&p, fmt, ap) < 0)
		oom();
	va_end(ap);
	return p;
}

int wd_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	if (size == 0)
		return -ENAMETOOLONG;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = 0;
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

int wd_parse_uint(const char *s, unsigned long long min, unsigned long long max,
		  unsigned long long *out)
{
	unsigned long long v = 0;
	const char *p = s;
	/* no strtoull: it takes a sign, blanks and a prefix of garbage */
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (~0ULL - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (p == s || *p)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int wd_read_file(const char *path, char **out, size_t *len)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct wd_buf b = {0};
	char tmp[65536];
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, tmp, sizeof(tmp));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			wd_buf_free(&b);
			return e;
		}
		if (n == 0)
			break;
		wd_buf_append(&b, tmp, n);
	}
	wd_buf_append(&b, "", 1); /* NUL terminate */
	b.len--;
	*out = b.data;
	if (len)
		*len = b.len;
	return 0;
}

ssize_t wd_read_small(const char *path, char *buf, size_t len)
{
	if (len < 2)
		return -EINVAL;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n;
	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* a full buffer may be a cut value: never parse half of one */
	if ((size_t)n >= len)
		return -E2BIG;
	buf[n] = 0;
	return n;
}

const char *wd_runtime_dir(void)
{
	const char *d = getenv("WARDEN_RUNTIME_DIR");
	return d && *d ? d : "/run/warden";
}

int wd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int wd_write_file(const char *path, const char *data, size_t len, int mode)
{
	cleanup_close int fd =
	    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	return wd_write_all(fd, data, len);
}

int wd_write_str(const char *path, const char *s)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	if (n < 0)
		return -errno;
	return 0;
}

/* One component: made with exactly `mode` (not the umask's cut of it). A
 * directory that exists keeps its mode: it is not ours to change. */
static int mkdir_one(const char *p, int mode)
{
	if (mkdir(p, mode) < 0)
		return errno == EEXIST ? 0 : -errno;
	return chmod(p, mode) < 0 ? -errno : 0;
}

/* Parents are made 0755, whatever the leaf's mode: they are on the path
 * of other callers (a tier-3 call's private 0700 runsc root must not make
 * /run/warden untraversable for every tier-1 call after it; the test
 * exec_pristine.sh). */
int wd_mkdir_p(const char *path, int mode)
{
	char buf[4096];
	int r;
	if (wd_strlcpy(buf, path, sizeof(buf)) < 0)
		return -ENAMETOOLONG;
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = 0;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		r = mkdir_one(buf, 0755);
		*p = '/';
		if (r < 0)
			return r;
	}
	return mkdir_one(buf, mode);
}

uint64_t wd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t wd_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void wd_iso8601(uint64_t wall_ns, char *buf, size_t len)
{
	time_t s = wall_ns / 1000000000ull;
	struct tm tm;
	gmtime_r(&s, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec,
		 (unsigned)(wall_ns % 1000000000ull / 1000));
}

void wd_rand_hex(char *buf, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[64];
	size_t need = (n + 1) / 2;
	if (need > sizeof(r))
		need = sizeof(r);
	if (getrandom(r, need, 0) != (ssize_t)need)
		abort();
	for (size_t i = 0; i < n && i / 2 < need; i++)
		buf[i] = hex[(r[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
	buf[n] = 0;
}

char *wd_buf_room(struct wd_buf *b, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->data = wd_realloc(b->data, cap);
		b->cap = cap;
	}
	return b->data + b->len;
}

void wd_buf_end(struct wd_buf *b, char *end)
{
	b->len = (size_t)(end - b->data);
	b->data[b->len] = 0;
}

void wd_buf_append(struct wd_buf *b, const void *p, size_t n)
{
	char *to = wd_buf_room(b, n);
	memcpy(to, p, n);
	wd_buf_end(b, to + n);
}

void wd_buf_printf(struct wd_buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	wd_buf_append(b, s, n);
	free(s);
}

void wd_buf_free(struct wd_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

uint32_t wd_crc32(const void *p, size_t len)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)p,
			       (uInt)len);
}

/* pthread_create with a stack size, detached or not, and placed on cpus
 * (NULL: anywhere) */
static int thread_start(pthread_t *t, size_t stack, bool detached,
			const cpu_set_t *cpus, void *(*fn)(void *), void *arg)
{
	pthread_attr_t at;
	int e = pthread_attr_init(&at);
	if (e)
		return e;
	if ((stack && (e = pthread_attr_setstacksize(&at, stack))) ||
	    (detached &&
	     (e = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED))) ||
	    (cpus &&
	     (e = pthread_attr_setaffinity_np(&at, sizeof(*cpus), cpus))))
		goto out;
	e = pthread_create(t, &at, fn, arg);
out:
	pthread_attr_destroy(&at);
	return e;
}

int wd_thread_start(pthread_t *t, size_t stack, bool detached,
		    void *(*fn)(void *), void *arg)
{
	return thread_start(t, stack, detached, NULL, fn, arg);
}

static void *aside_main(void *arg)
{
	struct wd_aside *a = arg;
	__atomic_store_n(&a->started, 1, __ATOMIC_RELEASE);
	/* placed aside to start at once, not kept there: a job that blocks
	 * (a cgroup mkdir, an RCU wait) may wake on any CPU of the caller's */
	if (CPU_COUNT(&a->cpus))
		(void)sched_setaffinity(0, sizeof(a->cpus), &a->cpus);
	return a->fn(a->arg);
}

int wd_aside_start(struct wd_aside *a, size_t stack, void *(*fn)(void *),
		   void *arg)
{
	*a = (struct wd_aside){.fn = fn, .arg = arg};
	int me = sched_getcpu();
	if (me < 0 || sched_getaffinity(0, sizeof(a->cpus), &a->cpus) < 0 ||
	    CPU_COUNT(&a->cpus) < 2 || !CPU_ISSET(me, &a->cpus)) {
		CPU_ZERO(&a->cpus); /* no aside: nothing to give back */
		return thread_start(&a->t, stack, false, NULL, aside_main, a);
	}
	cpu_set_t other = a->cpus;
	CPU_CLR(me, &other);
	/* glibc places the new thread before its start routine runs */
	int e = thread_start(&a->t, stack, false, &other, aside_main, a);
	if (e == EINVAL) {
		/* the other CPUs went (a cpuset changed, a CPU offline)
		 * between our look and the thread's placement: a job is
		 * never refused for want of another CPU */
		CPU_ZERO(&a->cpus);
		e = thread_start(&a->t, stack, false, NULL, aside_main, a);
	}
	return e;
}

void *wd_aside_join(struct wd_aside *a)
{
	void *ret = NULL;
	cpu_set_t mine;
	/* still waiting for the other CPUs (busy): the joiner's, about to
	 * block in the join, may take it as well. Had it started and exited
	 * since we looked, glibc (its tid then 0) would set the joiner's own
	 * CPUs to the joiner's own CPUs: nothing changes. */
	if (CPU_COUNT(&a->cpus) &&
	    !__atomic_load_n(&a->started, __ATOMIC_ACQUIRE) &&
	    sched_getaffinity(0, sizeof(mine), &mine) == 0)
		(void)pthread_setaffinity_np(a->t, sizeof(mine), &mine);
	pthread_join(a->t, &ret);
	return ret;
}
