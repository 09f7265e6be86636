/* wardend's accept loop and connection limits (see conn.h). */
#include "wardend/conn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

/* A refused socket is drained this long at most, and this many at once
 * (beyond that a refused socket is closed without its answer: a flood
 * must not turn the drain into a new way to hold descriptors). */
#define LINGER_NS  (1000ull * 1000000ull)
#define LINGER_MAX 4096u
/* MHD drops a connection it was handed without telling us only when it
 * cannot allocate its memory pool; a claim this late will not come. */
#define CLAIM_NS (10ull * 1000000000ull)
#define TICK_MS	 200

enum phase {
	P_WAIT, /* waiting for (the rest of) a request */
	P_RESP, /* the request is in: being handled, answered, or a stream */
};

struct conn {
	struct wd_gate *g;
	struct conn *prev, *next;
	int fd;
	uid_t uid;
	enum phase phase;
	bool claimed; /* MHD has it (NOTIFY_STARTED) */
	bool shut;    /* we shut it down; MHD will close it */
	uint64_t since_ns;
};

struct uid_count {
	uid_t uid;
	unsigned n;
};

struct slot {
	struct conn *pending;	  /* accepted, handed, not yet claimed */
	uint64_t linger_deadline; /* != 0: a refused socket being drained */
};

struct wd_gate {
	pthread_mutex_t mu;
	struct wd_api_limits lim;
	bool tcp; /* keyed by the client's IPv4 address, not a uid */
	int lfd, ep, wake;
	pthread_t thr;
	bool running;
	struct MHD_Daemon *d;
	struct slot *slots; /* by fd */
	size_t nslots;
	struct conn *head; /* every counted connection */
	struct uid_count *uids;
	size_t nuids, capuids;
	unsigned open, lingering;
	uint64_t accepted, refused_uid, refused_total, request_timeouts;
	uint64_t emfile_logged_ns;
};

static struct slot *slot_of(struct wd_gate *g, int fd)
{
	if ((size_t)fd >= g->nslots) {
		size_t n = g->nslots ? g->nslots : 1024;
		while (n <= (size_t)fd)
			n *= 2;
		g->slots = wd_realloc(g->slots, n * sizeof(*g->slots));
		memset(g->slots + g->nslots, 0,
		       (n - g->nslots) * sizeof(*g->slots));
		g->nslots = n;
	}
	return &g->slots[fd];
}

static struct uid_count *uid_find(struct wd_gate *g, uid_t uid, bool add)
{
	for (size_t i = 0; i < g->nuids; i++)
		if (g->uids[i].uid == uid)
			return &g->uids[i];
	if (!add)
		return NULL;
	if (g->nuids == g->capuids) {
		g->capuids = g->capuids ? g->capuids * 2 : 16;
		g->uids = wd_realloc(g->uids, g->capuids * sizeof(*g->uids));
	}
	g->uids[g->nuids] = (struct uid_count){.uid = uid};
	return &g->uids[g->nuids++];
}

/* Under g->mu. Forget a counted connection (it is MHD's to close). */
static void conn_release_locked(struct wd_gate *g, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		g->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	struct uid_count *u = uid_find(g, c->uid, false);
	if (u && u->n && --u->n == 0)
		*u = g->uids[--g->nuids]; /* keep the table as small as the
					     set of uids connected now */
	g->open--;
	if (!c->claimed && (size_t)c->fd < g->nslots &&
	    g->slots[c->fd].pending == c)
		g->slots[c->fd].pending = NULL;
	free(c);
}

