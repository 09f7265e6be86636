/* Tiers 1 and 2, the parent's side while the tool runs: the seccomp
 * listener and T's pid from the child, kernel events routed to their call
 * (BPF ring buffer, seccomp notify, Landlock audit), the timeout, the
 * output capture and the cgroup's end (see native.c for the launch). */
#include "sandbox/native_int.h"
#include "sandbox/netns.h"
#include "sandbox/common.h"
#include "sandbox/sandbox.h"
#include "common/log.h"
#include "enforce/egress.h"
#include "enforce/landlock.h"
#include "enforce/lsm.h"
#include "lsm_policy.h"
#include "enforce/probe.h"
#include "enforce/seccomp.h"
#include "events/landlock_audit.h"
#include "sandbox/cgroup.h"
#include "sandbox/mounts.h"
#include "sandbox/plancache.h"
#include "sandbox/reaper.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* One message from the child side: the seccomp listener (an fd), or T's
 * pid (4 bytes, tier 2). Returns 1 with *fd, 2 with *pid, 0 on EOF,
 * -errno. */
static int recv_msg(int sock, int *fd, pid_t *pid)
{
	char b[8];
	struct wd_scm1 s;
	struct msghdr *msg = wd_scm1_init(&s, b, sizeof(b));
	ssize_t n = recvmsg(sock, msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n <= 0)
		return n == 0 ? 0 : -errno;
	struct cmsghdr *c0 = CMSG_FIRSTHDR(msg);
	if (c0 && c0->cmsg_type == SCM_RIGHTS &&
	    c0->cmsg_len == CMSG_LEN(sizeof(int))) {
		memcpy(fd, CMSG_DATA(c0), sizeof(int));
		return 1;
	}
	if (n == sizeof(pid_t)) {
		memcpy(pid, b, sizeof(pid_t));
		return 2;
	}
	return -EPROTO;
}

struct collect {
	struct wd_result *res;
	const struct wd_call *call;
	const char *cg_suffix; /* "/warden/<id>" */
	pid_t tpid;	       /* T, creator of the call's Landlock domain */
	struct wd_landlock_audit *lla;
	uint64_t cgid;
	uint64_t domains[8]; /* Landlock domains seen to be the call's */
	int n_domains;
	struct wd_resolver *resolver; /* names in network.allow, or NULL */
};

/* "10.1.2.3:9200" -> "search-svc.internal:9200 (10.1.2.3)" when the
 * call's resolver answered that address for the name: a denial of a
 * connect to a resolved name names it (the port is another than its
 * rule's, or the answer's TTL ran out). */
