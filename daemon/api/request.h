/* Parsing of wardend API requests (method, path, query, JSON body) into a
 * typed request, shared by the daemon and the fuzz target. Everything the
 * client sends is untrusted: ids are checked against a strict alphabet,
 * bodies against the fields each endpoint takes. The caller's identity is
 * NOT part of a request: it comes from the socket (SO_PEERCRED).
 */
#ifndef WD_API_REQUEST_H
#define WD_API_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"

enum wd_api_ep {
	WD_EP_HEALTHZ,	       /* GET  /healthz */
	WD_EP_RUN_CREATE,      /* POST /v1/runs {agent, task} */
	WD_EP_RUN_LIST,	       /* GET  /v1/runs */
	WD_EP_RUN_GET,	       /* GET  /v1/runs/ID */
	WD_EP_RUN_STREAM,      /* GET  /v1/runs/ID/stream[?since=N] */
	WD_EP_APPROVAL_LIST,   /* GET  /v1/approvals */
	WD_EP_APPROVAL_DECIDE, /* POST /v1/approvals/ID {decision, reason} */
	WD_EP_COST,	       /* GET  /v1/cost?by=team|agent|user&since= */
	WD_EP_EVENTS,	       /* GET  /v1/events?follow=1&since=SEQ */
	WD_EP_POLICY_RELOAD,   /* POST /v1/policy/reload */
	WD_EP_STATUS,	       /* GET  /v1/status */
	WD_EP_METRICS,	       /* GET  /metrics */
	WD_EP_RUN_REPLAY,      /* POST /v1/runs/ID/replay {from, ...}
				* (runtime.h wd_rt_replay_create) */
	/* trace reads, authorised per run (runtime.h wd_rt_trace_*) */
	WD_EP_RUN_TRACE,     /* GET  /v1/runs/ID/trace */
	WD_EP_RUN_PAYLOAD,   /* GET  /v1/runs/ID/payload/STEP[?type=T] */
	WD_EP_TRACE_RUNS,    /* GET  /v1/trace/runs?agent,team,user,tool,
			      * status,since */
	WD_EP_TRACE_RECORDS, /* GET  /v1/trace/records?tool,status,
			      * prompt_hash,result_hash,agent,team,user,
			      * since,limit,after: one page */
	/* with --fleet (fleet/fleet.h) */
	WD_EP_FLEET_RUN_GET, /* GET  /v1/fleet/runs/ID */
	WD_EP_FLEET_RUNS,    /* GET  /v1/fleet/runs?state=S&limit=N (tq[STATUS],
			      * limit: 1..1000, default 100) */
	WD_EP_FLEET_NODES,   /* GET  /v1/fleet/nodes */
	WD_EP_FLEET_TRACE_RUNS, /* GET  /v1/fleet/trace/runs?limit=N */
	WD_EP_FLEET_TRACE_RUN,	/* GET  /v1/fleet/trace/runs/ID */
	WD_EP_FLEET_COST, /* GET  /v1/fleet/cost?by=team|agent|user&since= */
	WD_EP_FLEET_TRACE_VERIFY, /* GET  /v1/fleet/trace/verify[?run=ID]
				   * (id: "" = every node) */
	WD_EP_FLEET_TRACE_GC,	  /* POST /v1/fleet/trace/gc
				   * {metadata_days} (days; 0 = default) */
};

/* The filters of the trace endpoints (query string; NULL = absent). */
enum {
	WD_TQ_AGENT,
	WD_TQ_TEAM,
	WD_TQ_USER,
	WD_TQ_TOOL,
	WD_TQ_STATUS,
	WD_TQ_PROMPT_HASH,
	WD_TQ_RESULT_HASH,
	WD_TQ_TYPE,
	WD_TQ_REPLAY_OF, /* /v1/trace/runs only: the replays of a run */
	WD_TQ__COUNT,
};

#define WD_API_ID_MAX 64

struct wd_api_req {
	enum wd_api_ep ep;
	char id[WD_API_ID_MAX + 1]; /* run or approval id */
	/* run create */
	char *agent, *task;
	/* approval */
	bool approve;
	char *reason;
	/* cost */
	char by[8]; /* "team" | "agent" | "user" */
	uint64_t since_ns;
	/* replay: the body's options, checked by the runtime */
	json_t *replay;
	/* trace reads */
	char *tq[WD_TQ__COUNT];
	int64_t step;	    /* payload */
	unsigned limit;	    /* records, runs: page size (always set, 1..max) */
	uint64_t after_seq; /* records: seq > after_seq; runs: the cursor's
			       start */
	/* runs: the cursor's run id; records: its node (a fleet's other
	 * nodes' records, after this node's) */
	char after_run[WD_API_ID_MAX + 1];
	bool after_fleet; /* records: the cursor is NODE.SEQ */
	/* fleet trace gc: 1..36500, 0 = the default */
	unsigned days;
	/* events / stream */
	bool follow;
	uint64_t since_seq;
};

/* Query strings arrive already split by the HTTP library: `query(key)`
 * returns the value or NULL. Returns 0, or an HTTP status (400, 404, 405)
 * with a message in err. */
int wd_api_parse(const char *method, const char *path,
		 const char *(*query)(void *arg, const char *key), void *qarg,
		 const char *body, size_t body_len, struct wd_api_req *req,
		 struct wd_err *err);
void wd_api_req_free(struct wd_api_req *req);
/* The query keys endpoint `ep` reads, space separated ("" for none): the
 * caller refuses any other key (an answer to a question that was not
 * asked is no answer). /metrics and /healthz take whatever a scraper or a
 * probe adds. */
const char *wd_api_query_keys(enum wd_api_ep ep);
bool wd_api_query_key_ok(enum wd_api_ep ep, const char *key);

/* "2026-11-29", "2026-11-29T10:00:00Z", "24h", "7d", "30m", or seconds since
 * the epoch; 0 or -EINVAL. */
int wd_api_parse_since(const char *s, uint64_t now_wall_ns, uint64_t *out_ns);

/* True if s is a valid run/approval id ([A-Za-z0-9_-], 1..64). */
bool wd_api_id_ok(const char *s);

#endif
