/* Warm pool of single-use tier-3 sandboxes: see pool.h.
 *
 * Locking: one mutex over the key table, the ready lists and the counters.
 * Spawning and destroying a sandbox (hundreds of ms: runsc boots a sentry)
 * happen outside the lock; `spawning` counts sandboxes being booted so the
 * refill thread never overshoots. A ready sandbox is taken out of its list
 * under the lock, so two calls can never get the same one.
 *
 * Keys are heap objects (the refill thread keeps a pointer across its
 * unlocked spawn). Evicting a key unlinks it from the table, moves its ready
 * sandboxes to `doomed` (the refill thread destroys them) and marks it
 * dead; it is freed by whoever sees it dead with nothing spawning.
 */
#include "sandbox/pool.h"

#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "sandbox/gvisor.h"
#include "sandbox/uidpool.h"

struct entry {
	struct wd_t3 *sb;
	struct entry *next;
};

struct key {
	const struct wd_manifest *m;
	char **argv; /* NULL = manifest exec */
	uid_t uid;
	gid_t gid;
	struct entry *ready; /* oldest first */
	int n_ready, spawning;
	int fail_streak;
	uint64_t retry_at_ns;
	uint64_t used_ns; /* last register or call */
	bool dead;	  /* evicted, out of the table */
};

struct tenant {
	char name[64];
	int in_use;
};

struct wd_pool {
	struct wd_pool_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t wake;  /* refill thread */
	pthread_cond_t ready; /* wd_pool_wait_ready */
	pthread_t thr;
	bool stop;
	struct key **keys;
	int n_keys;
	struct entry *doomed; /* sandboxes of evicted keys, to destroy */
	struct tenant *tenants;
	int n_tenants;
	struct wd_pool_stats st;
	/* the manifest the refill thread boots a sandbox of, unlocked (NULL
	 * when none): wd_pool_forget() waits for it to change */
	const struct wd_manifest *spawn_m;
};

