/* The trace endpoints of wardend's API (api/request.h WD_EP_RUN_TRACE,
 * WD_EP_RUN_PAYLOAD, WD_EP_TRACE_RUNS, WD_EP_TRACE_RECORDS), authorised per
 * run by the runtime (runtime.h wd_rt_trace_*). */
#ifndef WD_WARDEND_TRACE_API_H
#define WD_WARDEND_TRACE_API_H

#include <jansson.h>

#include "api/request.h"
#include "runtime/runtime.h"

/* The HTTP status and a new JSON body ({error} when not 200). */
int wd_trace_api(struct wd_rt *rt, const struct wd_caller *who,
		 const struct wd_api_req *q, json_t **body);

#endif
