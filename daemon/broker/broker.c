#include "broker/broker.h"

#include <math.h>
#include <string.h>

#include "broker/argv.h"
#include "broker/schema.h"
#include "common/log.h"
#include "events/stream.h"
#include "policy/users.h"
#include "sandbox/sandbox.h"
#include "trace/trace.h"
#include "trace/recw.h"

#define PREVIEW_MAX 512

const char *wd_broker_verdict_name(enum wd_broker_verdict v)
{
	switch (v) {
	case WD_BRK_ALLOW:
		return "allow";
	case WD_BRK_DENIED:
		return "denied";
	case WD_BRK_INVALID:
		return "invalid";
	case WD_BRK_APPROVAL:
		return "approval";
	}
	return "?";
}

/* ---- checks ---- */

bool wd_broker_needs_approval(const struct wd_manifest *m, const json_t *args,
			      bool show_value, char *why, size_t why_len)
{
	if (m->approval.always) {
		snprintf(why, why_len, "tool '%s' always needs approval",
			 m->name);
		return true;
	}
	for (int i = 0; i < m->approval.n_above; i++) {
		const char *k = m->approval.above_keys[i];
		double lim = m->approval.above_vals[i], v;
		json_t *a = json_object_get(args, k);
		if (json_is_array(a))
			v = (double)json_array_size(a);
		else if (json_is_number(a))
			v = json_number_value(a);
		else if (json_is_string(a))
			v = (double)json_string_length(a);
		else
			continue;
		if (v > lim && !show_value) {
			snprintf(why, why_len,
				 "%s is above the approval threshold %g", k,
				 lim);
			return true;
		}
		if (v > lim) {
			snprintf(why, why_len,
				 "%s = %g is above the approval threshold %g",
				 k, v, lim);
			return true;
		}
	}
	return false;
}

static bool granted(const struct wd_broker_run *run, const char *name)
{
	for (int i = 0; i < run->n_granted; i++)
		if (!strcmp(run->granted[i], name))
			return true;
	return false;
}

static bool user_has(const struct wd_broker_run *run, const char *scope)
{
	for (int i = 0; i < run->n_user_scopes; i++) {
		if (wd_scope_match(run->user_scopes[i], scope))
			return true;
	}
	return false;
}

