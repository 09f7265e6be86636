/* Rate limiter with fixed-size state per key: see ratelimit.h. */
#include "broker/ratelimit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct rl_entry {
	struct rl_entry *next;
	char *who, *key;
	int count, per_s; /* the limit the window was kept for */
	uint64_t width_ns;
	uint64_t last_slot; /* slot number (now / width) of the last take */
	uint32_t n[WD_RL_SLOTS];
};

/* Keys hash by owner: a run's keys share a chain, so forgetting a run
 * walks one chain, not the table. */
#define RL_BUCKETS 1024
struct wd_ratelimit {
	pthread_mutex_t mu;
	struct rl_entry *b[RL_BUCKETS];
	unsigned sweep; /* next chain the expiry sweep looks at */
	size_t n_keys, bytes;
};

struct wd_ratelimit *wd_ratelimit_new(void)
{
	struct wd_ratelimit *rl = wd_calloc(1, sizeof(*rl));
	pthread_mutex_init(&rl->mu, NULL);
	return rl;
}

static size_t entry_bytes(const struct rl_entry *e)
{
	return sizeof(*e) + strlen(e->who) + 1 + strlen(e->key) + 1;
}

/* Lock held. */
static void entry_drop(struct wd_ratelimit *rl, struct rl_entry **pp)
{
	struct rl_entry *e = *pp;
	*pp = e->next;
	rl->n_keys--;
	rl->bytes -= entry_bytes(e);
	free(e->who);
	free(e->key);
	free(e);
}

void wd_ratelimit_free(struct wd_ratelimit *rl)
{
	if (!rl)
		return;
	for (int i = 0; i < RL_BUCKETS; i++)
		while (rl->b[i])
			entry_drop(rl, &rl->b[i]);
	pthread_mutex_destroy(&rl->mu);
	free(rl);
}

static unsigned hash_str(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Advance e's ring to slot s: the buckets that left the window are
 * zeroed. Lock held. */
static void advance(struct rl_entry *e, uint64_t s)
{
	if (s <= e->last_slot)
		return;
	if (s - e->last_slot >= WD_RL_SLOTS)
		memset(e->n, 0, sizeof(e->n));
	else
		for (uint64_t x = e->last_slot + 1; x <= s; x++)
			e->n[x % WD_RL_SLOTS] = 0;
	e->last_slot = s;
}

/* Nothing taken within the ring's span: the key holds no state worth
 * keeping. */
static bool expired(const struct rl_entry *e, uint64_t now_ns)
{
	return now_ns / e->width_ns - e->last_slot >= WD_RL_SLOTS;
}

/* Lock held: evict the expired keys of one chain per take, round robin,
 * so user and agent keys (which no run end forgets) go away without a
 * timer thread: with 1024 chains, within 1024 takes of expiring. */
static void sweep_one(struct wd_ratelimit *rl, uint64_t now_ns)
{
	struct rl_entry **pp = &rl->b[rl->sweep++ % RL_BUCKETS];
	while (*pp) {
		if (expired(*pp, now_ns))
			entry_drop(rl, pp);
		else
			pp = &(*pp)->next;
	}
}

bool wd_ratelimit_take(struct wd_ratelimit *rl, const char *who,
		       const char *key, int count, int per_s, uint64_t now_ns)
{
	if (count <= 0 || per_s <= 0)
		return true;
	pthread_mutex_lock(&rl->mu);
	sweep_one(rl, now_ns);
	struct rl_entry **pp = &rl->b[hash_str(who) % RL_BUCKETS], *e = *pp;
	while (e && (strcmp(e->key, key) || strcmp(e->who, who)))
		e = e->next;
	if (!e) {
		e = wd_calloc(1, sizeof(*e));
		e->who = wd_strdup(who);
		e->key = wd_strdup(key);
		e->next = *pp;
		*pp = e;
		rl->n_keys++;
		rl->bytes += entry_bytes(e);
	}
	if (e->count != count || e->per_s != per_s) {
		/* new key, or the policy changed: a fresh window */
		e->count = count;
		e->per_s = per_s;
		/* WD_RL_SLOTS - 1 whole buckets cover the window, so the
		 * sum over the ring counts at least every call of the last
		 * per_s seconds (ratelimit.h: never more than N) */
		uint64_t win = (uint64_t)per_s * 1000000000ull;
		e->width_ns = (win + WD_RL_SLOTS - 2) / (WD_RL_SLOTS - 1);
		memset(e->n, 0, sizeof(e->n));
		e->last_slot = now_ns / e->width_ns;
	}
	uint64_t s = now_ns / e->width_ns;
	advance(e, s);
	uint64_t sum = 0;
	for (int i = 0; i < WD_RL_SLOTS; i++)
		sum += e->n[i];
	bool ok = sum < (uint64_t)count;
	if (ok)
		e->n[s % WD_RL_SLOTS]++;
	pthread_mutex_unlock(&rl->mu);
	return ok;
}

void wd_ratelimit_forget(struct wd_ratelimit *rl, const char *who)
{
	pthread_mutex_lock(&rl->mu);
	struct rl_entry **pp = &rl->b[hash_str(who) % RL_BUCKETS];
	while (*pp) {
		if (!strcmp((*pp)->who, who))
			entry_drop(rl, pp);
		else
			pp = &(*pp)->next;
	}
	pthread_mutex_unlock(&rl->mu);
}

size_t wd_ratelimit_keys(struct wd_ratelimit *rl, size_t *bytes)
{
	pthread_mutex_lock(&rl->mu);
	size_t n = rl->n_keys;
	if (bytes)
		*bytes = rl->bytes;
	pthread_mutex_unlock(&rl->mu);
	return n;
}
