#include "events/landlock_audit.h"
#include "enforce/probe.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define DOM_CACHE 64
#define HELD_MAX  32
#define RBUF	  (1 << 16)
/* idle readers kept for the next calls (wd_landlock_audit_close) */
#define POOL_MAX 4
/* an AUDIT_GET that said "on" is trusted this long (ns) */
#define ENABLED_TTL_NS 1000000000ull

struct dom_info {
	uint64_t id;
	int32_t pid;
	uint32_t uid;
};

struct wd_landlock_audit {
	int fd;		  /* multicast reader */
	int prev_enabled; /* -1: not changed by us */
	uint64_t lost;
	struct dom_info dom[DOM_CACHE];
	int dom_next;
	/* the access record waiting for the rest of its event */
	bool pending;
	uint64_t pending_serial;
	struct wd_event pev;
	/* complete events whose task is still unknown: no SYSCALL record
	 * (the task has no audit context) and the domain's allocation record
	 * not read yet (it follows the first denial under its own serial) */
	struct wd_event held[HELD_MAX];
	int n_held;
	/* wd_landlock_audit_barrier: the token of the user record sent */
	char token[96];
	int token_len;
	bool token_seen;
	int token_err; /* the kernel refused the record (NLMSG_ERROR) */
	char *buf;     /* RBUF bytes: one per reader, concurrent calls */
};

/* Readers whose call ended, kept bound for the next calls: a call's
 * socket, bind, 4 MB buffer and AUDIT_GET round trip (which the kernel
 * answers from a kernel thread it starts for the reply) cost ~0.2 ms. An
 * idle reader's queue fills with whatever the node logs meanwhile; it is
 * emptied (nothing in it can be the next call's: that call has no
 * process yet) when the reader is taken again. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wd_landlock_audit *pool[POOL_MAX];
static int n_pool;
/* CLOCK_MONOTONIC until which audit is known to be on (0: ask) */
static uint64_t enabled_until;

/* Keys whose values the kernel writes with audit_log_untrustedstring()
 * (kernel/audit.c): quoted, or hex when the string holds a quote, a space,
 * a control byte or a byte >= 0x7f. Every other value is printed bare by a
 * "%d"/"%u"/"%llx" format and must be taken as is: "pid=5347" is a number,
 * not the two bytes 0x53 0x47. */
static bool untrusted_key(const char *k)
{
	static const char *const keys[] = {"path",	"name", "exe",
					   "comm",	"dev",	"cwd",
					   "proctitle", "key",	"data"};
	for (size_t i = 0; i < WD_ARRAY_SIZE(keys); i++)
		if (!strcmp(k, keys[i]))
			return true;
	return false;
}

int wd_audit_field(const char *text, size_t len, const char *k, char *buf,
		   size_t buflen)
{
	size_t kl = strlen(k);
	if (!buflen)
		return -EINVAL;
	for (size_t i = 0; i + kl < len; i++) {
		if ((i && text[i - 1] != ' ') || memcmp(text + i, k, kl) ||
		    text[i + kl] != '=')
			continue;
		const char *v = text + i + kl + 1, *end = text + len;
		size_t o = 0;
		if (v < end && *v == '"') {
			for (v++; v < end && *v != '"' && o + 1 < buflen; v++)
				buf[o++] = *v;
		} else {
			const char *e = v;
			while (e < end && *e != ' ' && *e != '\n' && *e)
				e++;
			/* untrusted strings with odd bytes are hex-encoded */
			bool hex =
			    untrusted_key(k) && (e - v) % 2 == 0 && e > v;
			for (const char *p = v; hex && p < e; p++)
				hex = (*p >= '0' && *p <= '9') ||
				      (*p >= 'A' && *p <= 'F');
			if (hex) {
				for (const char *p = v; p < e && o + 1 < buflen;
				     p += 2) {
					char h[3] = {p[0], p[1], 0};
					char c = (char)strtol(h, NULL, 16);
					buf[o++] = c ? c : '?';
				}
			} else {
				for (; v < e && o + 1 < buflen; v++)
					buf[o++] = *v;
			}
		}
		buf[o] = 0;
		return 0;
	}
	return -ENOENT;
}

