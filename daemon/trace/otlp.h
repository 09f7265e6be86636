/* OTLP/HTTP JSON exporter for trace records: model calls become `chat`
 * spans, tool results `execute_tool` spans, denials `denial` spans, with the
 * OpenTelemetry GenAI attribute names; payloads travel as references
 * (warden.prompt_ref, ...), never inline. Best effort: a bounded queue, one
 * sender thread, records dropped (and counted) when the queue is full or the
 * collector fails; feeding never blocks a run. */
#ifndef WD_TRACE_OTLP_H
#define WD_TRACE_OTLP_H

#include <stdint.h>

#include <jansson.h>

#include "common/util.h"

struct wd_otlp;

struct wd_otlp_opts {
	const char *endpoint;	  /* http://host:port[/v1/traces] */
	const char *service_name; /* resource service.name; NULL = "warden" */
	unsigned queue_max;	  /* 0 = 4096 records */
	unsigned batch_max;	  /* spans per request; 0 = 256 */
	unsigned timeout_ms;	  /* per request; 0 = 2000 */
};

int wd_otlp_start(const struct wd_otlp_opts *o, struct wd_otlp **out,
		  struct wd_err *err);
/* Queue a record (copied); returns at once. Records of other types than
 * model_call, tool_result and denial are ignored. */
void wd_otlp_feed(struct wd_otlp *o, json_t *rec);
/* Wait up to timeout_ms until the queue is empty and nothing is in flight;
 * 0 or -ETIMEDOUT. */
int wd_otlp_flush(struct wd_otlp *o, unsigned timeout_ms);
struct wd_otlp_stats {
	uint64_t queued, sent, dropped, failed; /* records / spans */
};
void wd_otlp_stats(struct wd_otlp *o, struct wd_otlp_stats *s);
void wd_otlp_stop(struct wd_otlp *o);
/* The span for one record (NULL if the type has none). For tests. */
json_t *wd_otlp_span(json_t *rec);

#endif
