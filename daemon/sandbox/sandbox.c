/* Dispatch a call to its tier's runner; what every tier shares. */
#include "sandbox/sandbox.h"
#include "common/log.h"

#include <string.h>

static const struct wd_runner *runner_for(int tier)
{
	switch (tier) {
	case 1:
	case 2:
		return &wd_runner_native;
	case 3:
		return &wd_runner_gvisor;
	}
	return NULL;
}

/* A root caller's tools never run as uid 0 on the host. */
static void effective_identity(const struct wd_call *in, uid_t *uid, gid_t *gid)
{
	*uid = in->caller_uid;
	*gid = in->caller_gid;
	if (*uid == 0) {
		const char *u = getenv("WARDEN_RUNAS_UID");
		const char *g = getenv("WARDEN_RUNAS_GID");
		*uid = u && *u ? (uid_t)strtoul(u, NULL, 10) : WD_DEFAULT_RUNAS;
		*gid = g && *g ? (gid_t)strtoul(g, NULL, 10) : WD_DEFAULT_RUNAS;
		if (*uid == 0)
			*uid = WD_DEFAULT_RUNAS;
	}
	if (*gid == 0)
		*gid = WD_DEFAULT_RUNAS;
}

int wd_sandbox_run(const struct wd_call *call, struct wd_result *res,
		   struct wd_err *err)
{
	const struct wd_manifest *m = call->manifest;
	memset(res, 0, sizeof(*res));
	res->status = WD_ST_SANDBOX_ERROR;
	res->exit_code = 125;
	if (!m)
		return wd_err_set(err, -EINVAL, "no manifest");
	res->tier = m->tier;
	if (call->call_id)
		wd_strlcpy(res->call_id, call->call_id, sizeof(res->call_id));
	else
		wd_rand_hex(res->call_id, 16);
	const struct wd_runner *rn = runner_for(m->tier);
	if (!rn)
		return wd_err_set(err, -EINVAL, "tier %d: no such tier",
				  m->tier);
	struct wd_call c = *call;
	effective_identity(call, &c.caller_uid, &c.caller_gid);
	uint64_t t0 = wd_now_ns();
	int r = rn->run(&c, res, err);
	res->duration_ns = wd_now_ns() - t0;
	if (r < 0) {
		res->status = WD_ST_SANDBOX_ERROR;
		res->exit_code = 125;
	}
	return r;
}