static int parse_stamp(const char *text, size_t len, uint64_t *ts_ns,
		       uint64_t *serial)
{
	unsigned long long s, ms, ser;
	char tmp[64];
	size_t n = WD_MIN(len, sizeof(tmp) - 1);
	memcpy(tmp, text, n);
	tmp[n] = 0;
	if (sscanf(tmp, "audit(%llu.%llu:%llu)", &s, &ms, &ser) != 3)
		return -EINVAL;
	if (ts_ns)
		*ts_ns = s * 1000000000ull + ms * 1000000ull;
	if (serial)
		*serial = ser;
	return 0;
}

int wd_landlock_audit_parse(int type, const char *text, size_t len,
			    struct wd_event *out, uint64_t *serial)
{
	uint64_t ts, ser;
	if (parse_stamp(text, len, &ts, &ser))
		return -EINVAL;
	if (serial)
		*serial = ser;
	if (type != AUDIT_LANDLOCK_ACCESS)
		return 0;
	char dom[32], blockers[128], path[256];
	if (wd_audit_field(text, len, "domain", dom, sizeof(dom)) ||
	    wd_audit_field(text, len, "blockers", blockers, sizeof(blockers)))
		return -EINVAL;
	char *end;
	errno = 0;
	uint64_t id = strtoull(dom, &end, 16);
	if (errno || *end || end == dom)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->ts_ns = ts;
	out->source = WD_SRC_LANDLOCK;
	out->domain_id = id;
	out->syscall_nr = -1;
	out->step = -1;
	out->err = EACCES;
	out->verdict = WD_VERDICT_DENIED;
	/* kind: the first blocker ("fs.read_file,fs.write_file" ->
	 * "fs.read_file"); target: the object, else the blockers */
	char *comma = strchr(blockers, ',');
	size_t kl = comma ? (size_t)(comma - blockers) : strlen(blockers);
	snprintf(out->kind, sizeof(out->kind), "%.*s", (int)kl, blockers);
	if (!wd_audit_field(text, len, "path", path, sizeof(path)) ||
	    !wd_audit_field(text, len, "name", path, sizeof(path)))
		wd_strlcpy(out->target, path, sizeof(out->target));
	else if (!wd_audit_field(text, len, "opid", dom, sizeof(dom)))
		/* scope.signal: the task signalled (LSM_AUDIT_DATA_TASK
		 * writes "opid=N ocomm=..."), as BPF LSM kill records say */
		snprintf(out->target, sizeof(out->target), "pid %s", dom);
	else if (!wd_audit_field(text, len, "daddr", dom, sizeof(dom))) {
		char port[16] = "";
		wd_audit_field(text, len, "dest", port, sizeof(port));
		snprintf(out->target, sizeof(out->target), "%s:%s", dom, port);
	} else
		wd_strlcpy(out->target, blockers, sizeof(out->target));
	return 1;
}

static int nl_send(int fd, int type, const void *data, size_t len)
{
	struct {
		struct nlmsghdr h;
		char buf[512];
	} m = {0};
	if (len > sizeof(m.buf))
		return -EINVAL;
	m.h.nlmsg_len = NLMSG_LENGTH(len);
	m.h.nlmsg_type = type;
	m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	m.h.nlmsg_seq = 1;
	if (len) /* memcpy from NULL is undefined, even of 0 bytes */
		memcpy(NLMSG_DATA(&m.h), data, len);
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (sendto(fd, &m, m.h.nlmsg_len, 0, (void *)&k, sizeof(k)) < 0)
		return -errno;
	return 0;
}

