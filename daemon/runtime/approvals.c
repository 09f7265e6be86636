/* Approvals: decisions by approvers, the pending list, and the TTL thread
 * that denies (and notifies) approvals never given. */
#include <curl/curl.h>
#include <string.h>

#include "common/log.h"
#include "runtime/rt_int.h"
#include "trace/trace.h"

/* ---- approvals ---- */

json_t *rt_find_call_locked(struct wd_run *r, const char *call_id)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		const char *id = json_string_value(json_object_get(pc, "id"));
		if (id && !strcmp(id, call_id))
			return pc;
	}
	return NULL;
}

static bool any_waiting(struct wd_run *r)
{
	size_t i;
	json_t *pc;
	json_array_foreach(r->pending, i, pc)
	{
		const char *s = json_string_value(json_object_get(pc, "state"));
		if (s && !strcmp(s, "waiting"))
			return true;
	}
	return false;
}

/* Apply a decision (rt->mu held). `decider` NULL = the TTL. 0, -ENOENT
 * (no such approval or call), or the store's -errno (err set): the
 * decision could not be recorded and was not applied. */
static int decide_locked(struct wd_rt *rt, const char *aid, bool approve,
			 const char *decider, const char *reason,
			 struct wd_err *err)
{
	json_t *ap = json_object_get(rt->approvals, aid);
	if (!ap)
		return -ENOENT;
	const char *run_id = json_string_value(json_object_get(ap, "run_id"));
	const char *call_id = json_string_value(json_object_get(ap, "call_id"));
	struct wd_run *r = rt_find_run_locked(rt, run_id);
	json_t *pc = r ? rt_find_call_locked(r, call_id) : NULL;
	if (!pc) {
		json_object_del(rt->approvals, aid);
		return -ENOENT;
	}
	const char *what = approve   ? "approved"
			   : decider ? "denied"
				     : "expired";
	/* the decision is on disk before it takes effect: one that cannot
	 * be recorded is refused and the approval stays pending (the TTL
	 * thread tries again on its next tick) */
	json_t *rec = rt_rec_new(r, "approval_decision");
	json_object_set_new(rec, "approval_id", json_string(aid));
	json_object_set_new(rec, "gen_ai.tool.call.id", json_string(call_id));
	json_object_set(rec, "gen_ai.tool.name", json_object_get(ap, "tool"));
	json_object_set_new(rec, "decision", json_string(what));
	json_object_set_new(rec, "by", json_string(decider ? decider : "ttl"));
	if (reason)
		json_object_set_new(rec, "reason", json_string(reason));
	int rc = wd_trace_append(rt->trace, rec, true, NULL, err);
	if (rc) {
		json_decref(rec);
		return rc;
	}
	rt_push_line_locked(r, rec);
	json_decref(rec);
	json_object_set_new(pc, "state",
			    json_string(approve ? "approved" : "denied"));
	json_t *info = json_pack("{s:s,s:s,s:s}", "id", aid, "decision", what,
				 "by", decider ? decider : "ttl");
	if (reason)
		json_object_set_new(info, "reason", json_string(reason));
	json_object_set(pc, "approval", info);
	if (!approve) {
		cleanup_free char *why =
		    decider
			? wd_asprintf("approval denied by %s%s%s", decider,
				      reason ? ": " : "", reason ? reason : "")
			: wd_strdup("approval not given before its TTL "
				    "expired: denied");
		json_object_set_new(pc, "denied_reason", json_string(why));
	}
	json_decref(info);
	json_object_del(rt->approvals, aid);
	if (r->state == R_SUSPENDED && !any_waiting(r)) {
		rt_drop_snapshot(r);
		rt_enqueue_locked(rt, r);
	} else if (r->state == R_SUSPENDED) {
		rt_save_snapshot(r);
	}
	return 0;
}

int wd_rt_approval_decide(struct wd_rt *rt, const struct wd_caller *c,
			  const char *id, bool approve, const char *reason,
			  struct wd_err *err)
{
	pthread_mutex_lock(&rt->mu);
	json_t *ap = json_object_get(rt->approvals, id);
	int rc = 0;
	if (!ap) {
		rc = wd_err_set(err, -ENOENT,
				"no pending approval '%s' (decided, expired "
				"or unknown)",
				id);
		goto out;
	}
	if (!wd_pset_is_approver(rt->ps, c->uid)) {
		rc = wd_err_set(err, -EPERM,
				"user '%s' (uid %u) is not an approver in "
				"users.yaml",
				c->user, (unsigned)c->uid);
		goto out;
	}
	const char *pn = wd_pset_user_name(rt->ps, c->uid);
	rc = decide_locked(rt, id, approve, pn ? pn : c->user, reason, err);
	if (rc == -ENOENT)
		wd_err_set(err, rc, "approval '%s': its run is gone", id);
out:
	pthread_mutex_unlock(&rt->mu);
	return rc;
}

