/* The alert webhook: a bounded queue of JSON documents and one sender
 * thread POSTing them with libcurl, retrying with exponential backoff.
 * wd_webhook_push never blocks: a full queue drops the document (counted).
 * Internal to daemon/alert/.
 */
#ifndef WD_ALERT_WEBHOOK_H
#define WD_ALERT_WEBHOOK_H

#include <stdint.h>

struct wd_webhook;

struct wd_webhook_stats {
	uint64_t sent, failures, retries, dropped;
	uint32_t depth;
};

/* url must be http:// or https:// (other schemes: NULL + EINVAL). */
struct wd_webhook *wd_webhook_new(const char *url, uint32_t queue_max,
				  uint32_t timeout_ms, uint32_t max_retries,
				  uint32_t backoff_ms);
/* Stops the sender (an attempt in flight finishes within timeout_ms; a
 * backoff wait is cut short); what is still queued counts as dropped. */
void wd_webhook_free(struct wd_webhook *w);
/* Takes ownership of body (malloc'd). 0, or -ENOSPC when dropped. */
int wd_webhook_push(struct wd_webhook *w, char *body);
void wd_webhook_stats(struct wd_webhook *w, struct wd_webhook_stats *out);
/* 0 once the queue is empty and nothing is in flight, else -ETIMEDOUT. */
int wd_webhook_flush(struct wd_webhook *w, int timeout_ms);

#endif
