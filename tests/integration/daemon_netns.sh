#!/usr/bin/env bash
# wardend's tier-1 calls without network join the node's pinned empty
# network namespace (sandbox/netns.h), as one-shot `warden exec` calls do:
# two calls of two runs print the same /proc/self/ns/net, and it is the
# namespace mounted at the pin -- judged from outside by the pin's inode.
# Without the pin, wardend made a namespace of its own that no path names.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-netns "needs root"; finish; }

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
start_daemon || { fail daemon-netns-start "see log"; finish; }
ns_of_run() {
	setpriv --reuid 1000 --regid 1000 --clear-groups --no-new-privs "$WARDEN" run --json nsrun go 2>&1 |
		grep '"type":"run_end"' | grep -o 'ns=\[net:\[[0-9]*\]' | sed 's/^ns=\[//'
}
a=$(ns_of_run); b=$(ns_of_run)
stop_daemon
pin=${WARDEN_NETNS_PIN:-/run/warden/netns-empty}
p=
awk -v p="$pin" '$5 == p' /proc/self/mountinfo | grep -q ' - nsfs ' && p="net:[$(stat -L -c %i "$pin")]"
expect_match daemon-netns/has-one "$a" '^net:\[[0-9]+\]$'
[ "$a" != "$(readlink /proc/self/ns/net)" ] && [ "$a" = "$b" ] && [ "$a" = "$p" ] &&
	pass daemon-netns/pinned || fail daemon-netns/pinned "calls '$a' '$b', host $(readlink /proc/self/ns/net), pin '$p' ($(tail -5 "$T/wardend.log"))"
finish
