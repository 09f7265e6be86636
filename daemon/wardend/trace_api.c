#include "wardend/trace_api.h"

#include "fleet/fleet.h"
#include "trace/records.h"
#include "trace/trace.h"

#include <string.h>

/* each row of a fleet's answer names its node */
static void name_node(json_t *rows, struct wd_fleet *fleet)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		if (!json_object_get(r, "node"))
			json_object_set_new(
			    r, "node", json_string(wd_fleet_node_id(fleet)));
	}
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
	name_node(json_object_get(*o, "runs"), fleet);
	/* never silently partial */
	if (!shown)
		json_object_set_new(
		    *o, "unavailable",
		    json_sprintf("other nodes' runs are not listed: %s",
				 fe.msg));
	return 0;
}

/* /v1/trace/records in a fleet: this node's records (the seq cursor),
 * then the other nodes' shipped index rows by (node, seq), whose cursor is
 * "NODE.SEQ" (".0": from their first). */
static int fleet_records(struct wd_rt *rt, struct wd_fleet *fleet,
			 const struct wd_caller *who,
			 const struct wd_api_req *q,
			 const struct wd_trace_query *tq, json_t **o,
			 struct wd_err *err)
{
	json_t *page = NULL;
	if (!q->after_fleet) {
		int rc = wd_rt_trace_grep(rt, who, tq, &page, err);
		if (rc)
			return rc;
		name_node(json_object_get(page, "records"), fleet);
		if (json_is_true(json_object_get(page, "more"))) {
			*o = page;
			return 0;
		}
	} else {
		page = json_pack("{s:[],s:b}", "records", "more", 0);
	}
	json_t *recs = json_object_get(page, "records");
	size_t room = tq->limit - json_array_size(recs);
	struct wd_err fe = {0};
	json_t *more = wd_fleet_trace_records(
	    fleet, who, tq, q->after_fleet ? q->after_run : "",
	    q->after_fleet ? (int64_t)q->after_seq : 0, (unsigned)room + 1,
	    &fe);
	*o = page;
	if (!more) {
		json_object_set_new(
		    page, "unavailable",
		    json_sprintf("other nodes' records are not included: %s",
				 fe.msg));
		return 0;
	}
	size_t n = json_array_size(more);
	for (size_t i = 0; i < n && i < room; i++)
		json_array_append(recs, json_array_get(more, i));
	json_decref(more);
	if (n <= room)
		return 0;
	/* the last row handed out is the cursor: this node's (the others'
	 * from their first) or another node's */
	json_t *last = json_array_get(recs, json_array_size(recs) - 1);
	const char *node = json_string_value(json_object_get(last, "node"));
	bool own = !last || !node || !strcmp(node, wd_fleet_node_id(fleet));
	json_object_set_new(page, "more", json_true());
	json_object_set_new(
	    page, "next_after",
	    own ? json_string(".0")
		: json_sprintf("%s.%lld", node,
			       (long long)json_integer_value(
				   json_object_get(last, "seq"))));
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
	if (!fleet && q->after_fleet) {
		*body = json_pack("{s:s}", "error",
				  "after=NODE.SEQ: this node is not in a fleet "
				  "(its records page by seq)");
		return 400;
	}
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
		rc = fleet ? fleet_records(rt, fleet, who, q, &tq, &o, &err)
			   : wd_rt_trace_grep(rt, who, &tq, &o, &err);
		break;
	default:
		wd_err_set(&err, -EINVAL, "not a trace endpoint");
	}
	if (rc) {
		*body = json_pack("{s:s}", "error",
				  err.msg[0] ? err.msg : strerror(-rc));
		return wd_http_status(rc);
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

/* Other nodes' approvals (listed to approvers and the run's readers):
 * their arguments from the run's shipped approval_request record, handed
 * out as this node's own are (recorded here first); a record not shipped
 * yet leaves them withheld, saying where they are. */
static void remote_args(struct wd_rt *rt, struct wd_fleet *fleet,
			const struct wd_caller *who, json_t *rows)
{
	struct wd_rt_trace_src src;
	wd_fleet_trace_src(fleet, &src);
	size_t i, j;
	json_t *o, *r;
	json_array_foreach(rows, i, o)
	{
		const char *run =
		    json_string_value(json_object_get(o, "run_id"));
		const char *id = json_string_value(json_object_get(o, "id"));
		json_t *recs = NULL, *req = NULL;
		char node[64] = "";
		struct wd_err e = {0};
		if (!run || !id || src.records(src.ctx, run, &recs, node, &e))
			continue;
		json_array_foreach(recs, j, r)
		{
			const char *aid = json_string_value(
			    json_object_get(r, "approval_id"));
			if (wd_rec_type_json(r) == WD_REC_APPROVAL_REQUEST &&
			    aid && !strcmp(aid, id))
				req = r;
		}
		if (req && !json_object_get(req, "args"))
			json_object_set_new(
			    o, "args_withheld",
			    json_sprintf("a hash_only run's: shown to "
					 "approvers on node %s only",
					 node));
		else if (req)
			wd_rt_remote_approval_args(rt, who, o, req, node);
		json_decref(recs);
	}
}

json_t *wd_approvals_api(struct wd_rt *rt, struct wd_fleet *fleet,
			 const struct wd_caller *who, struct wd_err *err)
{
	json_t *o = wd_rt_approvals_list(rt, who);
	if (!fleet)
		return o;
	struct wd_err fe = {0};
	json_t *more = wd_fleet_approvals(fleet, who, &fe);
	if (!more) {
		wd_err_set(err, 0, "other nodes' approvals are not listed: %s",
			   fe.msg);
		return o;
	}
	remote_args(rt, fleet, who, more);
	json_array_extend(o, more);
	json_decref(more);
	return o;
}