enum wd_broker_verdict wd_broker_check(const struct wd_broker_run *run,
				       const struct wd_broker_call *call,
				       struct wd_ratelimit *rl, bool approved,
				       const struct wd_manifest **mp,
				       char check[16], char *reason,
				       size_t reason_len)
{
	*mp = NULL;
	/* 1. granted to this agent: a compromised prompt cannot reach a
	 * tool the agent definition never listed */
	if (!granted(run, call->name)) {
		snprintf(check, 16, "grant");
		snprintf(reason, reason_len,
			 "tool '%s' is not granted to agent '%s'", call->name,
			 run->agent);
		return WD_BRK_DENIED;
	}
	const struct wd_manifest *m = run->tool(run->tool_arg, call->name);
	if (!m) {
		snprintf(check, 16, "grant");
		snprintf(reason, reason_len,
			 "tool '%s' has no manifest in the loaded policy",
			 call->name);
		return WD_BRK_DENIED;
	}
	*mp = m;
	/* 2. authorise as the user, never as the platform */
	if (m->auth_mode == WD_AUTH_ON_BEHALF_OF_USER) {
		for (int i = 0; i < m->n_auth_scopes; i++) {
			if (!user_has(run, m->auth_scopes[i])) {
				snprintf(check, 16, "authz");
				snprintf(reason, reason_len,
					 "user '%s' lacks scope '%s' needed "
					 "by tool '%s'",
					 run->user, m->auth_scopes[i],
					 call->name);
				return WD_BRK_DENIED;
			}
		}
	}
	/* 3. args against the schema, before anything runs */
	if (call->parse_error || !json_is_object(call->args)) {
		snprintf(check, 16, "schema");
		snprintf(reason, reason_len,
			 "arguments of '%s' are not a JSON object; send a JSON "
			 "object matching the tool's schema",
			 call->name);
		return WD_BRK_INVALID;
	}
	json_error_t je;
	json_t *schema = json_loads(m->args_schema, 0, &je);
	struct wd_err e = {0};
	int rc = schema ? wd_schema_validate(schema, call->args, &e)
			: wd_err_set(&e, -EINVAL, "schema is not JSON");
	json_decref(schema);
	/* input: argv: the values must also be placeable on a command line
	 * without being read as options (broker/argv.h) */
	if (!rc && m->input == WD_INPUT_ARGV) {
		char **argv = NULL;
		rc = wd_argv_build(m, call->args, &argv, &e);
		for (size_t i = 0; argv && argv[i]; i++)
			free(argv[i]);
		free(argv);
	}
	if (rc) {
		snprintf(check, 16, "schema");
		snprintf(reason, reason_len, "invalid arguments for '%s': %s",
			 call->name, e.msg);
		return WD_BRK_INVALID;
	}
	/* a replayed call that will not run live (recorded, mocked or
	 * refused by replay_gate.c) changes nothing: no rate, no approval;
	 * one that runs live goes through both, never reusing a decision */
	enum wd_replay_disp rd =
	    run->replay ? wd_broker_replay_disposition(run, call, m, NULL, NULL)
			: WD_RP_LIVE;
	if (rd != WD_RP_LIVE && rd != WD_RP_LIVE_ENV) {
		check[0] = 0;
		return WD_BRK_ALLOW;
	}
	/* 4. rate limit */
	if (m->rate_limit.count > 0 && !approved) {
		const char *scope = m->rate_limit.scope;
		const char *who = !strcmp(scope, "user")    ? run->user
				  : !strcmp(scope, "agent") ? run->agent
							    : run->run_id;
		cleanup_free char *key = wd_asprintf("%s|%s", m->name, scope);
		if (!wd_ratelimit_take(rl, who, key, m->rate_limit.count,
				       m->rate_limit.per_s, wd_now_ns())) {
			snprintf(check, 16, "rate_limit");
			snprintf(reason, reason_len,
				 "rate limit of '%s' reached: %d per %d s per "
				 "%s",
				 call->name, m->rate_limit.count,
				 m->rate_limit.per_s, scope);
			return WD_BRK_DENIED;
		}
	}
	/* 5. approval gate for consequential actions */
	if (!approved &&
	    wd_broker_needs_approval(m, call->args, !run->hash_only, reason,
				     reason_len)) {
		snprintf(check, 16, "approval");
		return WD_BRK_APPROVAL;
	}
	check[0] = 0;
	return WD_BRK_ALLOW;
}

/* ---- execution ---- */

static int rec_append(const struct wd_broker_run *run, json_t *rec,
		      bool durable, struct wd_err *err)
{
	if (run->record)
		return run->record(run->record_arg, rec, durable, err);
	return wd_trace_append(run->trace, rec, durable, NULL, err);
}

static const char *se_name(enum wd_side_effects s)
{
	return s == WD_SE_NONE	     ? "none"
	       : s == WD_SE_INTERNAL ? "internal"
				     : "external";
}

static json_t *base_rec(const struct wd_broker_run *run,
			const struct wd_broker_call *call, const char *type)
{
	json_t *r = json_object();
	json_object_set_new(r, "run_id", json_string(run->run_id));
	json_object_set_new(r, "step", json_integer(run->step));
	json_object_set_new(r, "type", json_string(type));
	json_object_set_new(r, "gen_ai.tool.name", json_string(call->name));
	json_object_set_new(r, "gen_ai.tool.call.id",
			    json_string(call->call_id));
	json_object_set_new(r, "agent", json_string(run->agent));
	json_object_set_new(r, "team", json_string(run->team));
	json_object_set_new(r, "user", json_string(run->user));
	return r;
}

/* A typed record to the run's hook, or to the store. A hook that takes
 * JSON only gets the record parsed back (the same members). */