/* AUDIT_GET -> status.enabled, or -errno. */
static int audit_get_enabled(int fd)
{
	int rc = nl_send(fd, AUDIT_GET, NULL, 0);
	if (rc)
		return rc;
	for (int tries = 0; tries < 4; tries++) {
		char buf[8192];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return -errno;
		int left = (int)n;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error)
					return e->error;
				continue;
			}
			if (h->nlmsg_type == AUDIT_GET &&
			    h->nlmsg_len >=
				NLMSG_LENGTH(
				    offsetof(struct audit_status, enabled) +
				    sizeof(uint32_t))) {
				struct audit_status *st = NLMSG_DATA(h);
				return (int)st->enabled;
			}
		}
	}
	return -EIO;
}

static int audit_set_enabled(int fd, uint32_t on)
{
	/* the answer one-shot calls share (enforce/probe.h) is about to be
	 * wrong: gone first, whether the kernel takes the change or not */
	wd_probe_audit_memo_forget();
	struct audit_status st = {0};
	st.mask = AUDIT_STATUS_ENABLED;
	st.enabled = on;
	int rc = nl_send(fd, AUDIT_SET, &st, sizeof(st));
	if (rc)
		return rc;
	char buf[1024];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	struct nlmsghdr *h = (void *)buf;
	if (NLMSG_OK(h, (int)n) && h->nlmsg_type == NLMSG_ERROR)
		return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return 0;
}

static int with_ctl(int (*fn)(int fd, uint32_t v), uint32_t v)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	if (fd < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = fn(fd, v);
	close(fd);
	return rc;
}

static int get_wrap(int fd, uint32_t v)
{
	(void)v;
	return audit_get_enabled(fd);
}

static void reader_free(struct wd_landlock_audit *a);

/* Empty a pooled reader for its next call. */
static void reader_reset(struct wd_landlock_audit *a)
{
	for (;;) {
		ssize_t n = recv(a->fd, a->buf, RBUF, MSG_DONTWAIT);
		if (n < 0 && errno != EINTR && errno != ENOBUFS)
			break;
	}
	a->lost = 0;
	a->pending = false;
	a->n_held = 0;
	a->prev_enabled = -1;
	a->token_len = 0;
	a->token_seen = false;
	a->token_err = 0;
	/* the domain cache stays: domain ids are never reused */
}

int wd_landlock_audit_open(struct wd_landlock_audit **out, bool enable_audit,
			   struct wd_err *err)
{
	*out = NULL;
	/* A pooled reader while audit is known to be on. Asked to enable it
	 * (WARDEN_LANDLOCK_AUDIT=enable), ask the kernel all the same. */
	struct wd_landlock_audit *pa = NULL;
	pthread_mutex_lock(&pool_mu);
	if (n_pool)
		pa = pool[--n_pool];
	bool known_on =
	    wd_now_ns() < __atomic_load_n(&enabled_until, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&pool_mu);
	if (pa) {
		reader_reset(pa);
		int en = known_on && !enable_audit ? 1 : with_ctl(get_wrap, 0);
		if (en == 1) {
			if (!known_on)
				__atomic_store_n(&enabled_until,
						 wd_now_ns() + ENABLED_TTL_NS,
						 __ATOMIC_RELAXED);
			*out = pa;
			return 0;
		}
		/* off, or cannot ask: the full path below says which */
		reader_free(pa);
	}
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_AUDIT);
	if (fd < 0)
		return wd_err_set(err, -errno,
				  "landlock audit: netlink audit socket: %s",
				  strerror(errno));
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1)};
	if (bind(fd, (void *)&sa, sizeof(sa))) {
		int rc = -errno;
		close(fd);
		return wd_err_set(err, rc,
				  "landlock audit: bind AUDIT_NLGRP_READLOG: "
				  "%s (needs CAP_AUDIT_READ)",
				  strerror(-rc));
	}
	int sz = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	struct wd_landlock_audit *a = wd_calloc(1, sizeof(*a));
	a->fd = fd;
	a->prev_enabled = -1;
	a->buf = wd_malloc(RBUF);
	int en = known_on && !enable_audit ? 1 : with_ctl(get_wrap, 0);
	if (en < 0) {
		wd_landlock_audit_close(a);
		return wd_err_set(err, en, "landlock audit: AUDIT_GET: %s",
				  strerror(-en));
	}
	if (en == 0) {
		if (!enable_audit) {
			wd_landlock_audit_close(a);
			return wd_err_set(err, -ENODATA,
					  "landlock audit: audit is disabled "
					  "on this node: no Landlock records");
		}
		int rc = with_ctl(audit_set_enabled, 1);
		if (rc) {
			wd_landlock_audit_close(a);
			return wd_err_set(err, rc,
					  "landlock audit: AUDIT_SET "
					  "enabled=1: %s",
					  strerror(-rc));
		}
		a->prev_enabled = 0;
	}
	/* on now (it was, or we turned it on) */
	__atomic_store_n(&enabled_until, wd_now_ns() + ENABLED_TTL_NS,
			 __ATOMIC_RELAXED);
	*out = a;
	return 0;
}

