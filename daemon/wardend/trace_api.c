#include "wardend/trace_api.h"

#include "fleet/fleet.h"
#include "trace/trace.h"

#include <string.h>

static int status_of(int rc)
{
	switch (rc) {
	case -ENOENT:
		return 404;
	case -EACCES:
	case -EPERM:
		return 403;
	case -EINVAL:
		return 400;
	case -EAGAIN:
	case -EIO:
	case -ENOSPC:
		return 503; /* the read could not be recorded */
	}
	return 500;
}

/* /v1/trace/runs in a fleet: this node's runs and the others' shipped
 * ones, one page in one order; each row names its node. */
static int fleet_runs(struct wd_rt *rt, struct wd_fleet *fleet,
		      const struct wd_caller *who,
		      const struct wd_trace_query *tq, json_t **o,
		      struct wd_err *err)
{
	struct wd_err fe = {0};
	json_t *extra = wd_fleet_trace_page(fleet, who, tq, tq->limit + 1, &fe);
	bool shown = extra != NULL;
	int rc = wd_rt_trace_runs_with(rt, who, tq, extra, o, err);
	json_decref(extra);
	if (rc)
		return rc;
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(*o, "runs"), i, r)
	{
		if (!json_object_get(r, "node"))
			json_object_set_new(
			    r, "node", json_string(wd_fleet_node_id(fleet)));
	}
	/* never silently partial */
	if (!shown)
		json_object_set_new(
		    *o, "unavailable",
		    json_sprintf("other nodes' runs are not listed: %s",
				 fe.msg));
	return 0;
}

int wd_trace_api(struct wd_rt *rt, struct wd_fleet *fleet,
		 const struct wd_caller *who, const struct wd_api_req *q,
		 json_t **body)
{
	struct wd_err err = {0};
	struct wd_trace_query tq = {.agent = q->tq[WD_TQ_AGENT],
				    .team = q->tq[WD_TQ_TEAM],
				    .user = q->tq[WD_TQ_USER],
				    .tool = q->tq[WD_TQ_TOOL],
				    .status = q->tq[WD_TQ_STATUS],
				    .prompt_hash = q->tq[WD_TQ_PROMPT_HASH],
				    .result_hash = q->tq[WD_TQ_RESULT_HASH],
				    .replay_of = q->tq[WD_TQ_REPLAY_OF],
				    .since_ns = q->since_ns,
				    .limit = q->limit,
				    .after_seq = q->after_seq};
	if (q->ep == WD_EP_TRACE_RUNS) {
		tq.after_seq = 0;
		tq.page = true;
		tq.after_started = q->after_seq;
		tq.after_run = q->after_run[0] ? q->after_run : NULL;
	}
	json_t *o = NULL;
	int rc = -EINVAL;
	struct wd_rt_trace_src src;
	switch (q->ep) {
	case WD_EP_RUN_TRACE:
		rc = wd_rt_trace_records(rt, who, q->id, &o, &err);
		/* not this node's: another node's, from the fleet */
		if (rc == -ENOENT && fleet) {
			memset(&err, 0, sizeof(err));
			wd_fleet_trace_src(fleet, &src);
			rc = wd_rt_trace_records_from(rt, who, q->id, &src, &o,
						      &err);
		}
		break;
	case WD_EP_RUN_PAYLOAD:
		rc = wd_rt_trace_payload(rt, who, q->id, q->step,
					 q->tq[WD_TQ_TYPE], &o, &err);
		if (rc == -ENOENT && fleet && !wd_rt_trace_holds(rt, q->id)) {
			memset(&err, 0, sizeof(err));
			wd_fleet_trace_src(fleet, &src);
			rc = wd_rt_trace_payload_from(rt, who, q->id, q->step,
						      q->tq[WD_TQ_TYPE], &src,
						      &o, &err);
		}
		break;
	case WD_EP_TRACE_RUNS:
		rc = fleet ? fleet_runs(rt, fleet, who, &tq, &o, &err)
			   : wd_rt_trace_runs(rt, who, &tq, &o, &err);
		break;
	case WD_EP_TRACE_RECORDS:
		rc = wd_rt_trace_grep(rt, who, &tq, &o, &err);
		break;
	default:
		wd_err_set(&err, -EINVAL, "not a trace endpoint");
	}
	if (rc) {
		*body = json_pack("{s:s}", "error",
				  err.msg[0] ? err.msg : strerror(-rc));
		return status_of(rc);
	}
	*body = o;
	return 200;
}

int wd_cost_api(struct wd_rt *rt, struct wd_fleet *fleet,
		const struct wd_caller *who, const struct wd_api_req *q,
		json_t **body)
{
	struct wd_err err = {0}, fe = {0};
	json_t *extra =
	    fleet ? wd_fleet_cost_runs(fleet, who, q->since_ns, &fe) : NULL;
	bool counted = extra != NULL;
	json_t *o = wd_rt_cost_with(rt, who, q->by, q->since_ns, extra, &err);
	json_decref(extra);
	if (!o) {
		*body = json_pack("{s:s}", "error", err.msg);
		return 500;
	}
	if (fleet && counted)
		json_object_set_new(o, "fleet",
				    json_string("this node's runs and the "
						"other nodes' ended runs as "
						"shipped"));
	else if (fleet)
		json_object_set_new(
		    o, "unavailable",
		    json_sprintf("other nodes' runs are not counted: %s",
				 fe.msg));
	*body = o;
	return 200;
}