int wd_gate_new(int lfd, const struct wd_api_limits *l, struct wd_gate **out,
		struct wd_err *err)
{
	struct wd_gate *g = wd_calloc(1, sizeof(*g));
	pthread_mutex_init(&g->mu, NULL);
	g->lim = *l;
	g->lfd = lfd;
	g->ep = epoll_create1(EPOLL_CLOEXEC);
	g->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int rc = 0;
	if (g->ep < 0 || g->wake < 0)
		rc = wd_err_set(err, -errno, "epoll/eventfd: %s",
				strerror(errno));
	else if (listen(lfd, (int)l->listen_backlog) < 0)
		rc = wd_err_set(err, -errno, "listen: %s", strerror(errno));
	else {
		struct epoll_event e = {.events = EPOLLIN, .data.fd = lfd};
		struct epoll_event w = {.events = EPOLLIN, .data.fd = g->wake};
		if (epoll_ctl(g->ep, EPOLL_CTL_ADD, lfd, &e) < 0 ||
		    epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake, &w) < 0)
			rc = wd_err_set(err, -errno, "epoll_ctl: %s",
					strerror(errno));
	}
	if (rc) {
		g->lfd = -1; /* the caller keeps it */
		wd_gate_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int wd_gate_new_tcp(int lfd, const struct wd_api_limits *l, unsigned per_addr,
		    unsigned max, struct wd_gate **out, struct wd_err *err)
{
	struct wd_api_limits tl = *l;
	tl.max_connections_per_uid = per_addr;
	tl.max_connections = max;
	int rc = wd_gate_new(lfd, &tl, out, err);
	if (!rc)
		(*out)->tcp = true;
	return rc;
}

void wd_gate_notify(void *cls, struct MHD_Connection *con,
		    void **socket_context,
		    enum MHD_ConnectionNotificationCode t)
{
	struct wd_gate *g = cls;
	if (t == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    con, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			return;
		pthread_mutex_lock(&g->mu);
		/* the fd is open (MHD closes it after NOTIFY_CLOSED), so the
		 * pending entry under its number is this connection's */
		struct slot *s = slot_of(g, ci->connect_fd);
		struct conn *c = s->pending;
		if (c) {
			s->pending = NULL;
			c->claimed = true;
			*socket_context = c;
		}
		pthread_mutex_unlock(&g->mu);
	} else if (t == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct conn *c = *socket_context;
		if (!c)
			return;
		*socket_context = NULL;
		pthread_mutex_lock(&g->mu);
		conn_release_locked(g, c);
		pthread_mutex_unlock(&g->mu);
	}
}

static struct conn *conn_of(struct MHD_Connection *con)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *con, enum phase p)
{
	struct conn *c = conn_of(con);
	if (!c)
		return; /* the TCP metrics listener: not gated */
	pthread_mutex_lock(&c->g->mu);
	c->phase = p;
	c->since_ns = wd_now_ns();
	pthread_mutex_unlock(&c->g->mu);
}

void wd_gate_request_begin(struct MHD_Connection *con)
{
	/* a handler that takes long (a reload, a cost query over a big
	 * store) must not be cut off by the deadline meant for the client */
	set_phase(con, P_RESP);
}

void wd_gate_request_answered(struct MHD_Connection *con)
{
	set_phase(con, P_RESP);
}

void wd_gate_request_done(struct MHD_Connection *con)
{
	set_phase(con, P_WAIT);
}

/* ---- refusing ------------------------------------------------------------ */

static void linger_close(struct wd_gate *g, int fd)
{
	epoll_ctl(g->ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	slot_of(g, fd)->linger_deadline = 0;
	g->lingering--;
}

/* Answer 503 with the reason and EOF, then drain what the client sends
 * (its request) until it closes or LINGER_NS pass: closing with unread
 * data would reset the connection and lose the answer. Under g->mu. */
static void refuse_locked(struct wd_gate *g, int fd, const char *why)
{
	char body[200], msg[400];
	int bn = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", why);
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 503 Service Unavailable\r\n"
			 "Content-Type: application/json\r\n"
			 "Content-Length: %d\r\nConnection: close\r\n"
			 "Retry-After: 1\r\n\r\n%s",
			 bn, body);
	/* a fresh socket's send buffer holds this whole */
	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ||
	    shutdown(fd, SHUT_WR) < 0 || g->lingering >= LINGER_MAX) {
		close(fd);
		return;
	}
	struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
	if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
		close(fd);
		return;
	}
	slot_of(g, fd)->linger_deadline = wd_now_ns() + LINGER_NS;
	g->lingering++;
}

