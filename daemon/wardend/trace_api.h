/* The read endpoints of wardend's API that answer for the whole fleet with
 * --fleet (trace_api.c; the fleet's own, /v1/fleet/..., fleet_api.c): the trace
 * endpoints (api/request.h WD_EP_RUN_TRACE, WD_EP_RUN_PAYLOAD,
 * WD_EP_TRACE_RUNS, WD_EP_TRACE_RECORDS), authorised per run by the runtime
 * (runtime.h wd_rt_trace_*). */
#ifndef WD_WARDEND_TRACE_API_H
#define WD_WARDEND_TRACE_API_H

#include <jansson.h>

#include "api/request.h"
#include "runtime/runtime.h"

struct wd_fleet;
/* The API's HTTP status of a -errno, one table for every endpoint
 * (server.c): 404 ENOENT, 403 EACCES/EPERM, 400 EINVAL, 409 EALREADY,
 * 503 EBUSY/EAGAIN/EIO/ENOSPC, else 500. */
int wd_http_status(int rc);

/* The HTTP status and a new JSON body ({error} when not 200). fleet (NULL:
 * one node): a run this node's store does not hold is read from the fleet
 * database, and the run list holds every node's runs; with the database
 * unreachable the answer says that other nodes' runs are not available
 * (an error for one run, `unavailable` in a page). */
int wd_trace_api(struct wd_rt *rt, struct wd_fleet *fleet,
		 const struct wd_caller *who, const struct wd_api_req *q,
		 json_t **body);

/* GET /v1/cost: this node's runs, and in a fleet the other nodes' ended
 * runs as shipped (or `unavailable` saying why they are not counted). */
int wd_cost_api(struct wd_rt *rt, struct wd_fleet *fleet,
		const struct wd_caller *who, const struct wd_api_req *q,
		json_t **body);

/* GET /v1/approvals: this node's pending approvals, and in a fleet the
 * other nodes' (fleet.h wd_fleet_approvals); when those cannot be read,
 * err->msg says so (a partial answer: server.c send_json_partial). */
json_t *wd_approvals_api(struct wd_rt *rt, struct wd_fleet *fleet,
			 const struct wd_caller *who, struct wd_err *err);

/* /v1/fleet/... (WD_EP_FLEET_*): the HTTP status and a new JSON body
 * ({error} when not 200); fleet NULL: 404, not in a fleet. */
int wd_fleet_api(struct wd_fleet *fleet, const struct wd_caller *who,
		 const struct wd_api_req *q, json_t **body);

#endif