void wd_sb_name_target(struct wd_resolver *resolver, struct wd_event *e)
{
	if (!resolver || (e->source != WD_SRC_BPF && e->source != WD_SRC_LSM))
		return;
	char host[64];
	const char *t = e->target, *colon = strrchr(t, ':');
	if (!colon || colon == t)
		return;
	size_t hl = (size_t)(colon - t);
	if (t[0] == '[' && hl >= 2 && t[hl - 1] == ']') {
		t++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return;
	memcpy(host, t, hl);
	host[hl] = 0;
	uint8_t a[16] = {0};
	if (inet_pton(AF_INET, host, a + 12) == 1)
		a[10] = a[11] = 0xff;
	else if (inet_pton(AF_INET6, host, a) != 1)
		return;
	char name[254];
	if (!wd_resolver_name_of(resolver, a, name, sizeof(name)))
		return;
	char nt[sizeof(e->target)];
	snprintf(nt, sizeof(nt), "%s%s (%s)", name, colon, host);
	wd_strlcpy(e->target, nt, sizeof(e->target));
}

/* A Landlock audit record belongs to this call if its domain was already
 * seen as ours, or its pid is (still) in the call's cgroup. Records of
 * other calls and other programs on the node are ignored. */
static bool landlock_is_ours(struct collect *c, const struct wd_event *ev)
{
	for (int i = 0; i < c->n_domains; i++)
		if (c->domains[i] == ev->domain_id)
			return true;
	/* The domain's creator is T: known even after every process of the
	 * call is gone (records are read until the drain barrier). */
	if (c->tpid > 0 && c->lla &&
	    wd_landlock_audit_domain_creator(c->lla, ev->domain_id) ==
		c->tpid) {
		if (c->n_domains < (int)WD_ARRAY_SIZE(c->domains))
			c->domains[c->n_domains++] = ev->domain_id;
		return true;
	}
	char p[64];
	cleanup_free char *s = NULL;
	snprintf(p, sizeof(p), "/proc/%d/cgroup", ev->pid);
	if (ev->pid <= 0 || wd_read_file(p, &s, NULL) < 0 ||
	    !strstr(s, c->cg_suffix))
		return false;
	if (c->n_domains < (int)WD_ARRAY_SIZE(c->domains))
		c->domains[c->n_domains++] = ev->domain_id;
	return true;
}

static void on_event(const struct wd_event *ev, void *arg)
{
	struct collect *c = arg;
	struct wd_event e = *ev;
	wd_strlcpy(e.call_id, c->res->call_id, sizeof(e.call_id));
	wd_sb_name_target(c->resolver, &e);
	wd_result_add_denial(c->res, &e);
	if (c->call->on_event)
		c->call->on_event(&e, c->call->on_event_arg);
}

/* BPF events: drain the shared ring buffer (events/bpf_route.h), then
 * take this call's mail. */
static void drain_bpf(struct wd_egress *eg, struct wd_bpf_route *rt,
		      struct collect *c)
{
	wd_bpf_route_drain(eg, rt, on_event, c);
}

/* The call's resolver's denials (names refused, answers withheld). */
static void drain_resolver(struct collect *c)
{
	if (!c->resolver)
		return;
	struct wd_event ev[32];
	int k;
	while ((k = wd_resolver_take(c->resolver, ev, 32)) > 0)
		for (int i = 0; i < k; i++) {
			ev[i].pid = 0;
			on_event(&ev[i], c);
		}
	/* a flood beyond the resolver's queue: counted, never silent */
	c->res->lost_denials += (int)wd_resolver_take_dropped(c->resolver);
}

static void on_landlock(const struct wd_event *ev, void *arg)
{
	struct collect *c = arg;
	if (!landlock_is_ours(c, ev))
		return;
	struct wd_event e = *ev;
	e.uid = e.uid ? e.uid : c->call->run_uid;
	e.cgroup_id = c->cgid;
	on_event(&e, c);
}

int wd_native_supervise(struct launch *l, pid_t child, struct wd_cgroup *cg,
			struct wd_egress *eg, struct wd_bpf_route *rt,
			struct wd_result *res, struct wd_err *err)
{
	char suffix[64];
	snprintf(suffix, sizeof(suffix), "/warden/%s\n", l->id);
	struct wd_landlock_audit *lla = l->lla;
	struct collect col = {.res = res,
			      .call = l->call,
			      .cg_suffix = suffix,
			      /* T: tier 1, or tier 2's G1 as our child */
			      .tpid = l->tier == 1 || l->vm_child ? child : 0,
			      .lla = lla,
			      .cgid = cg->v2_id,
			      .resolver = l->resolver};
	const struct wd_manifest *m = l->m;
	size_t cap =
	    m->output_max_bytes ? m->output_max_bytes : WD_DEFAULT_OUTPUT_MAX;
	uint64_t deadline =
	    wd_now_ns() +
	    (uint64_t)(m->timeout_ms ? m->timeout_ms : WD_DEFAULT_TIMEOUT_MS) *
		1000000ull;
	bool audit = m->mode == WD_MODE_AUDIT;
	int pidfd = syscall(SYS_pidfd_open, child, 0);
	int notify = -1, status = 0;
	bool exited = false, timed_out = false, killed = false;
	size_t in_off = 0;
	struct wd_buf setup_err = {0};
	bool trunc = false;

	if (pidfd < 0)
		return wd_err_set(err, -errno, "pidfd_open: %s",
				  strerror(errno));
	if (!l->call->stdin_data || !l->call->stdin_len) {
		close(l->in[1]);
		l->in[1] = -1;
	} else {
		fcntl(l->in[1], F_SETFL, O_NONBLOCK);
	}
	for (;;) {
		struct pollfd p[10];
		int n = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1,
		    i_sock = -1, i_not = -1, i_ep = -1, i_bpf = -1, i_ll = -1,
		    i_dns = -1;
		if (l->out[0] >= 0)
			p[i_out = n++] = (struct pollfd){l->out[0], POLLIN, 0};
		if (l->err[0] >= 0)
			p[i_err = n++] = (struct pollfd){l->err[0], POLLIN, 0};
		if (l->in[1] >= 0)
			p[i_in = n++] = (struct pollfd){l->in[1], POLLOUT, 0};
		if (!exited)
			p[i_pid = n++] = (struct pollfd){pidfd, POLLIN, 0};
		if (l->sock[0] >= 0)
			p[i_sock = n++] =
			    (struct pollfd){l->sock[0], POLLIN, 0};
		if (notify >= 0)
			p[i_not = n++] = (struct pollfd){notify, POLLIN, 0};
		if (l->errp[0] >= 0)
			p[i_ep = n++] = (struct pollfd){l->errp[0], POLLIN, 0};
		if (eg)
			p[i_bpf = n++] =
			    (struct pollfd){wd_egress_events_fd(eg), POLLIN, 0};

		if (lla)
			p[i_ll = n++] = (struct pollfd){
			    wd_landlock_audit_fd(lla), POLLIN, 0};
		if (col.resolver)
			p[i_dns = n++] = (struct pollfd){
			    wd_resolver_events_fd(col.resolver), POLLIN, 0};
		/* Done when the child is gone and every writer closed. */
		if (exited && l->out[0] < 0 && l->err[0] < 0)
			break;
		uint64_t now = wd_now_ns();
		int tmo = -1;
		if (!killed)
			tmo = now >= deadline
				  ? 0
				  : (int)((deadline - now) / 1000000) + 1;
		else if (exited)
			tmo = 2000; /* stragglers: cgroup already killed */
		/* BPF records may come without a wake-up: while they flow,
		 * wake every few ms to read them (denials stream live) */
		int btmo = eg && !killed ? wd_egress_wait_bound(eg, tmo) : tmo;
		int r = poll(p, n, btmo);
		if (r < 0 && errno != EINTR) {
			wd_err_set(err, -errno, "poll: %s", strerror(errno));
			break;
		}
		if (r == 0 && btmo != tmo) {
			drain_bpf(eg, rt, &col);
			continue;
		}
		if (r == 0) {
			if (!killed) {
				timed_out = !exited;
				wd_cgroup_kill(cg);
				killed = true;
				continue;
			}
			break; /* pipes held open by something unkillable */
		}
		char buf[65536];
		if (i_out >= 0 && p[i_out].revents) {
			ssize_t k = read(l->out[0], buf, sizeof(buf));
			if (k > 0)
				wd_sb_take(&res->out, buf, k, cap, &trunc);
			else if (k == 0 || errno != EINTR) {
				close(l->out[0]);
				l->out[0] = -1;
			}
		}
		if (i_err >= 0 && p[i_err].revents) {
			ssize_t k = read(l->err[0], buf, sizeof(buf));
			if (k > 0)
				wd_sb_take(&res->err, buf, k, cap, &trunc);
			else if (k == 0 || errno != EINTR) {
				close(l->err[0]);
				l->err[0] = -1;
			}
		}
		if (i_in >= 0 && p[i_in].revents) {
			ssize_t k =
			    write(l->in[1], l->call->stdin_data + in_off,
				  l->call->stdin_len - in_off);
			if (k > 0)
				in_off += k;
			if (k < 0 && errno != EAGAIN && errno != EINTR)
				in_off =
				    l->call->stdin_len; /* EPIPE: reader left */
			if (in_off >= l->call->stdin_len) {
				close(l->in[1]);
				l->in[1] = -1;
			}
		}
		if (i_sock >= 0 && p[i_sock].revents) {
			int fd = -1, got = recv_msg(l->sock[0], &fd, &col.tpid);
			if (got == 1)
				notify = fd;
			if (got == 2)
				continue; /* the listener is still to come */
			close(l->sock[0]);
			l->sock[0] = -1;
		}
		if (i_not >= 0 && p[i_not].revents) {
			if (p[i_not].revents & (POLLHUP | POLLERR)) {
				close(notify);
				notify = -1;
			} else {
				struct wd_event ev;
				if (wd_seccomp_answer(notify, audit, &ev) > 0) {
					ev.cgroup_id = cg->v2_id;
					ev.uid = l->uid;
					on_event(&ev, &col);
				}
			}
		}
		if (i_ep >= 0 && p[i_ep].revents) {
			ssize_t k = read(l->errp[0], buf, sizeof(buf));
			if (k > 0)
				wd_buf_append(&setup_err, buf, k);
			else {
				close(l->errp[0]);
				l->errp[0] = -1;
			}
		}
		if (i_bpf >= 0 && p[i_bpf].revents)
			drain_bpf(eg, rt, &col);
		if (i_ll >= 0 && p[i_ll].revents)
			wd_landlock_audit_read(lla, on_landlock, &col);
		if (i_dns >= 0 && p[i_dns].revents) {
			drain_resolver(&col);
			/* the resolver failed (its pins are gone, it answers
			 * nothing): the call ends, fail closed */
			if (!killed &&
			    wd_resolver_failed(col.resolver, NULL, 0)) {
				wd_cgroup_kill(cg);
				killed = true;
			}
		}
		if (i_pid >= 0 && p[i_pid].revents) {
			while (waitpid(child, &status, 0) < 0 && errno == EINTR)
				;
			exited = true;
			/* End of the call: kill whatever it left behind
			 * (daemonised grandchildren hold our pipes). */
			wd_cgroup_kill(cg);
			killed = true;
		}
	}
	if (!exited) {
		wd_cgroup_kill(cg);
		killed = true;
		while (waitpid(child, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (eg)
		drain_bpf(eg, rt, &col);
	drain_resolver(&col);
	if (lla) {
		/* kauditd delivers records asynchronously. Once no process of
		 * the call is left, a barrier record tells us when all of its
		 * records are in; without one, drain until the stream has been
		 * quiet for 25 ms (bounded at 250 ms). */
		wd_landlock_audit_read(lla, on_landlock, &col);
		/* A user record sent through the reader's own socket comes
		 * back after every record the call made once its last
		 * process is gone: read until it has (landlock_audit.h). */
		char tag[64];
		snprintf(tag, sizeof(tag), "call=%s", l->id);
		bool empty = wd_cgroup_wait_empty(cg, 2000) == 0;
		l->cg_empty = empty && killed;
		if (empty && wd_landlock_audit_barrier(
				 lla, tag, 250, on_landlock, &col) == 0) {
			/* all of the call's records are read */
		} else {
			uint64_t until = wd_now_ns() + 250000000ull;
			struct pollfd ap = {wd_landlock_audit_fd(lla), POLLIN,
					    0};
			do
				wd_landlock_audit_read(lla, on_landlock, &col);
			while (wd_now_ns() < until && poll(&ap, 1, 25) > 0);
		}
		/* The reads keep back an event whose last records had not
		 * come yet, or whose domain record never came: past the
		 * barrier nothing more of the call's can come, take them. */
		wd_landlock_audit_flush(lla, on_landlock, &col);
		wd_landlock_audit_close(lla);
		l->lla = NULL;
	}
	if (notify >= 0)
		close(notify);
	close(pidfd);

	res->truncated = trunc;
	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res->exit_code = 128 + WTERMSIG(status);
	if (setup_err.len) {
		int r = wd_err_set(err, -EPERM, "sandbox setup failed: %s",
				   setup_err.data);
		wd_buf_free(&setup_err);
		return r;
	}
	char rfail[200];
	if (wd_resolver_failed(l->resolver, rfail, sizeof(rfail)))
		return wd_err_set(err, -EIO,
				  "network.allow names: the call's resolver "
				  "failed (%s); the call was ended",
				  rfail);
	if (timed_out) {
		res->status = WD_ST_TIMEOUT;
		res->exit_code = 124;
	} else if (wd_cgroup_oom_kills(cg) > 0) {
		/* The kernel's OOM killer (memory.events / v1
		 * memory.oom_control oom_kill), not any other SIGKILL: the
		 * call reached memory_mb. One exit code for it (README),
		 * whichever of its processes was the victim. */
		res->status = WD_ST_OOM;
		res->exit_code = 128 + SIGKILL;
	} else {
		res->status = res->exit_code == 0 ? WD_ST_OK : WD_ST_ERROR;
	}
	return 0;
}