static void drain(struct wd_gate *g, int fd)
{
	char buf[4096];
	for (int i = 0; i < 16; i++) {
		ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		break; /* EOF or error */
	}
	pthread_mutex_lock(&g->mu);
	linger_close(g, fd);
	pthread_mutex_unlock(&g->mu);
}

/* ---- accepting ----------------------------------------------------------- */

static void accept_one(struct wd_gate *g, int fd,
		       const struct sockaddr_storage *sa, socklen_t salen)
{
	struct ucred cr = {0};
	socklen_t cl = sizeof(cr);
	char who[64];
	if (g->tcp) {
		/* the client's address is the key (cr.uid below) */
		const struct sockaddr_in *in = (const void *)sa;
		char a[INET_ADDRSTRLEN] = "?";
		if (sa->ss_family == AF_INET) {
			cr.uid = ntohl(in->sin_addr.s_addr);
			inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		}
		snprintf(who, sizeof(who), "%s", a);
	} else {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			close(fd);
			return;
		}
		snprintf(who, sizeof(who), "uid %u", (unsigned)cr.uid);
	}
	char why[200];
	pthread_mutex_lock(&g->mu);
	struct uid_count *u = uid_find(g, cr.uid, false);
	if (g->open >= g->lim.max_connections) {
		g->refused_total++;
		snprintf(why, sizeof(why),
			 "refused: wardend%s is at its limit of %u "
			 "connections%s",
			 g->tcp ? "'s metrics listener" : "",
			 g->lim.max_connections,
			 g->tcp ? "" : " (api.max_connections)");
		refuse_locked(g, fd, why);
		pthread_mutex_unlock(&g->mu);
		return;
	}
	if (u && u->n >= g->lim.max_connections_per_uid) {
		g->refused_uid++;
		snprintf(why, sizeof(why),
			 "refused: too many connections from %s (limit %u%s)",
			 who, g->lim.max_connections_per_uid,
			 g->tcp ? " per address"
				: ", api.max_connections_per_uid");
		refuse_locked(g, fd, why);
		pthread_mutex_unlock(&g->mu);
		return;
	}
	struct slot *s = slot_of(g, fd);
	if (s->pending) /* the number was closed by MHD unclaimed */
		conn_release_locked(g, s->pending);
	if (!u)
		u = uid_find(g, cr.uid, true);
	u->n++;
	g->open++;
	g->accepted++;
	struct conn *c = wd_calloc(1, sizeof(*c));
	c->g = g;
	c->fd = fd;
	c->uid = cr.uid;
	c->since_ns = wd_now_ns();
	c->next = g->head;
	if (g->head)
		g->head->prev = c;
	g->head = c;
	s->pending = c;
	pthread_mutex_unlock(&g->mu);
	/* MHD closes fd if it cannot take it, before claiming it (a later
	 * failure in its worker notifies CLOSED, which frees c: compare the
	 * pointer, never read through it) */
	if (MHD_add_connection(g->d, fd, (const struct sockaddr *)sa, salen) !=
	    MHD_YES) {
		pthread_mutex_lock(&g->mu);
		if (g->slots[fd].pending == c)
			conn_release_locked(g, c);
		pthread_mutex_unlock(&g->mu);
	}
}

static void accept_burst(struct wd_gate *g)
{
	for (int i = 0; i < 256; i++) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);
		int fd = accept4(g->lfd, (struct sockaddr *)&sa, &salen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* the connection stays in the backlog; do not
				 * spin on it */
				uint64_t now = wd_now_ns();
				if (now - g->emfile_logged_ns >
				    10000000000ull) {
					g->emfile_logged_ns = now;
					wd_warn("api: accept: %s (connections "
						"wait in the backlog)",
						strerror(errno));
				}
				usleep(20000);
			}
			return;
		}
		accept_one(g, fd, &sa, salen);
	}
}