static bool argv_eq(char *const *a, char *const *b)
{
	if (!a || !b)
		return a == b;
	int i = 0;
	for (; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return !a[i] && !b[i];
}

static char **argv_dup(char *const *a)
{
	if (!a)
		return NULL;
	int n = 0;
	while (a[n])
		n++;
	char **v = wd_calloc(n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		v[i] = wd_strdup(a[i]);
	return v;
}

static struct key *find_key(struct wd_pool *p, const struct wd_manifest *m,
			    char *const *argv, uid_t uid, gid_t gid)
{
	/* argv NULL and argv == m->exec are the same shape */
	char *const *a = argv ? argv : m->exec;
	for (int i = 0; i < p->n_keys; i++) {
		struct key *k = p->keys[i];
		if (k->m == m && k->uid == uid && k->gid == gid &&
		    argv_eq(k->argv ? k->argv : m->exec, a))
			return k;
	}
	return NULL;
}

static struct tenant *tenant_get(struct wd_pool *p, const char *name)
{
	if (!name)
		name = "";
	for (int i = 0; i < p->n_tenants; i++)
		if (!strcmp(p->tenants[i].name, name))
			return &p->tenants[i];
	p->tenants =
	    wd_realloc(p->tenants, (p->n_tenants + 1) * sizeof(*p->tenants));
	struct tenant *t = &p->tenants[p->n_tenants++];
	memset(t, 0, sizeof(*t));
	wd_strlcpy(t->name, name, sizeof(t->name));
	return t;
}

static uint64_t idle_ns(struct wd_pool *p)
{
	return (uint64_t)(p->cfg.idle_ms ? p->cfg.idle_ms : 60000) * 1000000ull;
}

static uint64_t key_idle_ns(struct wd_pool *p)
{
	return (uint64_t)(p->cfg.key_idle_ms ? p->cfg.key_idle_ms : 600000) *
	       1000000ull;
}

static int max_keys(struct wd_pool *p)
{
	return p->cfg.max_keys > 0 ? p->cfg.max_keys : 32;
}

static void key_free(struct key *k)
{
	for (int j = 0; k->argv && k->argv[j]; j++)
		free(k->argv[j]);
	free(k->argv);
	free(k);
}

/* Lock held. Take key i out of the table; its ready sandboxes go to the
 * refill thread's doomed list. */
static void evict(struct wd_pool *p, int i, const char *why)
{
	struct key *k = p->keys[i];
	wd_info("pool '%s' (uid %u): key dropped (%s), %d ready sandbox(es) "
		"destroyed",
		k->m->name, (unsigned)k->uid, why, k->n_ready);
	p->keys[i] = p->keys[--p->n_keys];
	struct entry **tail = &p->doomed;
	while (*tail)
		tail = &(*tail)->next;
	*tail = k->ready;
	k->ready = NULL;
	k->n_ready = 0;
	k->dead = true;
	if (k->spawning == 0)
		key_free(k);
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->ready);
}

/* One pass of the refill thread, called with the lock held; drops it
 * around each spawn/destroy. Returns true if it did something. */
static bool refill_once(struct wd_pool *p)
{
	uint64_t now = wd_now_ns();
	/* destroy what eviction left */
	if (p->doomed) {
		struct entry *e = p->doomed;
		p->doomed = e->next;
		pthread_mutex_unlock(&p->mu);
		wd_t3_destroy(e->sb);
		free(e);
		pthread_mutex_lock(&p->mu);
		return true;
	}
	/* drop keys no call has used for key_idle_ms */
	for (int i = 0; i < p->n_keys; i++) {
		if (now - p->keys[i]->used_ns > key_idle_ns(p)) {
			p->st.evicted_idle++;
			evict(p, i, "idle");
			return true;
		}
	}
	/* expire idle sandboxes (oldest first in each list) */
	for (int i = 0; i < p->n_keys; i++) {
		struct key *k = p->keys[i];
		if (k->ready && now - k->ready->sb->spawned_ns > idle_ns(p)) {
			struct entry *e = k->ready;
			k->ready = e->next;
			k->n_ready--;
			p->st.expired++;
			pthread_mutex_unlock(&p->mu);
			wd_t3_destroy(e->sb);
			free(e);
			pthread_mutex_lock(&p->mu);
			return true;
		}
	}
	for (int i = 0; i < p->n_keys; i++) {
		struct key *k = p->keys[i];
		if (k->n_ready + k->spawning >= p->cfg.size ||
		    now < k->retry_at_ns)
			continue;
		k->spawning++;
		const struct wd_manifest *m = k->m;
		p->spawn_m = m;
		char **argv = k->argv;
		uid_t uid = k->uid;
		gid_t gid = k->gid;
		pthread_mutex_unlock(&p->mu);
		char id[17];
		wd_rand_hex(id, 16);
		struct wd_t3 *sb = NULL;
		struct wd_err err = {0};
		/* the sandbox's own uid, held until it is destroyed: a
		 * ready sandbox is a live call-to-be */
		struct wd_uid_lease *ls = NULL;
		int r = wd_uid_acquire(&ls, id, &err);
		if (r == 0)
			r = wd_uid_grant_paths(ls, uid, gid, m->fs_write.v,
					       m->fs_write.n, true, &err);
		if (r == 0)
			r = wd_t3_spawn(m, argv, ls->uid, ls->gid, id, &sb,
					&err);
		if (sb)
			sb->lease = steal_pointer(&ls);
		wd_uid_release(ls, true); /* nothing ran as it */
		/* Ready means booted and waiting, not merely forked. */
		if (r == 0 && (r = wd_t3_wait_settled(sb, 20000)) < 0) {
			if (r == -ECHILD)
				wd_err_set(&err, r,
					   "runsc '%s' exited before the "
					   "sandbox's program started",
					   sb->runsc);
			else
				wd_err_set(&err, r,
					   "sandbox did not settle: %s",
					   strerror(-r));
			wd_t3_destroy(sb);
			sb = NULL;
		}
		pthread_mutex_lock(&p->mu);
		p->spawn_m = NULL;
		pthread_cond_broadcast(&p->ready);
		k->spawning--;
		if (k->dead) {
			/* evicted while booting: nobody may use it */
			if (k->spawning == 0)
				key_free(k);
			if (sb) {
				pthread_mutex_unlock(&p->mu);
				wd_t3_destroy(sb);
				pthread_mutex_lock(&p->mu);
			}
			return true;
		}
		if (r < 0) {
			p->st.spawn_failures++;
			/* back off: a broken runsc must not spin */
			k->fail_streak++;
			k->retry_at_ns =
			    wd_now_ns() + (uint64_t)WD_MIN(k->fail_streak, 30) *
					      1000000000ull;
			wd_warn("pool '%s': spawn failed: %s", m->name,
				err.msg);
			return true;
		}
		k->fail_streak = 0;
		p->st.spawned++;
		struct entry *e = wd_calloc(1, sizeof(*e));
		e->sb = sb;
		struct entry **tail = &k->ready;
		while (*tail)
			tail = &(*tail)->next;
		*tail = e;
		k->n_ready++;
		pthread_cond_broadcast(&p->ready);
		return true;
	}
	return false;
}

static void *refill_main(void *arg)
{
	struct wd_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		if (refill_once(p))
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->wake, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct wd_pool *wd_pool_new(const struct wd_pool_config *cfg)
{
	struct wd_pool *p = wd_calloc(1, sizeof(*p));
	p->cfg = *cfg;
	if (p->cfg.size <= 0)
		p->cfg.size = 2;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->ready, NULL);
	int r = pthread_create(&p->thr, NULL, refill_main, p);
	if (r) {
		free(p);
		errno = r;
		return NULL;
	}
	return p;
}

void wd_pool_free(struct wd_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thr, NULL);
	for (int i = 0; i < p->n_keys; i++) {
		struct key *k = p->keys[i];
		for (struct entry *e = k->ready, *n; e; e = n) {
			n = e->next;
			wd_t3_destroy(e->sb);
			free(e);
		}
		key_free(k); /* nothing spawns: the thread is joined */
	}
	for (struct entry *e = p->doomed, *n; e; e = n) {
		n = e->next;
		wd_t3_destroy(e->sb);
		free(e);
	}
	free(p->keys);
	free(p->tenants);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->ready);
	free(p);
}

