/* The node's fleet thread and its views (fleet.h). The thread owns its
 * connection: it LISTENs for submissions, heartbeats every lease/3, reaps
 * expired leases every lease/10, writes the ends of runs held here and
 * claims while there is room. A lost connection is dropped and made again
 * (degraded meanwhile: runs held keep running, their ends wait). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "enforce/probe.h"
#include "fleet/fleet_int.h"

int wd_fleet_conninfo(const char *url, char **conninfo, struct wd_err *err)
{
	int lrc = fl_pq_load(err);
	if (lrc)
		return lrc;
	const char *path = NULL;
	if (url[0] == '@')
		path = url + 1;
	else if (url[0] == '/')
		path = url;
	cleanup_free char *text = NULL;
	if (path) {
		FILE *fp = fopen(path, "re");
		if (!fp)
			return wd_err_set(err, -errno, "--fleet %s: %s", path,
					  strerror(errno));
		size_t cap = 0;
		ssize_t n = getline(&text, &cap, fp);
		fclose(fp);
		if (n <= 0)
			return wd_err_set(err, -EINVAL,
					  "--fleet %s: no connection string "
					  "on its first line",
					  path);
		while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
			text[--n] = 0;
		url = text;
	}
	if (!*url)
		return wd_err_set(err, -EINVAL, "--fleet: empty URL");
	char *perr = NULL;
	PQconninfoOption *o = PQconninfoParse(url, &perr);
	if (!o) {
		int rc = wd_err_set(err, -EINVAL, "--fleet: %s",
				    perr ? perr : "not a connection string");
		PQfreemem(perr);
		return rc;
	}
	PQconninfoFree(o);
	*conninfo = wd_strdup(url);
	return 0;
}

unsigned fl_thread_wait_ms(const struct wd_fleet *f)
{
	/* a heartbeat sent lease/3 after the last and answered within
	 * 2/3 lease still renews in time: one that takes longer was lost */
	return f->lease_ms * 2 / 3;
}

unsigned fl_api_wait_ms(const struct wd_fleet *f)
{
	(void)f;
	/* the server's statement_timeout (fl_connect) ends a slow statement
	 * first; this bound is for a server that cannot say so */
	return WD_FLEET_API_WAIT_MS + 1000;
}

PGconn *fl_connect(struct wd_fleet *f, unsigned stmt_ms)
{
	/* connect_timeout and application_name first: the URL's own
	 * settings, expanded from dbname, override them; without one an
	 * unreachable host would hold the API's connection (and its callers)
	 * for the kernel's SYN timeout. TCP keepalives (ignored on a unix
	 * socket) and tcp_user_timeout: a peer gone without a word (a
	 * half-open connection) is noticed within about a lease, not the
	 * kernel's hours; on the fleet thread's and the API's connections
	 * (stmt_ms > 0) a lock_timeout -- no statement waits on a row lock
	 * for longer than a heartbeat's period -- and that statement_timeout */
	unsigned ka = f->lease_ms / 3000 ? f->lease_ms / 3000 : 1;
	char idle[16], lease[16], opts[128];
	snprintf(idle, sizeof(idle), "%u", ka);
	snprintf(lease, sizeof(lease), "%u", f->lease_ms);
	/* the shipper's, gc's and verify's (stmt_ms 0) may wait on the
	 * others' locks and run long: theirs are the server's settings (an
	 * empty value is no setting) */
	opts[0] = 0;
	if (stmt_ms)
		snprintf(opts, sizeof(opts),
			 "-c lock_timeout=%u -c statement_timeout=%u",
			 f->lease_ms / 3, stmt_ms);
	const char *const keys[] = {"connect_timeout",
				    "application_name",
				    "keepalives",
				    "keepalives_idle",
				    "keepalives_interval",
				    "keepalives_count",
				    "tcp_user_timeout",
				    "options",
				    "dbname",
				    NULL};
	const char *const vals[] = {"5", "wardend", "1",  idle,	       idle,
				    "3", lease,	    opts, f->conninfo, NULL};
	return PQconnectdbParams(keys, vals, 1);
}