static int rec_append_w(const struct wd_broker_run *run, struct wd_recw *w,
			bool durable, struct wd_trace_head *head,
			struct wd_err *err)
{
	if (run->record_w)
		return run->record_w(run->record_arg, w, durable, head, err);
	if (!run->record)
		return wd_trace_append_w(run->trace, w, durable, head, err);
	size_t n;
	const char *body = wd_recw_body(w, &n);
	cleanup_free char *text = wd_strndup(body, n);
	/* the body is the record without its closing brace */
	struct wd_buf b = {0};
	wd_buf_append(&b, text, n);
	wd_buf_append(&b, "}", 1);
	json_t *rec = json_loadb(b.data, b.len, 0, NULL);
	wd_buf_free(&b);
	if (!rec)
		return wd_err_set(err, -EINVAL, "trace record: cannot encode");
	int rc = run->record(run->record_arg, rec, durable, err);
	if (!rc && head) {
		head->seq = json_integer_value(json_object_get(rec, "seq"));
		wd_strlcpy(head->ts,
			   json_string_value(json_object_get(rec, "ts")) ?: "",
			   sizeof(head->ts));
		wd_strlcpy(head->prev,
			   json_string_value(json_object_get(rec, "prev"))
			       ?: "",
			   sizeof(head->prev));
	}
	json_decref(rec);
	return rc;
}

/* base_rec's members in a typed record */
static struct wd_recw *base_w(const struct wd_broker_run *run,
			      const struct wd_broker_call *call,
			      enum wd_rec_type type)
{
	struct wd_recw *w =
	    wd_recw_begin(run->trace, run->run_id, run->step, type);
	/* json_string(NULL) left a member out of base_rec */
	const char *k[] = {"gen_ai.tool.name", "gen_ai.tool.call.id", "agent",
			   "team", "user"};
	const char *v[] = {call->name, call->call_id, run->agent, run->team,
			   run->user};
	for (size_t i = 0; i < WD_ARRAY_SIZE(k); i++)
		if (v[i])
			wd_recw_str(w, k[i], v[i]);
	return w;
}

int wd_broker_record_refusal(const struct wd_broker_run *run,
			     const struct wd_broker_call *call,
			     enum wd_broker_verdict v, const char *check,
			     const char *reason, struct wd_err *err)
{
	json_t *r = base_rec(run, call, "tool_result");
	json_object_set_new(r, "status",
			    json_string(wd_broker_verdict_name(v)));
	json_object_set_new(r, "check", json_string(check));
	json_object_set_new(r, "reason", json_string(reason));
	if (!run->hash_only)
		json_object_set(r, "args",
				call->args ? call->args : json_null());
	int rc = rec_append(run, r, false, err);
	json_decref(r);
	return rc;
}

/* How the call's args reach the program (manifest `input`). */
static int build_input(const struct wd_manifest *m, const json_t *args,
		       char **stdin_out, char ***argv_out)
{
	*stdin_out = NULL;
	*argv_out = NULL;
	if (m->input == WD_INPUT_STDIN_JSON) {
		*stdin_out = json_dumps(args, JSON_COMPACT);
		return *stdin_out ? 0 : -ENOMEM;
	}
	if (m->input == WD_INPUT_STDIN_FIELD) {
		json_t *v = json_object_get(args, m->input_field);
		if (json_is_string(v))
			*stdin_out = wd_strndup(json_string_value(v),
						json_string_length(v));
		else if (v)
			*stdin_out =
			    json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		else
			*stdin_out = wd_strdup("");
		return 0;
	}
	/* argv: separate elements, never a shell string (broker/argv.h) */
	struct wd_err e = {0};
	return wd_argv_build(m, args, argv_out, &e);
}

static void free_argv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A denial's attribution: run, step, tool, agent, team. */
static void attribute(struct wd_event *e, const struct wd_broker_run *run,
		      const struct wd_broker_call *call)
{
	snprintf(e->run_id, sizeof(e->run_id), "%s", run->run_id);
	e->step = run->step;
	snprintf(e->tool, sizeof(e->tool), "%s", call->name);
	snprintf(e->agent, sizeof(e->agent), "%s", run->agent);
	snprintf(e->team, sizeof(e->team), "%s", run->team);
}