int wd_pool_register(struct wd_pool *p, const struct wd_manifest *m,
		     char *const *argv, uid_t uid, gid_t gid,
		     struct wd_err *err)
{
	if (m->tier != WD_TIER_3)
		return wd_err_set(err, -EINVAL,
				  "pool: '%s' is tier %d, not tier 3", m->name,
				  m->tier);
	/* uid/gid name the principal (the key keeps tenants' sandboxes
	 * apart); each sandbox runs as a uid of its own, allocated when it
	 * boots (spawn_one): not known here */
	int r = wd_t3_precheck(m, (uid_t)-1, (gid_t)-1, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->mu);
	struct key *k = find_key(p, m, argv, uid, gid);
	if (!k) {
		while (p->n_keys >= max_keys(p)) {
			int lru = 0;
			for (int i = 1; i < p->n_keys; i++)
				if (p->keys[i]->used_ns < p->keys[lru]->used_ns)
					lru = i;
			p->st.evicted_cap++;
			evict(p, lru, "max_keys reached, least recently used");
		}
		p->keys =
		    wd_realloc(p->keys, (p->n_keys + 1) * sizeof(*p->keys));
		k = wd_calloc(1, sizeof(*k));
		p->keys[p->n_keys++] = k;
		k->m = m;
		k->argv = argv_dup(argv);
		k->uid = uid;
		k->gid = gid;
		pthread_cond_broadcast(&p->wake);
	}
	k->used_ns = wd_now_ns();
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int wd_pool_wait_ready(struct wd_pool *p, uint32_t timeout_ms)
{
	uint64_t end = wd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		bool all = true;
		for (int i = 0; i < p->n_keys && all; i++)
			all = p->keys[i]->n_ready >= p->cfg.size;
		if (all) {
			pthread_mutex_unlock(&p->mu);
			return 0;
		}
		if (wd_now_ns() >= end)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->ready, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return -ETIMEDOUT;
}

int wd_pool_run(struct wd_pool *p, const struct wd_call *call,
		const char *tenant, struct wd_result *res, struct wd_err *err)
{
	const struct wd_manifest *m = call->manifest;
	struct wd_t3 *sb = NULL;
	struct tenant *t = NULL;
	bool quota_miss = false;

	memset(res, 0, sizeof(*res));
	res->status = WD_ST_SANDBOX_ERROR;
	res->exit_code = 125;
	res->tier = 3;
	if (call->call_id)
		wd_strlcpy(res->call_id, call->call_id, sizeof(res->call_id));
	else
		wd_rand_hex(res->call_id, 16);
	uint64_t t0 = wd_now_ns();
	pthread_mutex_lock(&p->mu);
	struct key *k =
	    find_key(p, m, call->argv, call->caller_uid, call->caller_gid);
	t = tenant_get(p, tenant);
	bool pooled = k != NULL;
	if (k)
		k->used_ns = wd_now_ns();
	if (k && k->ready) {
		if (p->cfg.tenant_quota > 0 &&
		    t->in_use >= p->cfg.tenant_quota) {
			quota_miss = true;
		} else {
			struct entry *e = k->ready;
			k->ready = e->next;
			k->n_ready--;
			sb = e->sb;
			free(e);
			t->in_use++;
			p->st.in_use++;
			p->st.hits++;
			pthread_cond_broadcast(&p->wake); /* refill now */
		}
	}
	if (!sb) {
		p->st.misses++;
		if (quota_miss)
			p->st.quota_misses++;
	}
	pthread_mutex_unlock(&p->mu);

	int r;
	if (!sb) {
		struct wd_call c;
		struct wd_uid_lease *ls = NULL;
		r = wd_sandbox_identity(call, &c, &ls, res, err);
		if (r == 0) {
			r = wd_runner_gvisor.run(&c, res, err);
			wd_sandbox_identity_end(ls, res);
		}
		wd_result_enf(res, "pool",
			      quota_miss ? "cold start (tenant over quota)"
			      : pooled	 ? "cold start (pool empty)"
					 : "cold start (shape not pooled)");
		goto out;
	}
	res->run_uid = sb->uid;
	res->run_gid = sb->gid;
	wd_t3_enforcement(m, sb, res);
	wd_result_enf(
	    res, "pool", "warm (sandbox %s, ready %llu ms)", sb->id,
	    (unsigned long long)((wd_now_ns() - sb->spawned_ns) / 1000000));
	r = wd_t3_finish(sb, m, call, res, err);
	wd_t3_destroy(sb); /* single use, whatever happened */
	pthread_mutex_lock(&p->mu);
	t = tenant_get(p, tenant);
	t->in_use--;
	p->st.in_use--;
	p->st.used++;
	pthread_mutex_unlock(&p->mu);
out:
	res->duration_ns = wd_now_ns() - t0;
	if (r < 0) {
		res->status = WD_ST_SANDBOX_ERROR;
		res->exit_code = 125;
	}
	return r;
}

void wd_pool_stats(struct wd_pool *p, struct wd_pool_stats *out)
{
	pthread_mutex_lock(&p->mu);
	*out = p->st;
	out->ready = out->spawning = 0;
	for (int i = 0; i < p->n_keys; i++) {
		out->ready += p->keys[i]->n_ready;
		out->spawning += p->keys[i]->spawning;
	}
	out->keys = p->n_keys;
	pthread_mutex_unlock(&p->mu);
}

json_t *wd_pool_stats_json(const struct wd_pool_stats *s)
{
	return json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, "
	    "s:i}",
	    "hits", (json_int_t)s->hits, "misses", (json_int_t)s->misses,
	    "quota_misses", (json_int_t)s->quota_misses, "spawned",
	    (json_int_t)s->spawned, "spawn_failures",
	    (json_int_t)s->spawn_failures, "expired", (json_int_t)s->expired,
	    "used", (json_int_t)s->used, "evicted_idle",
	    (json_int_t)s->evicted_idle, "evicted_cap",
	    (json_int_t)s->evicted_cap, "ready", s->ready, "spawning",
	    s->spawning, "in_use", s->in_use, "keys", s->keys);
}

void wd_pool_forget(struct wd_pool *p, const struct wd_manifest *m)
{
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->n_keys;) {
		if (p->keys[i]->m == m)
			evict(p, i, "its policy set was replaced");
		else
			i++;
	}
	/* the refill thread reads m while it boots a sandbox of it */
	while (p->spawn_m == m)
		pthread_cond_wait(&p->ready, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