/* A copy of approval `ap` for `approver` (who decides on its arguments) or
 * anyone else (its run's readers, the TTL webhook): of a hash_only run,
 * or one no longer in memory, they get the arguments' hash only (rt->mu
 * held). */
static json_t *approval_copy_locked(struct wd_rt *rt, json_t *ap, bool approver)
{
	json_t *o = json_deep_copy(ap);
	struct wd_run *r = rt_find_run_locked(
	    rt, json_string_value(json_object_get(ap, "run_id")));
	if (approver || (r && !r->hash_only))
		return o;
	char *a = json_dumps(json_object_get(o, "args"),
			     JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	char ref[WD_TRACE_REF_LEN] = "";
	if (a)
		wd_trace_ref_redacted(rt->trace, a, strlen(a), ref);
	free(a);
	json_object_del(o, "args");
	json_object_set_new(o, "args_hash", json_string(ref));
	return o;
}

/* The arguments of an approval handed to someone other than its run's own
 * user (a team member, an auditor, an approver, root) are a payload read
 * like a run's view: recorded first as a payload_read (payload_type
 * "approval", which approval and the arguments' hash) in its run, once per
 * reader and approval (rt_note_view_read). When the read cannot be
 * recorded the arguments are withheld from that approval: its
 * arguments' hash and args_withheld saying why take their place. */
struct ap_read {
	char run_id[40], team[64], aid[32];
	int64_t run_uid, step;
	bool approver;
};

static void note_args_read(struct wd_rt *rt, const struct wd_caller *c,
			   json_t *o, const struct ap_read *a,
			   const char *run_node)
{
	json_t *args = json_object_get(o, "args");
	if (!args)
		return; /* its hash only: no payload */
	char *txt =
	    json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	char ref[WD_TRACE_REF_LEN] = "";
	if (txt)
		wd_trace_ref_redacted(rt->trace, txt, strlen(txt), ref);
	free(txt);
	cleanup_free char *content = wd_asprintf("%s|%s", a->aid, ref);
	struct rt_view_read v = {.run_id = a->run_id,
				 .team = a->team,
				 .run_uid = a->run_uid,
				 .step = a->step,
				 .what = "approval",
				 .content = content,
				 .access = a->approver ? "approver" : NULL,
				 .run_node = run_node,
				 .returned = o};
	struct wd_err err = {0};
	int rc =
	    rt_note_view_read(rt, c, &v,
			      json_pack("[{s:s,s:s,s:s}]", "field", "args",
					"approval_id", a->aid, "hash", ref),
			      &err);
	if (!rc)
		return;
	json_object_del(o, "args");
	json_object_set_new(o, "args_hash", json_string(ref));
	json_object_set_new(
	    o, "args_withheld",
	    json_string(err.msg[0] ? err.msg
				   : "the read could not be recorded: the "
				     "arguments are not handed out"));
}

json_t *wd_rt_approvals_list(struct wd_rt *rt, const struct wd_caller *c)
{
	json_t *out = json_array();
	size_t n = 0, cap = 0;
	struct ap_read *reads = NULL;
	pthread_mutex_lock(&rt->mu);
	bool approver = wd_pset_is_approver(rt->ps, c->uid);
	const char *k;
	json_t *ap;
	json_object_foreach(rt->approvals, k, ap)
	{
		/* an approval shows the call's arguments: listed to those
		 * who decide it and to those who may read its run; of a
		 * hash_only run, only an approver sees the arguments (to
		 * decide on them), its readers a hash */
		struct wd_run *r = rt_find_run_locked(
		    rt, json_string_value(json_object_get(ap, "run_id")));
		bool reader = r && rt_may_read_run_locked(rt, c, r);
		if (!approver && !reader)
			continue;
		json_t *o = approval_copy_locked(rt, ap, approver);
		json_object_set_new(o, "you_may_decide",
				    json_boolean(approver));
		json_array_append_new(out, o);
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			reads = wd_realloc(reads, cap * sizeof(*reads));
		}
		struct ap_read *a = &reads[n++];
		*a =
		    (struct ap_read){.run_uid = r ? (int64_t)r->caller.uid : -1,
				     .step = r ? r->step : 0,
				     .approver = approver};
		snprintf(a->run_id, sizeof(a->run_id), "%s",
			 json_string_value(json_object_get(ap, "run_id")));
		snprintf(a->team, sizeof(a->team), "%s",
			 r && r->team ? r->team : "");
		snprintf(a->aid, sizeof(a->aid), "%s", k);
	}
	pthread_mutex_unlock(&rt->mu);
	/* recorded without rt->mu (the trace append waits for the write) */
	for (size_t i = 0; i < n; i++)
		note_args_read(rt, c, json_array_get(out, i), &reads[i], NULL);
	free(reads);
	return out;
}