/* A hash_only run keeps no argument value in its trace, views or messages,
 * and a denial's target (the path opened, the host dialled, the name
 * resolved) is often an argument: a tool that opens the path it was
 * given. So, before the event leaves the call (the trace's denial
 * records, the result, the node's event stream and with it
 * /v1/events and the alerts), its target becomes "sha256:<hex>" of
 * itself: the same target still groups and can be checked against a
 * guess, nothing more. A network target keeps its port (":443"), which
 * says which service, not which host. Kind, syscall, source and verdict
 * stay. */
static void hide_target(struct wd_event *e, const struct wd_broker_run *run)
{
	if (run->hash_only)
		wd_event_hide_target(e);
}

struct live {
	const struct wd_broker_run *run;
	const struct wd_broker_call *call;
};

/* Each denial into the node's stream the moment the sandbox sees it (the
 * call's supervising thread): `warden events --follow` shows it while the
 * tool still runs. The trace gets them with the result. */
static void publish_live(const struct wd_event *ev, void *arg)
{
	const struct live *lv = arg;
	if (!lv->run->events)
		return;
	struct wd_event e = *ev;
	attribute(&e, lv->run, lv->call);
	hide_target(&e, lv->run);
	wd_stream_publish(lv->run->events, &e);
}

int wd_broker_execute(const struct wd_broker_run *run,
		      const struct wd_broker_call *call,
		      const struct wd_manifest *m, const json_t *approval,
		      json_t **result_for_model, char status_out[24],
		      struct wd_denial_counts *counts, struct wd_err *err)
{
	*result_for_model = NULL;
	if (counts)
		memset(counts, 0, sizeof(*counts));
	/* in a replay environment: its manifest for everything below (the
	 * sandbox's network and write paths, the record's side effects) */
	bool replay_env = false;
	if (run->replay) {
		const struct wd_manifest *lm = m;
		int rrc = wd_broker_replay_execute(
		    run, call, m, &lm, result_for_model, status_out, err);
		if (rrc != 1)
			return rrc;
		replay_env = lm != m;
		m = lm;
	}
	bool service = m->auth_mode == WD_AUTH_SERVICE;
	/* The calling user is the principal (authorised above, owner of
	 * what the call leaves in its write paths); the tool runs as a uid
	 * of the call's own (sandbox/uidpool.h), recorded in tool_result.
	 * A service identity has no user of its own to own files: like a
	 * root caller's, they go to each write path's owner. */
	uid_t uid = service ? 0 : run->uid;
	gid_t gid = service ? 0 : run->gid;

	/* the tool's input before anything is recorded: check 3 built the
	 * same argv, so only a policy changed under the call fails here,
	 * and then nothing runs */
	char *stdin_data = NULL, **argv = NULL;
	if (build_input(m, call->args, &stdin_data, &argv) < 0 ||
	    (m->input == WD_INPUT_ARGV && !argv)) {
		free(stdin_data);
		return wd_err_set(err, -EINVAL,
				  "tool '%s': arguments cannot be placed on "
				  "its command line",
				  call->name);
	}