void wd_landlock_audit_known_on(uint64_t at_ns)
{
	uint64_t until = at_ns + ENABLED_TTL_NS;
	pthread_mutex_lock(&pool_mu);
	if (until > __atomic_load_n(&enabled_until, __ATOMIC_RELAXED))
		__atomic_store_n(&enabled_until, until, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&pool_mu);
}

int wd_landlock_audit_fd(struct wd_landlock_audit *a)
{
	return a->fd;
}

uint64_t wd_landlock_audit_lost(struct wd_landlock_audit *a)
{
	return a->lost;
}

static uint64_t lost_total;

uint64_t wd_landlock_audit_lost_total(void)
{
	return __atomic_load_n(&lost_total, __ATOMIC_RELAXED);
}

void wd_landlock_audit_keep_enabled(struct wd_landlock_audit *a)
{
	a->prev_enabled = -1;
}

typedef void (*ev_cb)(const struct wd_event *ev, void *arg);

static const struct dom_info *dom_find(struct wd_landlock_audit *a, uint64_t id)
{
	for (int i = 0; id && i < DOM_CACHE; i++)
		if (a->dom[i].id == id)
			return &a->dom[i];
	return NULL;
}

int wd_landlock_audit_domain_creator(struct wd_landlock_audit *a,
				     uint64_t domain_id)
{
	const struct dom_info *d = dom_find(a, domain_id);
	return d ? d->pid : 0;
}

static void deliver(struct wd_event *ev, const struct dom_info *d, ev_cb cb,
		    void *arg, int *n)
{
	if (!ev->pid && d) {
		ev->pid = d->pid;
		ev->uid = d->uid;
	}
	cb(ev, arg);
	(*n)++;
}

/* The pending access record's event is complete (its EOE, or a record of
 * another event, came): deliver it, or hold it while nothing says which
 * task it was. */
static void complete(struct wd_landlock_audit *a, ev_cb cb, void *arg, int *n)
{
	if (!a->pending)
		return;
	a->pending = false;
	const struct dom_info *d = dom_find(a, a->pev.domain_id);
	if (a->pev.pid || d) {
		deliver(&a->pev, d, cb, arg, n);
		return;
	}
	if (a->n_held == HELD_MAX) { /* bounded: the oldest goes as it is */
		deliver(&a->held[0], NULL, cb, arg, n);
		memmove(a->held, a->held + 1, --a->n_held * sizeof(a->held[0]));
	}
	a->held[a->n_held++] = a->pev;
}

/* A domain's allocation record came: release the events it resolves. */
static void release(struct wd_landlock_audit *a, uint64_t id, ev_cb cb,
		    void *arg, int *n)
{
	const struct dom_info *d = dom_find(a, id);
	int k = 0;
	for (int i = 0; i < a->n_held; i++) {
		if (d && a->held[i].domain_id == id)
			deliver(&a->held[i], d, cb, arg, n);
		else
			a->held[k++] = a->held[i];
	}
	a->n_held = k;
}