/* Shut down connections past their request deadline, forget handed
 * connections MHD never claimed, close drained refusals. */
static void reap(struct wd_gate *g)
{
	uint64_t now = wd_now_ns();
	uint64_t dl = (uint64_t)g->lim.request_timeout_s * 1000000000ull;
	pthread_mutex_lock(&g->mu);
	for (struct conn *c = g->head, *nx; c; c = nx) {
		nx = c->next;
		if (!c->claimed) {
			if (now - c->since_ns > CLAIM_NS)
				conn_release_locked(g, c);
			continue;
		}
		if (c->phase == P_WAIT && !c->shut && now - c->since_ns > dl) {
			/* still open: MHD closes it only after
			 * NOTIFY_CLOSED, which takes g->mu */
			shutdown(c->fd, SHUT_RDWR);
			c->shut = true;
			g->request_timeouts++;
		}
	}
	for (size_t fd = 0; g->lingering && fd < g->nslots; fd++)
		if (g->slots[fd].linger_deadline &&
		    now > g->slots[fd].linger_deadline)
			linger_close(g, (int)fd);
	pthread_mutex_unlock(&g->mu);
}

static void *gate_main(void *arg)
{
	struct wd_gate *g = arg;
	uint64_t last_reap = 0;
	for (;;) {
		struct epoll_event ev[64];
		int n = epoll_wait(g->ep, ev, WD_ARRAY_SIZE(ev), TICK_MS);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == g->wake)
				return NULL;
			if (fd == g->lfd)
				accept_burst(g);
			else
				drain(g, fd);
		}
		uint64_t now = wd_now_ns();
		if (now - last_reap >= TICK_MS * 1000000ull) {
			last_reap = now;
			reap(g);
		}
	}
}

int wd_gate_start(struct wd_gate *g, struct MHD_Daemon *d, struct wd_err *err)
{
	g->d = d;
	int rc = pthread_create(&g->thr, NULL, gate_main, g);
	if (rc)
		return wd_err_set(err, -rc, "accept thread: %s", strerror(rc));
	g->running = true;
	return 0;
}

void wd_gate_stats(struct wd_gate *g, struct wd_gate_stats *out)
{
	pthread_mutex_lock(&g->mu);
	*out = (struct wd_gate_stats){
	    .open = g->open,
	    .lingering = g->lingering,
	    .accepted = g->accepted,
	    .refused_uid = g->refused_uid,
	    .refused_total = g->refused_total,
	    .request_timeouts = g->request_timeouts,
	};
	pthread_mutex_unlock(&g->mu);
}

void wd_gate_stop(struct wd_gate *g)
{
	if (!g || !g->running)
		return;
	uint64_t one = 1;
	if (write(g->wake, &one, sizeof(one)) < 0)
		wd_warn("api: cannot wake the accept thread: %s",
			strerror(errno));
	pthread_join(g->thr, NULL);
	g->running = false;
	pthread_mutex_lock(&g->mu);
	for (size_t fd = 0; g->lingering && fd < g->nslots; fd++)
		if (g->slots[fd].linger_deadline)
			linger_close(g, (int)fd);
	pthread_mutex_unlock(&g->mu);
	if (g->lfd >= 0)
		close(g->lfd);
	g->lfd = -1;
}

void wd_gate_free(struct wd_gate *g)
{
	if (!g)
		return;
	wd_gate_stop(g);
	/* after MHD_stop_daemon: every claimed connection was released by
	 * NOTIFY_CLOSED; what is left was never claimed */
	while (g->head)
		conn_release_locked(g, g->head);
	if (g->ep >= 0)
		close(g->ep);
	if (g->wake >= 0)
		close(g->wake);
	if (g->lfd >= 0)
		close(g->lfd);
	free(g->slots);
	free(g->uids);
	pthread_mutex_destroy(&g->mu);
	free(g);
}
