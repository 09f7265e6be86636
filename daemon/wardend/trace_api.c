#include "wardend/trace_api.h"

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

int wd_trace_api(struct wd_rt *rt, const struct wd_caller *who,
		 const struct wd_api_req *q, json_t **body)
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
	switch (q->ep) {
	case WD_EP_RUN_TRACE:
		rc = wd_rt_trace_records(rt, who, q->id, &o, &err);
		break;
	case WD_EP_RUN_PAYLOAD:
		rc = wd_rt_trace_payload(rt, who, q->id, q->step,
					 q->tq[WD_TQ_TYPE], &o, &err);
		break;
	case WD_EP_TRACE_RUNS:
		rc = wd_rt_trace_runs(rt, who, &tq, &o, &err);
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