void wd_rt_remote_approval_args(struct wd_rt *rt, const struct wd_caller *c,
				json_t *o, json_t *request, const char *node)
{
	json_t *args = json_object_get(request, "args");
	if (!args)
		return;
	struct ap_read a = {
	    .run_uid = json_is_integer(json_object_get(o, "uid"))
			   ? json_integer_value(json_object_get(o, "uid"))
			   : -1,
	    .step = json_integer_value(json_object_get(request, "step")),
	    .approver = wd_rt_is_approver(rt, c->uid)};
	snprintf(a.run_id, sizeof(a.run_id), "%s",
		 json_string_value(json_object_get(o, "run_id")) ?: "");
	snprintf(a.team, sizeof(a.team), "%s",
		 json_string_value(json_object_get(o, "team")) ?: "");
	snprintf(a.aid, sizeof(a.aid), "%s",
		 json_string_value(json_object_get(o, "id")) ?: "");
	json_object_del(o, "args_withheld");
	json_object_set(o, "args", args);
	note_args_read(rt, c, o, &a, node);
}

static void notify_webhook(struct wd_rt *rt, json_t *payload)
{
	if (!rt->webhook)
		return;
	cleanup_free char *body = json_dumps(payload, JSON_COMPACT);
	CURL *c = curl_easy_init();
	if (!c || !body) {
		if (c)
			curl_easy_cleanup(c);
		return;
	}
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, rt->webhook);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		wd_warn("webhook %s: %s", rt->webhook, curl_easy_strerror(rc));
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

/* Approvals never granted are denied at their TTL and notified (seed 000
 * step 7: they must not accumulate silently). */
void *rt_ttl_thread(void *arg)
{
	struct wd_rt *rt = arg;
	pthread_mutex_lock(&rt->mu);
	while (!rt->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&rt->qcond, &rt->mu, &ts);
		if (rt->stopping)
			break;
		uint64_t now = wd_wall_ns();
		json_t *expired = json_array();
		const char *k;
		json_t *ap;
		json_object_foreach(rt->approvals, k, ap)
		{
			uint64_t exp = (uint64_t)json_integer_value(
			    json_object_get(ap, "expires_ns"));
			/* the webhook goes out of the node: a hash_only
			 * run's arguments as their hash only */
			if (exp && now >= exp)
				json_array_append_new(
				    expired,
				    approval_copy_locked(rt, ap, false));
		}
		size_t i;
		json_array_foreach(expired, i, ap)
		{
			const char *aid =
			    json_string_value(json_object_get(ap, "id"));
			wd_warn(
			    "approval %s (run %s, tool %s) expired", aid,
			    json_string_value(json_object_get(ap, "run_id")),
			    json_string_value(json_object_get(ap, "tool")));
			struct wd_err de = {0};
			int drc =
			    decide_locked(rt, aid, false, NULL, NULL, &de);
			if (drc && drc != -ENOENT)
				wd_warn("approval %s: expiry not recorded, "
					"kept pending: %s",
					aid, de.msg);
		}
		if (json_array_size(expired) && rt->webhook) {
			pthread_mutex_unlock(&rt->mu);
			json_array_foreach(expired, i, ap)
			{
				json_t *p = json_pack("{s:s,s:O}", "event",
						      "approval_expired",
						      "approval", ap);
				notify_webhook(rt, p);
				json_decref(p);
			}
			pthread_mutex_lock(&rt->mu);
		}
		json_decref(expired);
		if (json_object_size(rt->unended)) {
			pthread_mutex_unlock(&rt->mu);
			rt_unended_flush(rt);
			pthread_mutex_lock(&rt->mu);
		}
		if (rt->n_retired) {
			pthread_mutex_unlock(&rt->mu);
			rt_reap_retired(rt);
			pthread_mutex_lock(&rt->mu);
		}
		rt_trim_idle_locked(rt);
	}
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}
