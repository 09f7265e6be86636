/* Tier 2's mount plans, cached per manifest shape: see plancache.h. */
#include "sandbox/plancache.h"

#include <pthread.h>
#include <string.h>

#define PLAN_SLOTS 8

struct entry {
	char *key;
	size_t key_len;
	struct wd_mount_plan *plan;
	uint64_t born;
	int refs; /* the cache's own (while cached) + the calls' */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *slot[PLAN_SLOTS];
static int next_slot;

static void key_add(struct wd_buf *b, const char *s)
{
	wd_buf_append(b, s, strlen(s) + 1); /* with its NUL: no ambiguity */
}

static void key_list(struct wd_buf *b, char tag, const struct wd_path_list *l)
{
	char h[32];
	int n = snprintf(h, sizeof(h), "%c%d", tag, l->n);
	wd_buf_append(b, h, n + 1);
	for (int i = 0; i < l->n; i++)
		key_add(b, l->v[i]);
}

/* Everything wd_mounts_plan reads of the manifest, and the root. */
static void make_key(struct wd_buf *b, const char *root,
		     const struct wd_manifest *m)
{
	char h[32];
	key_add(b, root);
	int n = snprintf(h, sizeof(h), "m%u", m->memory_mb);
	wd_buf_append(b, h, n + 1);
	key_list(b, 'r', &m->fs_read);
	key_list(b, 'x', &m->fs_exec);
	key_list(b, 'w', &m->fs_write);
}

/* with mu held */
static void unref_locked(struct entry *e)
{
	if (--e->refs > 0)
		return;
	wd_mounts_plan_free(e->plan);
	free(e->key);
	free(e);
}

int wd_plan_get(struct wd_mount_plan **plan, void **ref, const char *root,
		const struct wd_manifest *m, struct wd_err *err)
{
	struct wd_buf k = {0};
	make_key(&k, root, m);
	uint64_t now = wd_now_ns();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < PLAN_SLOTS; i++) {
		struct entry *e = slot[i];
		if (!e || e->key_len != k.len || memcmp(e->key, k.data, k.len))
			continue;
		if (now - e->born >= WD_PLAN_TTL_NS) {
			slot[i] = NULL; /* read the host again */
			unref_locked(e);
			continue;
		}
		e->refs++;
		pthread_mutex_unlock(&mu);
		wd_buf_free(&k);
		*plan = e->plan;
		*ref = e;
		return 0;
	}
	pthread_mutex_unlock(&mu);
	struct wd_mount_plan *p = NULL;
	int r = wd_mounts_plan(&p, root, m, err);
	if (r < 0) {
		wd_buf_free(&k);
		return r;
	}
	struct entry *e = wd_calloc(1, sizeof(*e));
	e->key = k.data; /* the buffer's bytes, now the entry's */
	e->key_len = k.len;
	e->plan = p;
	e->born = now;
	e->refs = 2; /* the cache's and the caller's */
	pthread_mutex_lock(&mu);
	int s = next_slot++ % PLAN_SLOTS;
	if (slot[s])
		unref_locked(slot[s]);
	slot[s] = e;
	pthread_mutex_unlock(&mu);
	*plan = p;
	*ref = e;
	return 0;
}

void wd_plan_put(void *ref)
{
	if (!ref)
		return;
	pthread_mutex_lock(&mu);
	unref_locked(ref);
	pthread_mutex_unlock(&mu);
}

void wd_plan_cache_clear(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < PLAN_SLOTS; i++)
		if (slot[i]) {
			unref_locked(slot[i]);
			slot[i] = NULL;
		}
	pthread_mutex_unlock(&mu);
}