/* Connect, migrate, register, LISTEN. 0 or -errno with err. */
static int connect_db(struct wd_fleet *f, struct wd_err *err)
{
	PGconn *c = fl_connect(f, fl_thread_wait_ms(f));
	if (PQstatus(c) != CONNECTION_OK) {
		int rc = fl_pg_err(NULL, c, "fleet database unreachable", err);
		PQfinish(c);
		return rc;
	}
	int rc = fl_schema_migrate(c, err);
	if (!rc)
		rc = fl_register(f, c, err);
	if (!rc) {
		PGresult *r = PQexec(c, "LISTEN " WD_FLEET_CHANNEL
					"; LISTEN " WD_FLEET_APPROVALS);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = fl_pg_err(r, c, "listen", err);
		else
			PQclear(r);
	}
	if (rc) {
		PQfinish(c);
		return rc;
	}
	f->db = c;
	pthread_mutex_lock(&f->mu);
	f->up = true;
	f->db_error[0] = 0;
	pthread_mutex_unlock(&f->mu);
	return 0;
}

static void went_down(struct wd_fleet *f, const struct wd_err *err)
{
	pthread_mutex_lock(&f->mu);
	/* said once per state and reason, not every retry */
	bool say = f->up ||
		   strncmp(f->db_error, err->msg, sizeof(f->db_error) - 1) != 0;
	f->up = false;
	f->m_db_errors++;
	snprintf(f->db_error, sizeof(f->db_error), "%s", err->msg);
	pthread_mutex_unlock(&f->mu);
	if (say)
		wd_warn("fleet: %s; degraded: runs held here keep running, "
			"nothing is claimed until the database is back",
			err->msg);
	if (f->db && fl_pg_lost(f->db)) {
		PQfinish(f->db);
		f->db = NULL;
	}
}

void fl_tiers_text(unsigned tiers, char out[16])
{
	size_t n = 0;
	out[0] = 0;
	for (int t = 1; t <= 3; t++)
		if (tiers & (1u << t))
			n += (size_t)snprintf(out + n, 16 - n, "%s%d",
					      n ? "," : "", t);
	if (!n)
		snprintf(out, 16, "none");
}

/* Runs held here using each tier (held, or ended with the end not written
 * yet). Under mu. */
static void tiers_held(struct wd_fleet *f, unsigned n[3])
{
	n[0] = n[1] = n[2] = 0;
	const char *k;
	json_t *v;
	size_t i;
	json_object_foreach(f->held_tiers, k, v)
	{
		for (int t = 1; t <= 3; t++)
			n[t - 1] += (json_integer_value(v) >> t) & 1;
	}
	json_object_foreach(f->local, k, v)
	{
		for (int t = 1; t <= 3; t++)
			n[t - 1] += (json_integer_value(v) >> t) & 1;
	}
	json_array_foreach(f->ended, i, v)
	{
		json_int_t b = json_integer_value(json_object_get(v, "tiers"));
		for (int t = 1; t <= 3; t++)
			n[t - 1] += (b >> t) & 1;
	}
}

/* A run occupies its slot -- and one in each of its tiers -- until its end
 * is in the database, not only until it ended here: the database's
 * claimed_at/ended_at then never show a node above its capacity
 * (tests/integration/fleet_queue.sh and fleet_tiers.sh measure it so).
 * Returns the runs it may still claim; *tiers the tiers with room (bits
 * 1 << tier): a claim takes only a run all of whose tiers have room. */
static unsigned room(struct wd_fleet *f, unsigned *tiers)
{
	unsigned n[3];
	pthread_mutex_lock(&f->mu);
	size_t held = json_object_size(f->held) + json_array_size(f->ended) +
		      json_object_size(f->local);
	bool stop = f->stopping;
	tiers_held(f, n);
	pthread_mutex_unlock(&f->mu);
	*tiers = 0;
	for (int t = 1; t <= 3; t++)
		if (n[t - 1] < f->tier_cap[t - 1])
			*tiers |= 1u << t;
	return stop || held >= f->capacity ? 0 : f->capacity - (unsigned)held;
}

