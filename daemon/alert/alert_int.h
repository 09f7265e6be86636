/* The alerter's state, shared by alert.c (the stream follower, spike
 * detection, alert documents) and alert_views.c (counters, key views,
 * metrics). Not for other boxes: they use alert.h. */
#ifndef WD_ALERT_INT_H
#define WD_ALERT_INT_H

#include <pthread.h>

#include "alert/alert.h"
#include "alert/window.h"

#define NS 1000000000ull

/* Loss counts: the alerter's own overrun, then the stream's sources
 * (enum wd_stream_lost_src, in its order). */
enum { LOST_OVERRUN, LOST_STREAM, LOST_KINDS = LOST_STREAM + WD_LOST_NR };

/* "overrun" or the stream's source of a loss count */
const char *wd_alert_lost_name(int i);

struct wd_alert {
	char node[64];
	uint64_t short_ns, long_ns, cooldown_ns, warmup_ns;
	double factor;
	uint32_t min_count, dims;
	bool denied_only;
	wd_alert_clock_fn clock;
	void *clock_arg;

	struct wd_stream *s;
	struct wd_webhook *wh; /* NULL without a URL */
	struct wd_am *am;      /* NULL without an Alertmanager */

	pthread_mutex_t mu; /* everything below */
	pthread_cond_t cv;  /* done_seq advanced / reader ended */
	struct wd_stream_cursor cur;
	struct wd_akeys keys;
	struct wd_stab series;
	uint64_t start_ns;
	uint64_t processed, done_seq;
	uint64_t alerts_spike, alerts_lost, suppressed;
	uint64_t lost_seen[LOST_KINDS], lost_reported[LOST_KINDS];
	bool loss_alerted;
	uint64_t last_loss_alert_ns, last_loss_grew_ns;
	uint64_t lost_grew_ns[LOST_KINDS]; /* when each reason last grew */
	uint64_t tick_now; /* the reader loop's now, for am_still */
	bool stop, reader_done;
	pthread_t thr;
};

static inline uint64_t wd_alert_now(struct wd_alert *a)
{
	return a->clock(a->clock_arg);
}

/* A key's windows judged at now: short and long counts, the baseline per
 * short window, the threshold, and whether it is a spike. Under a->mu. */
struct wd_judged {
	uint64_t sc, lc;
	double base, thr;
	bool spike;
};

void wd_alert_judge(struct wd_alert *a, struct wd_akey *k, uint64_t now,
		    struct wd_judged *j);

#endif
