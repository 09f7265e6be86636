/* The fleet's own endpoints of wardend's API (/v1/fleet/...: api/request.h
 * WD_EP_FLEET_*), answered from the fleet database by fleet/fleet.h; on a
 * node without --fleet, 404 saying so. */
#include "wardend/trace_api.h"

#include <errno.h>

#include "fleet/fleet.h"

int wd_fleet_api(struct wd_fleet *f, const struct wd_caller *who,
		 const struct wd_api_req *q, json_t **body)
{
	struct wd_err err = {0};
	json_t *o = NULL;
	/* the views that fail only when the database cannot be read */
	bool db_only = false;
	if (!f) {
		*body = json_pack("{s:s}", "error",
				  "this node is not in a fleet (wardend "
				  "--fleet URL)");
		return 404;
	}
	switch (q->ep) {
	case WD_EP_FLEET_RUN_GET:
		o = wd_fleet_run_get(f, who, q->id, &err);
		break;
	case WD_EP_FLEET_RUNS:
		o = wd_fleet_runs(f, who, q->tq[WD_TQ_STATUS], q->limit, &err);
		db_only = true;
		break;
	case WD_EP_FLEET_TRACE_RUNS:
		o = wd_fleet_trace_runs(f, who, q->limit, &err);
		db_only = true;
		break;
	case WD_EP_FLEET_TRACE_RUN:
		o = wd_fleet_trace_run(f, who, q->id, &err);
		break;
	case WD_EP_FLEET_COST:
		o = wd_fleet_cost(f, who, q->by, q->since_ns, &err);
		break;
	case WD_EP_FLEET_TRACE_VERIFY:
		o = wd_fleet_trace_verify(f, who, q->id[0] ? q->id : NULL,
					  &err);
		break;
	case WD_EP_FLEET_TRACE_GC:
		o = wd_fleet_trace_gc(f, who, q->days, &err);
		break;
	case WD_EP_FLEET_NODES:
		o = wd_fleet_nodes(f, &err);
		db_only = true;
		break;
	default:
		*body = json_pack("{s:s}", "error", "not a fleet endpoint");
		return 500;
	}
	int e = errno;
	if (o) {
		*body = o;
		return 200;
	}
	*body = json_pack("{s:s}", "error", err.msg);
	/* the code the view set with its message, else its errno */
	return db_only ? 503 : wd_http_status(err.code ? err.code : -e);
}