static void *fleet_thread(void *arg)
{
	struct wd_fleet *f = arg;
	uint64_t next_hb = 0, next_reap = 0;
	uint64_t hb_ns = (uint64_t)f->lease_ms * 1000000ull / 3;
	uint64_t reap_ns = (uint64_t)f->lease_ms * 1000000ull / 10;
	for (;;) {
		pthread_mutex_lock(&f->mu);
		bool stop = f->stopping;
		pthread_mutex_unlock(&f->mu);
		if (stop)
			break;
		struct wd_err err = {0};
		int timeout = 1000;
		if (!f->db) {
			if (connect_db(f, &err)) {
				went_down(f, &err);
				goto wait;
			}
			/* the runs' leases now, before anything else: the
			 * registration renewed only the node's */
			next_hb = 0;
		}
		uint64_t now = wd_now_ns();
		int rc = 0;
		if (now >= next_hb) {
			rc = fl_heartbeat(f, f->db, &err);
			next_hb = now + hb_ns;
		}
		if (!rc && now >= next_reap) {
			int64_t n = 0;
			rc = fl_reap(f, f->db, &n, &err);
			next_reap = now + reap_ns;
		}
		if (!rc)
			rc = fl_write_ends(f, f->db, &err);
		if (!rc)
			rc = fl_apply_decisions(f, f->db, &err);
		if (!rc)
			rc = fl_publish_approvals(f, f->db, &err);
		unsigned tiers;
		pthread_mutex_lock(&f->claim_mu);
		while (!rc && room(f, &tiers) &&
		       (rc = fl_claim_one(f, f->db, tiers, &err)) > 0)
			rc = 0;
		pthread_mutex_unlock(&f->claim_mu);
		if (rc < 0) {
			went_down(f, &err);
			goto wait;
		}
		/* a statement that failed on a connection that stayed up
		 * degraded the node too: this round went through */
		pthread_mutex_lock(&f->mu);
		bool back = !f->up;
		f->up = true;
		pthread_mutex_unlock(&f->mu);
		if (back)
			wd_info("fleet: database statements go through again");
		now = wd_now_ns();
		uint64_t due = next_hb < next_reap ? next_hb : next_reap;
		timeout = due > now ? (int)((due - now) / 1000000ull) + 1 : 0;
	wait:;
		struct pollfd p[2] = {
		    {.fd = f->wake_fd, .events = POLLIN},
		    {.fd = f->db ? PQsocket(f->db) : -1, .events = POLLIN}};
		int pr = poll(p, 2, timeout);
		if (pr < 0 && errno != EINTR)
			wd_warn("fleet: poll: %s", strerror(errno));
		if (p[0].revents & POLLIN) {
			uint64_t v;
			if (read(f->wake_fd, &v, sizeof(v)) < 0 &&
			    errno != EAGAIN)
				wd_warn("fleet: wake: %s", strerror(errno));
		}
		if (f->db && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			/* a closed connection reads as input: degraded now,
			 * not at the next heartbeat */
			if (!PQconsumeInput(f->db) || fl_pg_lost(f->db)) {
				struct wd_err le = {0};
				fl_pg_err(NULL, f->db, "fleet database", &le);
				went_down(f, &le);
				PQfinish(f->db);
				f->db = NULL;
				continue;
			}
			PGnotify *nt;
			while ((nt = PQnotifies(f->db)))
				PQfreemem(nt);
		}
	}
	return NULL;
}

int fl_reserve_local(struct wd_fleet *f, const char *agent, const char *id,
		     unsigned tiers, struct wd_err *err)
{
	pthread_mutex_lock(&f->claim_mu);
	unsigned have;
	unsigned n = room(f, &have);
	int rc = 0;
	if (!n || (tiers & ~have & 0xeu)) {
		char tl[16];
		fl_tiers_text(tiers & ~have & 0xeu, tl);
		rc = wd_err_set(
		    err, -EBUSY,
		    "agent '%s' keeps hash_only traces: its runs are not "
		    "queued (the task would be in the fleet database in plain "
		    "text) but run on the node they are submitted to, and node "
		    "%s has no room for one (capacity %u%s%s); the run was not "
		    "started: submit it to a node with room",
		    agent, f->node_id, f->capacity,
		    n ? ", none left in tier " : "", n ? tl : "");
	} else {
		pthread_mutex_lock(&f->mu);
		json_object_set_new(f->local, id, json_integer(tiers));
		pthread_mutex_unlock(&f->mu);
	}
	pthread_mutex_unlock(&f->claim_mu);
	return rc;
}