	/* 6. the attempt, on disk before anything starts */
	char sb_id[24] = {0};
	wd_rand_hex(sb_id, 16);
	cleanup_free char *args_text = json_dumps(call->args, JSON_COMPACT);
	if (!args_text)
		args_text = wd_strdup("{}");
	char args_hash[72];
	/* of the redacted text (the store keeps that): a hash must not
	 * confirm a guess of a redacted secret */
	wd_trace_ref_redacted(run->trace, args_text, strlen(args_text),
			      args_hash);
	/* a side-effecting tool's attempt is fdatasync'ed before the tool
	 * starts; a read-only one's is written to its segment (the disk gets
	 * it with the next group commit), or — only when the agent says
	 * trace.unrecorded_read_only: allow — may go unrecorded */
	bool durable = m->side_effects != WD_SE_NONE;
	bool may_skip = !durable && run->unrecorded_read_only;
	int rc = 0;
	char args_ref[WD_TRACE_REF_LEN] = "";
	bool by_ref = false;
	if (run->hash_only || strlen(args_text) > WD_BROKER_ARGS_INLINE_MAX) {
		rc = wd_trace_put_blob(run->trace, run->run_id, args_text,
				       strlen(args_text), args_ref, err);
		if (rc && !may_skip) {
			free(stdin_data);
			free_argv(argv);
			return rc;
		}
		by_ref = !rc;
	}
	struct wd_recw *att = base_w(run, call, WD_REC_TOOL_ATTEMPT);
	wd_recw_str(att, "side_effects", se_name(m->side_effects));
	wd_recw_int(att, "tier", m->tier);
	wd_recw_str(att, "authz", "allowed");
	wd_recw_str(att, "auth_mode",
		    service ? "service" : "on_behalf_of_user");
	wd_recw_int(att, "user_uid", run->uid);
	if (replay_env)
		wd_recw_str(att, "replay", "environment");
	/* the model's call ids repeat across runs ("call_0_0"): the sandbox
	 * (cgroup names, event attribution) gets one unique on this node */
	wd_recw_str(att, "sandbox_call_id", sb_id);
	wd_recw_str(att, "args_hash", args_hash);
	if (by_ref)
		wd_recw_str(att, "args_ref", args_ref);
	else if (!rc && call->args)
		wd_recw_json(att, "args", call->args);
	if (approval)
		wd_recw_json(att, "approval", approval);
	struct wd_trace_head ah = {0};
	rc = rec_append_w(run, att, durable, &ah, err);
	wd_recw_end(att);
	if (!rc && !durable && !may_skip) {
		/* the store fails a group commit after append() returned:
		 * wait for the write (not the sync) to know */
		int wr =
		    ah.seq > 0 ? wd_trace_wait_written(run->trace, ah.seq) : 0;
		if (wr)
			rc = wd_err_set(err, wr,
					"trace: tool_attempt not written: %s",
					strerror(-wr));
	}
	if (rc) {
		/* seed 000: an unrecorded action that changed the world is
		 * worse than a failed run; a read-only one runs unrecorded
		 * only where the agent definition allows it */
		if (!may_skip) {
			free(stdin_data);
			free_argv(argv);
			return rc;
		}
		wd_warn("run %s: tool_attempt not recorded (%s); tool '%s' "
			"has no side effects and the agent allows "
			"trace.unrecorded_read_only: running it",
			run->run_id, err ? err->msg : "?", call->name);
	}

	/* 7. the sandbox; its denials stream out as they happen */
	struct live live = {run, call};
	struct wd_call c = {
	    .manifest = m,
	    .argv = argv,
	    .stdin_data = stdin_data,
	    .stdin_len = stdin_data ? strlen(stdin_data) : 0,
	    .caller_uid = uid,
	    .caller_gid = gid,
	    .call_id = sb_id,
	    .tenant = run->team,
	    .on_event = publish_live,
	    .on_event_arg = &live,
	    /* a replay's manifests live only as long as the replay */
	    .no_pool = run->replay != NULL,
	};
	struct wd_result res = {0};
	struct wd_err serr = {0};
	int src = wd_sandbox_run(&c, &res, &serr);
	free(stdin_data);
	free_argv(argv);

