# Shared by daemon_netns*.sh: a tool that prints its network namespace
# (/proc/self/ns/net), an agent that calls it once, and ns_of_run, the
# namespace one run of it printed ("net:[N]"). Source after common.sh.
netns_policy() {
	base_policy
	tool nsread '["/usr/bin/readlink", "/proc/self/ns/net"]' "input: stdin" \
		"args_schema: {type: object, required: [n], additionalProperties: false, properties: {n: {type: string}}}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:echo\"]}" "side_effects: none"
	sed -i 's|read: \[|read: ["/proc", |' "$POL/tools/nsread.yaml"
	script nsrun <<'S'
{"step": 0, "tool_calls": [{"name": "nsread", "arguments": {"n": "x"}}]}
{"after": "nsread", "text": "ns=[{{result.stdout}}]"}
{"text": "other: {{last}}"}
S
	agent nsrun nsrun '[nsread]'
	write_gateway
}
ns_of_run() {
	setpriv --reuid 1000 --regid 1000 --clear-groups --no-new-privs "$WARDEN" run --json nsrun go 2>&1 |
		grep '"type":"run_end"' | grep -o 'ns=\[net:\[[0-9]*\]' | sed 's/^ns=\[//'
}
