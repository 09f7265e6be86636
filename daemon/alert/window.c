/* Sliding windows, the LRU key table and the labelled counter table. */
#include "alert/window.h"

#include <string.h>

#include "common/util.h"

void wd_win_init(struct wd_win *w, uint64_t window_ns)
{
	memset(w, 0, sizeof(*w));
	w->bucket_ns = WD_MAX(window_ns / WD_WIN_BUCKETS, 1);
}

static void win_advance(struct wd_win *w, uint64_t idx)
{
	if (idx <= w->head)
		return;
	if (idx - w->head >= WD_WIN_BUCKETS) {
		memset(w->cnt, 0, sizeof(w->cnt));
		w->total = 0;
	} else {
		for (uint64_t i = w->head + 1; i <= idx; i++) {
			w->total -= w->cnt[i % WD_WIN_BUCKETS];
			w->cnt[i % WD_WIN_BUCKETS] = 0;
		}
	}
	w->head = idx;
}

void wd_win_add(struct wd_win *w, uint64_t now, uint32_t n)
{
	win_advance(w, now / w->bucket_ns);
	w->cnt[w->head % WD_WIN_BUCKETS] += n;
	w->total += n;
}

uint64_t wd_win_count(const struct wd_win *w, uint64_t now)
{
	uint64_t idx = now / w->bucket_ns;
	if (idx <= w->head)
		return w->total;
	if (idx - w->head >= WD_WIN_BUCKETS)
		return 0;
	/* buckets head+1..idx would be recycled: drop what they hold now */
	uint64_t t = w->total;
	for (uint64_t i = w->head + 1; i <= idx; i++)
		t -= w->cnt[i % WD_WIN_BUCKETS];
	return t;
}

/* FNV-1a over the dimension and the value. */
static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	h ^= 0xff;
	h *= 1099511628211ull;
	return h;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 16;
	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

void wd_akeys_init(struct wd_akeys *t, uint32_t max, uint64_t short_ns,
		   uint64_t long_ns)
{
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->nbuckets = pow2_at_least(max * 2);
	t->tab = wd_calloc(t->nbuckets, sizeof(*t->tab));
	t->short_ns = short_ns;
	t->long_ns = long_ns;
}

void wd_akeys_free(struct wd_akeys *t)
{
	struct wd_akey *k = t->oldest;
	while (k) {
		struct wd_akey *n = k->newer;
		free(k);
		k = n;
	}
	free(t->tab);
	memset(t, 0, sizeof(*t));
}

static uint64_t key_hash(int dim, const char *value)
{
	return hash_str(14695981039346656037ull ^ (uint64_t)dim, value);
}

struct wd_akey *wd_akeys_find(struct wd_akeys *t, int dim, const char *value)
{
	uint64_t h = key_hash(dim, value);
	for (struct wd_akey *k = t->tab[h & (t->nbuckets - 1)]; k; k = k->hnext)
		if (k->hash == h && k->dim == dim && !strcmp(k->value, value))
			return k;
	return NULL;
}

static void lru_unlink(struct wd_akeys *t, struct wd_akey *k)
{
	if (k->older)
		k->older->newer = k->newer;
	else
		t->oldest = k->newer;
	if (k->newer)
		k->newer->older = k->older;
	else
		t->newest = k->older;
	k->older = k->newer = NULL;
}

static void lru_push_newest(struct wd_akeys *t, struct wd_akey *k)
{
	k->older = t->newest;
	k->newer = NULL;
	if (t->newest)
		t->newest->newer = k;
	else
		t->oldest = k;
	t->newest = k;
}

static void hash_unlink(struct wd_akeys *t, struct wd_akey *k)
{
	struct wd_akey **pp = &t->tab[k->hash & (t->nbuckets - 1)];
	while (*pp && *pp != k)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = k->hnext;
}

struct wd_akey *wd_akeys_touch(struct wd_akeys *t, int dim, const char *value,
			       uint64_t now)
{
	struct wd_akey *k = wd_akeys_find(t, dim, value);
	if (k) {
		if (t->newest != k) {
			lru_unlink(t, k);
			lru_push_newest(t, k);
		}
		return k;
	}
	if (t->n >= t->max && t->oldest) {
		/* reuse the least recently touched key's memory */
		k = t->oldest;
		lru_unlink(t, k);
		hash_unlink(t, k);
		t->n--;
		t->evicted++;
		memset(k, 0, sizeof(*k));
	} else {
		k = wd_calloc(1, sizeof(*k));
	}
	k->dim = dim;
	wd_strlcpy(k->value, value, sizeof(k->value));
	k->hash = key_hash(dim, k->value);
	wd_win_init(&k->s, t->short_ns);
	wd_win_init(&k->l, t->long_ns);
	uint32_t b = k->hash & (t->nbuckets - 1);
	k->hnext = t->tab[b];
	t->tab[b] = k;
	lru_push_newest(t, k);
	t->n++;
	return k;
}

void wd_stab_init(struct wd_stab *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->nbuckets = pow2_at_least(max * 2);
	t->tab = wd_calloc(t->nbuckets, sizeof(*t->tab));
}

void wd_stab_free(struct wd_stab *t)
{
	struct wd_series *s = t->first;
	while (s) {
		struct wd_series *n = s->next;
		free(s);
		s = n;
	}
	free(t->other);
	free(t->tab);
	memset(t, 0, sizeof(*t));
}

static void series_fill(struct wd_series *s, const char *source,
			const char *kind, const char *team, const char *tool,
			const char *verdict)
{
	wd_strlcpy(s->source, source, sizeof(s->source));
	wd_strlcpy(s->kind, kind, sizeof(s->kind));
	wd_strlcpy(s->team, team, sizeof(s->team));
	wd_strlcpy(s->tool, tool, sizeof(s->tool));
	wd_strlcpy(s->verdict, verdict, sizeof(s->verdict));
}

void wd_stab_add(struct wd_stab *t, const char *source, const char *kind,
		 const char *team, const char *tool, const char *verdict)
{
	uint64_t h = 14695981039346656037ull;
	h = hash_str(h, source);
	h = hash_str(h, kind);
	h = hash_str(h, team);
	h = hash_str(h, tool);
	h = hash_str(h, verdict);
	uint32_t b = h & (t->nbuckets - 1);
	for (struct wd_series *s = t->tab[b]; s; s = s->hnext)
		if (s->hash == h && !strcmp(s->source, source) &&
		    !strcmp(s->kind, kind) && !strcmp(s->team, team) &&
		    !strcmp(s->tool, tool) && !strcmp(s->verdict, verdict)) {
			s->count++;
			return;
		}
	if (t->n >= t->max) {
		/* bounded label cardinality: totals stay exact */
		if (!t->other) {
			t->other = wd_calloc(1, sizeof(*t->other));
			series_fill(t->other, "other", "other", "other",
				    "other", "other");
		}
		t->other->count++;
		return;
	}
	struct wd_series *s = wd_calloc(1, sizeof(*s));
	series_fill(s, source, kind, team, tool, verdict);
	s->hash = h;
	s->count = 1;
	s->hnext = t->tab[b];
	t->tab[b] = s;
	if (t->last)
		t->last->next = s;
	else
		t->first = s;
	t->last = s;
	t->n++;
}