	/* 8. every denial, then the result (the payload the model gets,
	 * `out`, is JSON; the records are typed) */
	json_t *out = json_object();
	const char *status;
	struct wd_denial_counts dc = {0};
	if (src) {
		status = "sandbox_error";
		json_object_set_new(out, "error", json_string(serr.msg));
	} else {
		status = res.status == WD_ST_OK		     ? "ok"
			 : res.status == WD_ST_TIMEOUT	     ? "timeout"
			 : res.status == WD_ST_OOM	     ? "oom"
			 : res.status == WD_ST_SANDBOX_ERROR ? "sandbox_error"
							     : "error";
		json_object_set_new(out, "exit_code",
				    json_integer(res.exit_code));
		json_object_set_new(
		    out, "stdout",
		    json_stringn(res.out.data ? res.out.data : "",
				 res.out.len));
		json_object_set_new(
		    out, "stderr",
		    json_stringn(res.err.data ? res.err.data : "",
				 res.err.len));
		json_object_set_new(out, "truncated",
				    json_boolean(res.truncated));
		json_t *dn = json_array();
		for (int i = 0; i < res.n_denials; i++) {
			struct wd_event *e = &res.denials[i];
			attribute(e, run, call);
			hide_target(e, run);
			if (!e->call_id[0])
				snprintf(e->call_id, sizeof(e->call_id), "%s",
					 res.call_id);
			json_array_append_new(
			    dn, json_pack("{s:s,s:s,s:s,s:s}", "source",
					  wd_event_source_name(e->source),
					  "kind", e->kind, "target", e->target,
					  "syscall", e->syscall));
			struct wd_recw *d = base_w(run, call, WD_REC_DENIAL);
			if (call->call_id)
				wd_recw_str(d, "call_id", call->call_id);
			wd_event_recw(d, "event", e);
			struct wd_err derr = {0};
			if (rec_append_w(run, d, false, NULL, &derr))
				wd_warn("run %s: denial not recorded: %s",
					run->run_id, derr.msg);
			wd_recw_end(d);
		}
		json_object_set_new(out, "denials", dn);
		wd_result_denial_counts(&res, &dc);
		if (counts)
			*counts = dc;
	}
	json_object_set_new(out, "status", json_string(status));
	cleanup_free char *payload = json_dumps(out, JSON_COMPACT);
	char result_ref[WD_TRACE_REF_LEN] = "", result_hash[72] = "";
	size_t plen = payload ? strlen(payload) : 0;
	if (payload) {
		/* of the redacted text, as the args' (result_ref is the
		 * blob's: of what the store keeps, redacted) */
		wd_trace_ref_redacted(run->trace, payload, plen, result_hash);
		struct wd_err berr = {0};
		if (wd_trace_put_blob(run->trace, run->run_id, payload, plen,
				      result_ref, &berr))
			result_ref[0] = 0;
	}
	struct wd_recw *r = base_w(run, call, WD_REC_TOOL_RESULT);
	if (replay_env)
		wd_recw_str(r, "replay", "environment");
	if (src) {
		wd_recw_str(r, "reason", serr.msg);
	} else {
		wd_recw_int(r, "exit_code", res.exit_code);
		wd_recw_int(r, "latency_ms",
			    (int64_t)(res.duration_ns / 1000000));
		wd_recw_int(r, "tier", res.tier);
		wd_recw_int(r, "run_as_uid", res.run_uid);
		wd_recw_int(r, "run_as_gid", res.run_gid);
		wd_recw_bool(r, "truncated", res.truncated);
		wd_recw_int(r, "denials", res.n_denials);
		/* what the kernel counted but no record here shows (the
		 * ring buffer had no room, or over the 4,096 kept) */
		if (dc.untraced)
			wd_recw_int(r, "untraced_denials",
				    (int64_t)dc.untraced);
		if (res.lost_denials)
			wd_recw_int(r, "lost_denials", res.lost_denials);
		wd_recw_obj_begin(r, "enforcement");
		/* one member per name, the last state said (as a JSON
		 * object kept it) */
		for (int i = 0; i < res.n_enf; i++) {
			int last = i, j;
			for (j = 0; j < i; j++)
				if (!strcmp(res.enf[j].name, res.enf[i].name))
					break;
			if (j < i)
				continue; /* written at its first place */
			for (j = i + 1; j < res.n_enf; j++)
				if (!strcmp(res.enf[j].name, res.enf[i].name))
					last = j;
			wd_recw_str(r, res.enf[i].name, res.enf[last].state);
		}
		wd_recw_obj_end(r);
	}
	wd_recw_str(r, "status", status);
	if (payload) {
		wd_recw_str(r, "result_hash", result_hash);
		wd_recw_int(r, "bytes", (int64_t)plen);
		if (result_ref[0])
			wd_recw_str(r, "result_ref", result_ref);
		if (!run->hash_only)
			wd_recw_strn(r, "preview", payload,
				     WD_MIN(plen, PREVIEW_MAX));
	}
	/* the tool ran: its result goes to the model whatever the store
	 * says (a store that cannot write stops the run's next tool) */
	struct wd_err rerr = {0};
	rc = rec_append_w(run, r, false, NULL, &rerr);
	wd_recw_end(r);
	snprintf(status_out, 24, "%s", status);
	wd_result_free(&res);
	*result_for_model = out;
	if (rc)
		wd_warn("run %s: tool_result of '%s' not recorded: %s",
			run->run_id, call->name, rerr.msg);
	return 0;
}
