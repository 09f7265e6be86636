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
	json_t *att = base_rec(run, call, "tool_attempt");
	json_object_set_new(att, "side_effects",
			    json_string(se_name(m->side_effects)));
	json_object_set_new(att, "tier", json_integer(m->tier));
	json_object_set_new(att, "authz", json_string("allowed"));
	json_object_set_new(
	    att, "auth_mode",
	    json_string(service ? "service" : "on_behalf_of_user"));
	json_object_set_new(att, "user_uid", json_integer(run->uid));
	if (replay_env)
		json_object_set_new(att, "replay", json_string("environment"));
	/* the model's call ids repeat across runs ("call_0_0"): the sandbox
	 * (cgroup names, event attribution) gets one unique on this node */
	char sb_id[24] = {0};
	wd_rand_hex(sb_id, 16);
	json_object_set_new(att, "sandbox_call_id", json_string(sb_id));
	cleanup_free char *args_text = json_dumps(call->args, JSON_COMPACT);
	if (!args_text)
		args_text = wd_strdup("{}");
	char args_hash[72];
	wd_trace_ref_redacted(run->trace, args_text, strlen(args_text),
			      args_hash);
	json_object_set_new(att, "args_hash", json_string(args_hash));
	/* a side-effecting tool's attempt is fdatasync'ed before the tool
	 * starts; a read-only one's is written to its segment (the disk gets
	 * it with the next group commit), or — only when the agent says
	 * trace.unrecorded_read_only: allow — may go unrecorded */
	bool durable = m->side_effects != WD_SE_NONE;
	bool may_skip = !durable && run->unrecorded_read_only;
	int rc;
	if (run->hash_only || strlen(args_text) > WD_BROKER_ARGS_INLINE_MAX) {
		char ref[WD_TRACE_REF_LEN];
		rc = wd_trace_put_blob(run->trace, run->run_id, args_text,
				       strlen(args_text), ref, err);
		if (rc && !may_skip) {
			json_decref(att);
			free(stdin_data);
			free_argv(argv);
			return rc;
		}
		if (!rc)
			json_object_set_new(att, "args_ref", json_string(ref));
	} else {
		json_object_set(att, "args", call->args);
	}
	if (approval)
		json_object_set(att, "approval", (json_t *)approval);
	rc = rec_append(run, att, durable, err);
	if (!rc && !durable && !may_skip) {
		/* the store fails a group commit after append() returned:
		 * wait for the write (not the sync) to know */
		json_int_t seq =
		    json_integer_value(json_object_get(att, "seq"));
		int wr = seq > 0
			     ? wd_trace_wait_written(run->trace, (uint64_t)seq)
			     : 0;
		if (wr)
			rc = wd_err_set(err, wr,
					"trace: tool_attempt not written: %s",
					strerror(-wr));
	}
	json_decref(att);
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

	/* 8. the result and every denial */
	json_t *out = json_object();
	json_t *r = base_rec(run, call, "tool_result");
	if (replay_env)
		json_object_set_new(r, "replay", json_string("environment"));
	const char *status;
	if (src) {
		status = "sandbox_error";
		json_object_set_new(out, "error", json_string(serr.msg));
		json_object_set_new(r, "reason", json_string(serr.msg));
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
			json_t *d = base_rec(run, call, "denial");
			json_object_set_new(d, "call_id",
					    json_string(call->call_id));
			json_object_set_new(d, "event", wd_event_to_json(e));
			struct wd_err derr = {0};
			if (rec_append(run, d, false, &derr))
				wd_warn("run %s: denial not recorded: %s",
					run->run_id, derr.msg);
			json_decref(d);
		}
		json_object_set_new(out, "denials", dn);
		json_object_set_new(r, "exit_code",
				    json_integer(res.exit_code));
		json_object_set_new(
		    r, "latency_ms",
		    json_integer((json_int_t)(res.duration_ns / 1000000)));
		json_object_set_new(r, "tier", json_integer(res.tier));
		json_object_set_new(r, "run_as_uid", json_integer(res.run_uid));
		json_object_set_new(r, "run_as_gid", json_integer(res.run_gid));
		json_object_set_new(r, "truncated",
				    json_boolean(res.truncated));
		json_object_set_new(r, "denials", json_integer(res.n_denials));
		struct wd_denial_counts dc;
		wd_result_denial_counts(&res, &dc);
		if (counts)
			*counts = dc;
		/* what the kernel counted but no record here shows (the
		 * ring buffer had no room, or over the 4,096 kept) */
		if (dc.untraced)
			json_object_set_new(
			    r, "untraced_denials",
			    json_integer((json_int_t)dc.untraced));
		if (res.lost_denials)
			json_object_set_new(r, "lost_denials",
					    json_integer(res.lost_denials));
		json_t *enf = json_object();
		for (int i = 0; i < res.n_enf; i++)
			json_object_set_new(enf, res.enf[i].name,
					    json_string(res.enf[i].state));
		json_object_set_new(r, "enforcement", enf);
	}
	json_object_set_new(out, "status", json_string(status));
	json_object_set_new(r, "status", json_string(status));
	cleanup_free char *payload = json_dumps(out, JSON_COMPACT);
	if (payload) {
		char ref[WD_TRACE_REF_LEN], h[72];
		size_t plen = strlen(payload);
		wd_trace_ref_redacted(run->trace, payload, plen, h);
		json_object_set_new(r, "result_hash", json_string(h));
		json_object_set_new(r, "bytes", json_integer((json_int_t)plen));
		struct wd_err berr = {0};
		if (!wd_trace_put_blob(run->trace, run->run_id, payload, plen,
				       ref, &berr))
			json_object_set_new(r, "result_ref", json_string(ref));
		if (!run->hash_only)
			json_object_set_new(
			    r, "preview",
			    json_stringn(payload, WD_MIN(plen, PREVIEW_MAX)));
	}
	/* the tool ran: its result goes to the model whatever the store
	 * says (a store that cannot write stops the run's next tool) */
	struct wd_err rerr = {0};
	rc = rec_append(run, r, false, &rerr);
	json_decref(r);
	snprintf(status_out, 24, "%s", status);
	wd_result_free(&res);
	*result_for_model = out;
	if (rc)
		wd_warn("run %s: tool_result of '%s' not recorded: %s",
			run->run_id, call->name, rerr.msg);
	return 0;
}
