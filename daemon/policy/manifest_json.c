/* struct wd_manifest -> JSON, for `warden policy show` and for anything that
 * records which policy a call ran under (paths as canonicalised at load). */
#include "policy/manifest.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <sys/socket.h>

static json_t *strv(char *const *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *net_rule(const struct wd_net_rule *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "text", json_string(r->text));
	if (r->needs_resolve) {
		json_object_set_new(o, "host", json_string(r->host));
	} else {
		char a[INET6_ADDRSTRLEN] = "";
		inet_ntop(AF_INET6, r->addr, a, sizeof(a));
		json_object_set_new(o, "addr", json_string(a));
		json_object_set_new(o, "prefix", json_integer(r->prefix));
	}
	json_object_set_new(o, "port", json_integer(r->port));
	return o;
}

json_t *wd_manifest_to_json(const struct wd_manifest *m)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(m->name));
	if (m->description)
		json_object_set_new(o, "description",
				    json_string(m->description));
	json_object_set_new(o, "tier", json_integer(m->tier));
	if (m->exec)
		json_object_set_new(o, "exec", strv(m->exec, m->n_exec));
	char *input = m->input == WD_INPUT_ARGV ? wd_strdup("argv")
		      : m->input == WD_INPUT_STDIN_FIELD
			  ? wd_asprintf("stdin:%s", m->input_field)
			  : wd_strdup("stdin");
	json_object_set_new(o, "input", json_string(input));
	free(input);
	if (m->argv_tmpl)
		json_object_set_new(o, "argv",
				    strv(m->argv_tmpl, m->n_argv_tmpl));
	json_t *schema =
	    m->args_schema ? json_loads(m->args_schema, 0, NULL) : NULL;
	json_object_set_new(o, "args_schema", schema ? schema : json_null());
	json_object_set_new(o, "timeout_ms", json_integer(m->timeout_ms));
	json_object_set_new(o, "memory_mb", json_integer(m->memory_mb));
	json_object_set_new(o, "cpus", json_real(m->cpus));
	json_object_set_new(o, "pids", json_integer(m->pids));
	json_t *allow = json_array();
	for (int i = 0; i < m->n_net_allow; i++)
		json_array_append_new(allow, net_rule(&m->net_allow[i]));
	json_t *fams = strv(m->socket_families, m->n_socket_families);
	if (m->net_icmp)
		json_array_append_new(fams, json_string("icmp"));
	json_t *net = json_pack("{s:o, s:o, s:b}", "allow", allow, "families",
				fams, "listen", m->net_listen);
	if (m->n_net_private) {
		json_t *pv = json_array();
		for (int i = 0; i < m->n_net_private; i++)
			json_array_append_new(
			    pv, json_string(m->net_private[i].text));
		json_object_set_new(net, "allow_private", pv);
	}
	json_object_set_new(o, "network", net);
	if (m->filesystem_ephemeral)
		json_object_set_new(o, "filesystem", json_string("ephemeral"));
	else
		json_object_set_new(
		    o, "filesystem",
		    json_pack("{s:o, s:o, s:o}", "read",
			      strv(m->fs_read.v, m->fs_read.n), "write",
			      strv(m->fs_write.v, m->fs_write.n), "exec",
			      strv(m->fs_exec.v, m->fs_exec.n)));
	json_object_set_new(
	    o, "syscalls",
	    json_pack("{s:o}", "deny",
		      strv(m->syscalls_deny, m->n_syscalls_deny)));
	json_object_set_new(
	    o, "auth",
	    json_pack("{s:s, s:o}", "mode",
		      m->auth_mode == WD_AUTH_SERVICE ? "service"
						      : "on_behalf_of_user",
		      "scopes", strv(m->auth_scopes, m->n_auth_scopes)));
	if (m->rate_limit.count)
		json_object_set_new(o, "rate_limit",
				    json_pack("{s:i, s:i, s:s}", "count",
					      m->rate_limit.count, "per_s",
					      m->rate_limit.per_s, "scope",
					      m->rate_limit.scope));
	json_object_set_new(
	    o, "side_effects",
	    json_string(wd_side_effects_words[m->side_effects % 3]));
	json_t *above = json_object();
	for (int i = 0; i < m->approval.n_above; i++)
		json_object_set_new(above, m->approval.above_keys[i],
				    json_real(m->approval.above_vals[i]));
	json_object_set_new(o, "approval",
			    json_pack("{s:b, s:o}", "always",
				      m->approval.always, "required_above",
				      above));
	json_object_set_new(
	    o, "output",
	    json_pack("{s:i}", "max_bytes", (json_int_t)m->output_max_bytes));
	json_object_set_new(
	    o, "mode",
	    json_string(m->mode == WD_MODE_AUDIT ? "audit" : "enforce"));
	json_object_set_new(o, "require", strv(m->require, m->n_require));
	if (m->n_env)
		json_object_set_new(o, "env", strv(m->env, m->n_env));
	if (m->replay_env) {
		/* what a live replay runs it with (the whole manifest) */
		json_object_set_new(
		    o, "replay",
		    json_pack("{s:o}", "environment",
			      wd_manifest_to_json(m->replay_env)));
	}
	return o;
}
