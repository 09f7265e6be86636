/* Sliding-window counters and the bounded key table behind alerting.
 * Pure data structures: no locks, no clock of their own (callers pass
 * `now` in ns). Internal to daemon/alert/.
 */
#ifndef WD_ALERT_WINDOW_H
#define WD_ALERT_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "events/stream.h"

#define WD_WIN_BUCKETS 60

/* A window of WD_WIN_BUCKETS buckets of bucket_ns each; counts events in
 * the buckets covering (now - window, now]. Time must not go backwards by
 * more than a bucket (earlier adds go to the current bucket). */
struct wd_win {
	uint64_t bucket_ns;
	uint64_t head; /* absolute index of the newest bucket */
	uint64_t total;
	uint32_t cnt[WD_WIN_BUCKETS];
};

void wd_win_init(struct wd_win *w, uint64_t window_ns);
void wd_win_add(struct wd_win *w, uint64_t now, uint32_t n);
/* Count at `now` without modifying the window. */
uint64_t wd_win_count(const struct wd_win *w, uint64_t now);

/* One alert key: a dimension and its value, with its two windows. */
struct wd_akey {
	int dim;
	char value[136];
	uint64_t hash;
	struct wd_akey *hnext;
	struct wd_akey *older, *newer; /* LRU list */
	struct wd_win s, l;
	bool in_spike;
	bool alerted;
	uint64_t last_alert_ns;
	uint64_t alerts;
	uint64_t first_ns; /* when `first` was taken */
	struct wd_stream_entry first, last;
};

struct wd_akeys {
	struct wd_akey **tab;
	uint32_t nbuckets; /* power of two */
	uint32_t n, max;
	uint64_t evicted;
	struct wd_akey *oldest, *newest;
	uint64_t short_ns, long_ns;
};

void wd_akeys_init(struct wd_akeys *t, uint32_t max, uint64_t short_ns,
		   uint64_t long_ns);
void wd_akeys_free(struct wd_akeys *t);
struct wd_akey *wd_akeys_find(struct wd_akeys *t, int dim, const char *value);
/* Find or create (evicting the least recently touched key when full) and
 * mark most recently touched. Never NULL. */
struct wd_akey *wd_akeys_touch(struct wd_akeys *t, int dim, const char *value,
			       uint64_t now);

/* Labelled counters: one per (source, kind, team, tool, verdict) up to
 * max series; further label sets add to the series with labels "other". */
struct wd_series {
	char source[16], kind[WD_EVENT_KIND_LEN], team[64], tool[64],
	    verdict[12];
	uint64_t hash;
	uint64_t count;
	struct wd_series *hnext, *next; /* hash chain, insertion order */
};

struct wd_stab {
	struct wd_series **tab;
	uint32_t nbuckets, n, max;
	struct wd_series *first, *last;
	struct wd_series *other;
};

void wd_stab_init(struct wd_stab *t, uint32_t max);
void wd_stab_free(struct wd_stab *t);
void wd_stab_add(struct wd_stab *t, const char *source, const char *kind,
		 const char *team, const char *tool, const char *verdict);

#endif
