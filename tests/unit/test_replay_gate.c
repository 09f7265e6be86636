/* The broker's replay gate as a pure decision (broker/replay_gate.c): the
 * stricter of the replay's manifest and the original's recorded side
 * effects, recorded results only for the same call at the same step, mocks
 * only for external tools; and the typed record table (trace/records.h). */
#include <string.h>

#include "broker/broker.h"
#include "t.h"
#include "trace/records.h"

static struct wd_manifest *g_env; /* the manifest's replay_env */

static enum wd_replay_disp disp(struct wd_broker_replay *g, int step,
				enum wd_side_effects se, const char *args,
				const char **what)
{
	struct wd_manifest m;
	memset(&m, 0, sizeof(m));
	m.name = "mail";
	m.side_effects = se;
	m.replay_env = g_env;
	struct wd_broker_run run;
	memset(&run, 0, sizeof(run));
	run.step = step;
	run.replay = g;
	json_t *a = json_loads(args, 0, NULL);
	struct wd_broker_call c = {.call_id = "c0", .name = "mail", .args = a};
	enum wd_side_effects judged;
	enum wd_replay_disp d =
	    wd_broker_replay_disposition(&run, &c, &m, &judged, what);
	json_decref(a);
	return d;
}

int main(void)
{
	struct wd_broker_replay g;
	memset(&g, 0, sizeof(g));
	g.recorded = json_object();
	g.orig_side_effects = json_object();
	g.mocks = json_object();
	json_t *args = json_loads("{\"to\":\"x\",\"cc\":\"y\"}", 0, NULL);
	char *k = wd_broker_replay_key(2, "mail", args);
	json_object_set_new(g.recorded, k, json_string("sha256:rec"));
	free(k);
	json_decref(args);
	const char *what = NULL;

	T_OK(disp(&g, 2, WD_SE_NONE, "{}", NULL) == WD_RP_LIVE, "none-live",
	     "a none tool without an original label runs live");
	json_object_set_new(g.orig_side_effects, "mail",
			    json_string("external"));
	T_OK(disp(&g, 2, WD_SE_NONE, "{}", &what) == WD_RP_REFUSED &&
		 strstr(what, "external side effect"),
	     "relabel-none-refused",
	     "a tool recorded external and relabelled none is refused");
	T_OK(disp(&g, 2, WD_SE_NONE, "{\"cc\":\"y\",\"to\":\"x\"}", &what) ==
		     WD_RP_RECORDED &&
		 !strcmp(what, "sha256:rec"),
	     "recorded-same-call", "same tool and args (any key order)");
	T_OK(disp(&g, 3, WD_SE_EXTERNAL, "{\"cc\":\"y\",\"to\":\"x\"}", NULL) ==
		 WD_RP_REFUSED,
	     "recorded-other-step", "a recording of another step is not used");
	json_object_set_new(g.mocks, "mail", json_string("MOCK"));
	T_OK(disp(&g, 3, WD_SE_EXTERNAL, "{}", &what) == WD_RP_MOCK &&
		 !strcmp(what, "MOCK"),
	     "mock-external", "an external call without a recording is mocked");
	json_object_set_new(g.orig_side_effects, "mail",
			    json_string("internal"));
	T_OK(disp(&g, 3, WD_SE_INTERNAL, "{}", &what) == WD_RP_REFUSED &&
		 strstr(what, "internal side effect"),
	     "mock-not-internal",
	     "internal: recorded or refused, never mocked");
	/* --live-internal: live only where the manifest names a replay
	 * environment, and only when the original did not record it
	 * external */
	g.live_internal = true;
	T_OK(disp(&g, 3, WD_SE_INTERNAL, "{}", &what) == WD_RP_REFUSED &&
		 strstr(what, "names no replay environment"),
	     "live-internal-no-env", "--live-internal without an environment");
	struct wd_manifest env;
	memset(&env, 0, sizeof(env));
	g_env = &env;
	T_OK(disp(&g, 3, WD_SE_INTERNAL, "{}", NULL) == WD_RP_LIVE_ENV,
	     "live-internal-env", "internal + environment + --live-internal");
	T_OK(disp(&g, 2, WD_SE_INTERNAL, "{\"to\":\"x\",\"cc\":\"y\"}", NULL) ==
		 WD_RP_LIVE_ENV,
	     "live-internal-over-recording",
	     "--live-internal re-runs a recorded internal call in staging");
	json_object_set_new(g.orig_side_effects, "mail",
			    json_string("external"));
	json_object_del(g.mocks, "mail");
	T_OK(disp(&g, 3, WD_SE_INTERNAL, "{}", &what) == WD_RP_REFUSED &&
		 strstr(what, "external side effect"),
	     "live-internal-not-external",
	     "recorded external, relabelled internal with an environment: "
	     "never live");
	g.live_internal = false;
	json_object_set_new(g.orig_side_effects, "mail",
			    json_string("internal"));
	T_OK(disp(&g, 3, WD_SE_INTERNAL, "{}", &what) == WD_RP_REFUSED &&
		 strstr(what, "only with --live-internal"),
	     "env-needs-flag", "an environment alone does not make it live");
	g_env = NULL;
	json_object_del(g.orig_side_effects, "mail");
	g.tools_recorded = true;
	T_OK(disp(&g, 3, WD_SE_NONE, "{}", NULL) == WD_RP_REFUSED,
	     "tools-recorded-none", "--tools recorded: no recording, refused");
	T_OK(disp(&g, 2, WD_SE_NONE, "{\"to\":\"x\",\"cc\":\"y\"}", NULL) ==
		 WD_RP_RECORDED,
	     "tools-recorded-hit", "--tools recorded: the recording");
	json_decref(g.recorded);
	json_decref(g.orig_side_effects);
	json_decref(g.mocks);

	/* the record table: every type has one row, names unique */
	bool ok = true;
	for (int i = 1; i < WD_REC__COUNT; i++) {
		const char *n = wd_rec_type_name((enum wd_rec_type)i);
		ok &= n && wd_rec_type_of(n) == (enum wd_rec_type)i;
	}
	T_OK(ok, "record-table-roundtrip", "name -> type -> name");
	T_OK(wd_rec_type_of("no_such_type") == WD_REC_UNKNOWN &&
		 wd_rec_type_of(NULL) == WD_REC_UNKNOWN,
	     "record-table-unknown", "unknown names map to WD_REC_UNKNOWN");
	return T_DONE();
}
