/* libFuzzer target: the policy parsers take files written by people (and,
 * through `warden policy check`, anything a user points them at). Feed the
 * bytes to the tool-manifest, agent and users parsers and to the network
 * rule parser; every result must be freeable and every failure must come
 * with a diagnostic. */
#include "policy/agent.h"
#include "policy/manifest.h"
#include "policy/users.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct wd_diag d = {0};

	struct wd_manifest **m = NULL;
	int n = 0;
	if (wd_manifest_load_all_str("f.yaml", text, size, &m, &n, &d) == 0) {
		if (n < 1 || d.n)
			abort();
		for (int i = 0; i < n; i++)
			if (!m[i]->name || !m[i]->args_schema ||
			    !m[i]->net_allow)
				abort();
		wd_manifest_free_all(m, n);
	} else if (d.n == 0) {
		abort(); /* failed without saying why */
	}
	wd_diag_free(&d);

	struct wd_agent **a = NULL;
	if (wd_agent_load_all_str("f.yaml", text, size, &a, &n, &d) == 0)
		wd_agent_free_all(a, n);
	else if (d.n == 0)
		abort();
	wd_diag_free(&d);

	struct wd_users *u = NULL;
	if (wd_users_load_str("f.yaml", text, size, &u, &d) == 0) {
		const char **v;
		free((void *)(wd_users_scopes_for_uid(u, 1000, &v), v));
		wd_users_is_approver(u, 1000);
		wd_users_free(u);
	} else if (d.n == 0) {
		abort();
	}
	wd_diag_free(&d);

	if (size < 512) {
		char buf[512];
		memcpy(buf, data, size);
		buf[size] = 0;
		struct wd_net_rule r;
		struct wd_err err = {0};
		if (wd_net_rule_parse(buf, &r, &err) == 0) {
			if (r.prefix > 128 || (r.needs_resolve && !r.host[0]))
				abort();
		} else if (!err.msg[0]) {
			abort();
		}
	}
	return 0;
}