static uint64_t dom_remember(struct wd_landlock_audit *a, const char *text,
			     size_t len)
{
	char v[32];
	if (wd_audit_field(text, len, "status", v, sizeof(v)) ||
	    strcmp(v, "allocated") ||
	    wd_audit_field(text, len, "domain", v, sizeof(v)))
		return 0;
	struct dom_info d = {.id = strtoull(v, NULL, 16)};
	if (!wd_audit_field(text, len, "pid", v, sizeof(v)))
		d.pid = atoi(v);
	if (!wd_audit_field(text, len, "uid", v, sizeof(v)))
		d.uid = (uint32_t)strtoul(v, NULL, 10);
	a->dom[a->dom_next++ % DOM_CACHE] = d;
	return d.id;
}

int wd_landlock_audit_feed(struct wd_landlock_audit *a, int type, const char *t,
			   size_t tl, ev_cb cb, void *arg)
{
	int delivered = 0;
	uint64_t ser = 0;
	struct wd_event ev;
	int r = wd_landlock_audit_parse(type, t, tl, &ev, &ser);
	if (r < 0)
		return 0;
	/* Remembered before the pending event is completed: without an
	 * audit context the domain record has a serial of its own, just
	 * after the access record's (landlock_log_denial() ->
	 * log_domain()). */
	uint64_t dom = 0;
	if (type == AUDIT_LANDLOCK_DOMAIN)
		dom = dom_remember(a, t, tl);
	if (a->pending && ser != a->pending_serial)
		complete(a, cb, arg, &delivered);
	if (dom)
		release(a, dom, cb, arg, &delivered);
	if (r == 1) {
		a->pev = ev;
		a->pending = true;
		a->pending_serial = ser;
		return delivered;
	}
	if (a->pending && type == AUDIT_SYSCALL) {
		char v[32];
		if (!wd_audit_field(t, tl, "pid", v, sizeof(v)))
			a->pev.pid = atoi(v);
		if (!wd_audit_field(t, tl, "uid", v, sizeof(v)))
			a->pev.uid = strtoul(v, NULL, 10);
		/* number and name, from libseccomp's table for the
		 * record's own arch (AUDIT_ARCH_* == SCMP_ARCH_*): the same
		 * names seccomp records carry */
		if (!wd_audit_field(t, tl, "syscall", v, sizeof(v))) {
			int nr = atoi(v);
			uint32_t arch = 0;
			if (!wd_audit_field(t, tl, "arch", v, sizeof(v)))
				arch = (uint32_t)strtoul(v, NULL, 16);
			if (nr >= 0)
				wd_event_set_syscall(&a->pev, arch, nr);
		}
		if (!wd_audit_field(t, tl, "exit", v, sizeof(v)) && atoi(v) < 0)
			a->pev.err = -atoi(v);
	}
	if (type == AUDIT_EOE)
		complete(a, cb, arg, &delivered);
	return delivered;
}

/* The barrier's own user record, or the kernel's refusal of it. */
static void see_token(struct wd_landlock_audit *a, const struct nlmsghdr *h)
{
	if (h->nlmsg_type == NLMSG_ERROR &&
	    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
		const struct nlmsgerr *e = NLMSG_DATA(h);
		if (e->error && e->msg.nlmsg_type == AUDIT_USER)
			a->token_err = e->error;
		return;
	}
	if (h->nlmsg_type == AUDIT_USER &&
	    memmem(NLMSG_DATA(h), h->nlmsg_len - NLMSG_HDRLEN, a->token,
		   a->token_len))
		a->token_seen = true;
}