void wd_fleet_local_release(struct wd_fleet *f, const char *id)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	json_object_del(f->local, id);
	pthread_mutex_unlock(&f->mu);
	uint64_t one = 1;
	if (write(f->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		wd_warn("fleet: wake: %s", strerror(errno));
}

/* The node's room per tier: as given, or its capacity for each tier it
 * can run and 0 for the others (probed as `warden status` does, runsc's
 * sandbox run included). A tier given room it cannot run is refused: a
 * setting that would be taken and then ignored. */
static int tier_capacity(struct wd_fleet *f, const struct wd_fleet_opts *o,
			 struct wd_err *err)
{
	bool any = f->capacity > 0;
	for (int t = 1; t <= 3; t++)
		any = any || o->tier_capacity[t - 1] > 0;
	if (!any) { /* a node that only queues: nothing to probe */
		memset(f->tier_cap, 0, sizeof(f->tier_cap));
		return 0;
	}
	const struct wd_features *ft = wd_probe_full();
	for (int t = 1; t <= 3; t++) {
		char why[256];
		bool runs = wd_tier_runs(ft, t, why, sizeof(why));
		int given = o->tier_capacity[t - 1];
		if (given > 0 && !runs)
			return wd_err_set(err, -EINVAL,
					  "--fleet-capacity gives tier %d room "
					  "for %d runs, but this node cannot "
					  "run tier %d: %s",
					  t, given, t, why);
		if (given < 0 && !runs)
			wd_info("fleet: tier %d capacity 0: %s", t, why);
		f->tier_cap[t - 1] =
		    given >= 0 ? (unsigned)given : (runs ? f->capacity : 0);
	}
	return 0;
}

static char *labels_json(const struct wd_fleet_opts *o)
{
	json_t *l = json_object();
	for (unsigned i = 0; i < o->n_labels; i++) {
		const char *eq = strchr(o->labels[i], '=');
		char key[64];
		snprintf(key, sizeof(key), "%.*s", (int)(eq - o->labels[i]),
			 o->labels[i]);
		json_object_set_new(l, key, json_string(eq + 1));
	}
	char *s = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(l);
	return s;
}

static void fleet_free(struct wd_fleet *f)
{
	if (!f)
		return;
	if (f->db)
		PQfinish(f->db);
	if (f->api)
		PQfinish(f->api);
	if (f->ship_db)
		PQfinish(f->ship_db);
	pthread_cond_destroy(&f->ship_cond);
	pthread_cond_destroy(&f->fence_cond);
	json_decref(f->held_at);
	json_decref(f->applied);
	json_decref(f->lost);
	if (f->wake_fd >= 0)
		close(f->wake_fd);
	json_decref(f->held);
	json_decref(f->held_tiers);
	json_decref(f->local);
	pthread_mutex_destroy(&f->claim_mu);
	json_decref(f->ended);
	free(f->labels_json);
	free(f->published);
	free(f->conninfo);
	pthread_mutex_destroy(&f->mu);
	pthread_mutex_destroy(&f->api_mu);
	free(f);
}

int wd_fleet_start(const struct wd_fleet_opts *o, struct wd_rt *rt,
		   struct wd_fleet **out, struct wd_err *err)
{
	struct wd_fleet *f = wd_calloc(1, sizeof(*f));
	f->rt = rt;
	f->wake_fd = -1;
	pthread_mutex_init(&f->mu, NULL);
	pthread_mutex_init(&f->api_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->ship_cond, &ca);
	f->shipped_seq = -1;
	f->ship_lag_s = -1;
	f->held = json_object();
	f->held_tiers = json_object();
	f->local = json_object();
	pthread_mutex_init(&f->claim_mu, NULL);
	f->held_at = json_object();
	f->applied = json_object();
	f->lost = json_object();
	pthread_cond_init(&f->fence_cond, &ca);
	pthread_condattr_destroy(&ca);
	f->ended = json_array();
	f->queue_depth = -1;
	f->nodes_up = -1;
	f->capacity = o->capacity;
	f->run_here_when_down = o->run_here_when_down;
	f->lease_ms = o->lease_ms ? o->lease_ms : WD_FLEET_LEASE_MS_DEFAULT;
	int rc = 0;
	if (f->lease_ms < WD_FLEET_LEASE_MS_MIN) {
		rc = wd_err_set(err, -EINVAL,
				"--fleet-lease-ms %u: at least %u ms",
				f->lease_ms, WD_FLEET_LEASE_MS_MIN);
		goto fail;
	}
	for (unsigned i = 0; i < o->n_labels; i++)
		if ((rc = wd_fleet_label_check(o->labels[i], err)))
			goto fail;
	if ((rc = tier_capacity(f, o, err)))
		goto fail;
	if ((rc = wd_fleet_conninfo(o->url, &f->conninfo, err)) ||
	    (rc = fl_node_id_load(o->state_dir, f->node_id, err)))
		goto fail;
	f->labels_json = labels_json(o);
	if (gethostname(f->hostname, sizeof(f->hostname) - 1) < 0)
		snprintf(f->hostname, sizeof(f->hostname), "?");
	struct wd_probe_key k;
	if (wd_probe_key_now(&k) == 0 && k.build[0])
		snprintf(f->version, sizeof(f->version), "%s", k.build);
	else
		snprintf(f->version, sizeof(f->version), "unknown build");
	f->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->wake_fd < 0) {
		rc = wd_err_set(err, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* the first connection now: a schema this build cannot use stops
	 * the start; an unreachable database does not (degraded) */
	struct wd_err ce = {0};
	rc = connect_db(f, &ce);
	if (rc == -EPROTO) {
		wd_err_set(err, rc, "%s", ce.msg);
		goto fail;
	}
	if (rc)
		went_down(f, &ce);
	rc = 0;
	wd_rt_set_run_end_hook(rt, fl_on_run_end, f);
	wd_rt_set_fence_hook(rt, fl_fence, f);
	if (pthread_create(&f->thread, NULL, fleet_thread, f)) {
		wd_rt_set_fence_hook(rt, NULL, NULL);
		wd_rt_set_run_end_hook(rt, NULL, NULL);
		rc = wd_err_set(err, -EAGAIN, "cannot start the fleet thread");
		goto fail;
	}
	f->thread_started = true;
	if (pthread_create(&f->ship_thread, NULL, fl_ship_thread, f) == 0)
		f->ship_started = true;
	else
		wd_warn("fleet: cannot start the trace shipper thread: the "
			"trace stays on this node only");
	pthread_mutex_lock(&f->mu); /* the thread sets it from now on */
	bool up = f->up;
	pthread_mutex_unlock(&f->mu);
	wd_info("fleet: node %s (%s), capacity %u (tier 1 %u, tier 2 %u, "
		"tier 3 %u), lease %u ms, labels %s: %s",
		f->node_id, f->hostname, f->capacity, f->tier_cap[0],
		f->tier_cap[1], f->tier_cap[2], f->lease_ms, f->labels_json,
		up ? "registered" : "database unreachable");
	*out = f;
	return 0;
fail:
	fleet_free(f);
	return rc;
}

void wd_fleet_stop_claims(struct wd_fleet *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	pthread_cond_broadcast(&f->ship_cond);
	pthread_cond_broadcast(&f->fence_cond);
	pthread_mutex_unlock(&f->mu);
	uint64_t one = 1;
	if (write(f->wake_fd, &one, sizeof(one)) < 0)
		wd_warn("fleet: wake: %s", strerror(errno));
}

void wd_fleet_stop(struct wd_fleet *f)
{
	if (!f)
		return;
	wd_fleet_stop_claims(f);
	if (f->thread_started)
		pthread_join(f->thread, NULL);
	if (f->ship_started)
		pthread_join(f->ship_thread, NULL);
	/* no heartbeat from now on, and the runs still held are about to be
	 * interrupted fleet-wide: none of them starts a side effect any more
	 * (a fenced run without a hook is lost) */
	wd_rt_set_fence_hook(f->rt, NULL, NULL);
	wd_rt_set_run_end_hook(f->rt, NULL, NULL);
	struct wd_err err = {0};
	if (f->db &&
	    (fl_write_ends(f, f->db, &err) || fl_node_stopped(f, f->db, &err)))
		wd_warn("fleet: stopping: %s", err.msg);
	fleet_free(f);
}

json_t *wd_fleet_status(struct wd_fleet *f)
{
	pthread_mutex_lock(&f->mu);
	json_t *o = json_pack(
	    "{s:s,s:s,s:s,s:i,s:i,s:I,s:I,s:o,s:s}", "node", f->node_id, "host",
	    f->hostname, "state", f->up ? "up" : "degraded", "capacity",
	    (int)f->capacity, "lease_ms", (int)f->lease_ms, "held",
	    (json_int_t)(json_object_size(f->held) +
			 json_object_size(f->local)),
	    "queued", (json_int_t)f->queue_depth, "labels",
	    json_loads(f->labels_json, 0, NULL), "version", f->version);
	if (!f->up)
		json_object_set_new(o, "error", json_string(f->db_error));
	if (f->nodes_up >= 0)
		json_object_set_new(o, "nodes_up", json_integer(f->nodes_up));
	json_object_set_new(
	    o, "when_down",
	    json_string(f->run_here_when_down ? "run_here" : "refuse"));
	unsigned n[3];
	tiers_held(f, n);
	json_object_set_new(o, "tier_capacity",
			    json_pack("[i,i,i]", f->tier_cap[0], f->tier_cap[1],
				      f->tier_cap[2]));
	json_object_set_new(o, "tier_held",
			    json_pack("[i,i,i]", n[0], n[1], n[2]));
	pthread_mutex_unlock(&f->mu);
	return o;
}

void wd_fleet_metrics(struct wd_fleet *f, struct wd_buf *b)
{
	pthread_mutex_lock(&f->mu);
	wd_buf_printf(
	    b,
	    "# HELP warden_fleet_up 1 when this node's fleet connection "
	    "works, 0 when degraded.\n"
	    "# TYPE warden_fleet_up gauge\n"
	    "warden_fleet_up %d\n"
	    "# HELP warden_fleet_capacity Runs this node holds at most.\n"
	    "# TYPE warden_fleet_capacity gauge\n"
	    "warden_fleet_capacity %u\n"
	    "# HELP warden_fleet_runs_held Fleet runs running here.\n"
	    "# TYPE warden_fleet_runs_held gauge\n"
	    "warden_fleet_runs_held %zu\n"
	    "# HELP warden_fleet_queue_depth Runs queued fleet-wide (at the "
	    "last reap; -1 unknown).\n"
	    "# TYPE warden_fleet_queue_depth gauge\n"
	    "warden_fleet_queue_depth %lld\n"
	    "# HELP warden_fleet_runs_submitted_total Runs queued through "
	    "this node.\n"
	    "# TYPE warden_fleet_runs_submitted_total counter\n"
	    "warden_fleet_runs_submitted_total %llu\n"
	    "# HELP warden_fleet_runs_claimed_total Runs this node claimed.\n"
	    "# TYPE warden_fleet_runs_claimed_total counter\n"
	    "warden_fleet_runs_claimed_total %llu\n"
	    "# HELP warden_fleet_lease_losses_total Runs of this node that "
	    "ended after their lease ran out (interrupted fleet-wide).\n"
	    "# TYPE warden_fleet_lease_losses_total counter\n"
	    "warden_fleet_lease_losses_total %llu\n"
	    "# HELP warden_fleet_runs_interrupted_total Runs of lost nodes "
	    "this node marked interrupted.\n"
	    "# TYPE warden_fleet_runs_interrupted_total counter\n"
	    "warden_fleet_runs_interrupted_total %llu\n"
	    "# HELP warden_fleet_runs_requeued_total Runs of lost nodes this "
	    "node queued again (resume: if_read_only).\n"
	    "# TYPE warden_fleet_runs_requeued_total counter\n"
	    "warden_fleet_runs_requeued_total %llu\n"
	    "# HELP warden_fleet_db_errors_total Failed connections and "
	    "statements.\n"
	    "# TYPE warden_fleet_db_errors_total counter\n"
	    "warden_fleet_db_errors_total %llu\n"
	    "# HELP warden_fleet_run_ends_pending Ends of runs held here not "
	    "written to the database yet.\n"
	    "# TYPE warden_fleet_run_ends_pending gauge\n"
	    "warden_fleet_run_ends_pending %zu\n"
	    "# HELP warden_fleet_trace_shipped_total Trace records (lines "
	    "and index rows) this process shipped to the database.\n"
	    "# TYPE warden_fleet_trace_shipped_total counter\n"
	    "warden_fleet_trace_shipped_total %llu\n"
	    "# HELP warden_fleet_trace_shipped_seq The last seq of this "
	    "node's trace in the database (-1: not known yet).\n"
	    "# TYPE warden_fleet_trace_shipped_seq gauge\n"
	    "warden_fleet_trace_shipped_seq %lld\n"
	    "# HELP warden_fleet_trace_blobs_shipped_total Payload blob rows "
	    "this process wrote to the database.\n"
	    "# TYPE warden_fleet_trace_blobs_shipped_total counter\n"
	    "warden_fleet_trace_blobs_shipped_total %llu\n"
	    "# HELP warden_fleet_trace_ship_lag_seconds Age of the oldest "
	    "record not in the database yet, at the shipper's last look "
	    "(0: none; -1: not known yet).\n"
	    "# TYPE warden_fleet_trace_ship_lag_seconds gauge\n"
	    "warden_fleet_trace_ship_lag_seconds %.3f\n",
	    f->up ? 1 : 0, f->capacity, json_object_size(f->held),
	    (long long)f->queue_depth, (unsigned long long)f->m_submitted,
	    (unsigned long long)f->m_claimed,
	    (unsigned long long)f->m_lease_lost,
	    (unsigned long long)f->m_interrupted,
	    (unsigned long long)f->m_requeued,
	    (unsigned long long)f->m_db_errors, json_array_size(f->ended),
	    (unsigned long long)f->m_shipped, (long long)f->shipped_seq,
	    (unsigned long long)f->m_blobs_shipped, f->ship_lag_s);
	wd_buf_printf(b,
		      "# HELP warden_fleet_runs_run_here_total Runs submitted "
		      "here while the database was unreachable and run on "
		      "this node (when_down: run_here).\n"
		      "# TYPE warden_fleet_runs_run_here_total counter\n"
		      "warden_fleet_runs_run_here_total %llu\n",
		      (unsigned long long)f->m_run_here);
	unsigned n[3];
	tiers_held(f, n);
	wd_buf_printf(b, "# HELP warden_fleet_tier_capacity Fleet runs using "
			 "the tier this node holds at most (0: it cannot run "
			 "the tier, or was told not to).\n"
			 "# TYPE warden_fleet_tier_capacity gauge\n");
	for (int t = 1; t <= 3; t++)
		wd_buf_printf(b, "warden_fleet_tier_capacity{tier=\"%d\"} %u\n",
			      t, f->tier_cap[t - 1]);
	wd_buf_printf(b, "# HELP warden_fleet_tier_runs_held Fleet runs using "
			 "the tier held here (until their end is written).\n"
			 "# TYPE warden_fleet_tier_runs_held gauge\n");
	for (int t = 1; t <= 3; t++)
		wd_buf_printf(b,
			      "warden_fleet_tier_runs_held{tier=\"%d\"} %u\n",
			      t, n[t - 1]);
	pthread_mutex_unlock(&f->mu);
}