int wd_landlock_audit_read(struct wd_landlock_audit *a, ev_cb cb, void *arg)
{
	int delivered = 0;
	char *buf = a->buf;
	for (;;) {
		ssize_t n = recv(a->fd, buf, RBUF, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == ENOBUFS) { /* queue overflowed */
				a->lost++;
				__atomic_add_fetch(&lost_total, 1,
						   __ATOMIC_RELAXED);
				continue;
			}
			if (errno == EINTR)
				continue;
			break;
		}
		int left = (int)n; /* NLMSG_OK needs a signed length */
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (a->token_len && !a->token_seen)
				see_token(a, h);
			delivered += wd_landlock_audit_feed(
			    a, h->nlmsg_type, NLMSG_DATA(h),
			    h->nlmsg_len - NLMSG_HDRLEN, cb, arg);
		}
	}
	/* An access record whose event is still open stays pending: kauditd
	 * multicasts each record on its own, so a drain can end between the
	 * access record and the domain/SYSCALL records of its event (the
	 * SYSCALL record is written at syscall exit). Delivered when the
	 * event ends, or by wd_landlock_audit_flush(). */
	return delivered;
}

int wd_landlock_audit_flush(struct wd_landlock_audit *a, ev_cb cb, void *arg)
{
	int delivered = 0;
	complete(a, cb, arg, &delivered);
	for (int i = 0; i < a->n_held; i++)
		deliver(&a->held[i], NULL, cb, arg, &delivered);
	a->n_held = 0;
	return delivered;
}

int wd_landlock_audit_barrier(struct wd_landlock_audit *a, const char *tag,
			      int timeout_ms, ev_cb cb, void *arg)
{
	a->token_len =
	    snprintf(a->token, sizeof(a->token), "warden-drain %s %016llx", tag,
		     (unsigned long long)wd_now_ns());
	if (a->token_len <= 0 || a->token_len >= (int)sizeof(a->token))
		return -EINVAL;
	a->token_seen = false;
	a->token_err = 0;
	struct {
		struct nlmsghdr h;
		char text[96];
	} m = {.h = {.nlmsg_len = NLMSG_LENGTH(a->token_len + 1),
		     .nlmsg_type = AUDIT_USER,
		     .nlmsg_flags = NLM_F_REQUEST}};
	memcpy(m.text, a->token, a->token_len); /* and its NUL */
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	int rc = 0;
	if (sendto(a->fd, &m, m.h.nlmsg_len, 0, (void *)&k, sizeof(k)) < 0)
		rc = -errno;
	uint64_t until = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (!rc) {
		wd_landlock_audit_read(a, cb, arg);
		if (a->token_seen)
			break;
		if (a->token_err) {
			rc = a->token_err;
			break;
		}
		uint64_t now = wd_now_ns();
		if (now >= until) {
			rc = -ETIMEDOUT;
			break;
		}
		struct pollfd pf = {a->fd, POLLIN, 0};
		poll(&pf, 1, (int)((until - now) / 1000000) + 1);
	}
	a->token_len = 0;
	/* audit switched off meanwhile drops user records: ask again */
	if (rc)
		__atomic_store_n(&enabled_until, 0, __ATOMIC_RELAXED);
	return rc;
}

static void reader_free(struct wd_landlock_audit *a)
{
	if (a->prev_enabled == 0)
		with_ctl(audit_set_enabled, 0);
	if (a->fd >= 0)
		close(a->fd);
	free(a->buf);
	free(a);
}

void wd_landlock_audit_close(struct wd_landlock_audit *a)
{
	if (!a)
		return;
	/* one that restores audit's state, or one with its queue overflowed
	 * (records lost), is not kept */
	if (a->prev_enabled != 0 && !a->lost) {
		pthread_mutex_lock(&pool_mu);
		if (n_pool < POOL_MAX) {
			pool[n_pool++] = a;
			a = NULL;
		}
		pthread_mutex_unlock(&pool_mu);
	}
	if (a)
		reader_free(a);
}

void wd_landlock_audit_pool_clear(void)
{
	pthread_mutex_lock(&pool_mu);
	while (n_pool)
		reader_free(pool[--n_pool]);
	__atomic_store_n(&enabled_until, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&pool_mu);
}

int wd_landlock_audit_pool_size(void)
{
	pthread_mutex_lock(&pool_mu);
	int n = n_pool;
	pthread_mutex_unlock(&pool_mu);
	return n;
}
