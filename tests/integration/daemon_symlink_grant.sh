#!/usr/bin/env bash
# wardend loads its tools' paths once; a tool that later replaces a path
# another grant names with a symlink must not redirect that grant (made as
# root at the call's start: the write path's ACL, the Landlock rule). Run 1's
# tool (its manifest writes ws and the nested ws/out) replaces ws/out with a
# link to a directory no manifest names; run 2's tool writes into ws/out.
# The verdict from outside: no file and no pool-uid ACL appeared on the
# target, run 2's call failed with the link named, and the link a tool made
# is not root's after its call (its principal's here; 65534 when that is
# root). On the build with the hole, run 2's tool wrote target/pwned.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-symlink-grant "needs root"; finish; }

A=$(mktemp -d /var/tmp/warden-symd.XXXXXX)
chmod 755 "$A"
mkdir -p "$A/ws/out" "$A/target"
chmod 755 "$A/ws" "$A/ws/out" "$A/target"
trap 'rm -rf "$A"; cleanup_all' EXIT

base_policy
shtool() { # name command
	cat >"$POL/tools/$1.yaml" <<Y
name: $1
description: test tool $1
tier: 1
exec: ["/bin/sh", "-c", "$2"]
timeout_ms: 20000
input: stdin
args_schema: {type: object}
auth: {mode: on_behalf_of_user, scopes: ["test:$1"]}
side_effects: none
network: {allow: []}
filesystem: {read: $LIBS, write: ["$A/ws", "$A/ws/out"], exec: ["/usr/bin"]}
Y
}
shtool planter "rmdir $A/ws/out && ln -s $A/target $A/ws/out && echo planted"
shtool writer "touch $A/ws/out/pwned && echo wrote"
script plant <<'S'
{"step": 0, "tool_calls": [{"name": "planter", "arguments": {}}]}
{"text": "planted: {{result.stdout}}"}
S
script write <<'S'
{"step": 0, "tool_calls": [{"name": "writer", "arguments": {}}]}
{"text": "wrote: {{result.stdout}} {{result.stderr}}"}
S
agent plant plant '[planter]'
agent write write '[writer]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

as_user 1000 "$WARDEN" run --json plant go >"$T/plant.out" 2>&1
if [ ! -L "$A/ws/out" ]; then
	fail symd/link-planted "run 1's tool made no link: $(tail -3 "$T/plant.out")"
	finish
fi
pass symd/link-planted
# on behalf of alice: her link after the call (a root principal's: 65534)
expect_eq symd/tool-link-not-roots "$(stat -c %u "$A/ws/out")" 1000

as_user 1000 "$WARDEN" run --json write go >"$T/write.out" 2>&1
if [ -e "$A/target/pwned" ]; then
	fail symd/link-not-followed "run 2's tool wrote through the link"
else
	pass symd/link-not-followed
fi
expect_eq symd/no-acl-on-target \
	"$(getfacl -cp "$A/target" 2>/dev/null | grep -c '^user:2[0-9]\{9\}:')" 0
id=$(head -1 "$T/write.out" | jq_py 'd["run_id"]')
res=$(rec_of "$id" tool_result)
expect_match symd/call-failed-naming-link "$res" "ws/out' is a symlink of uid 1000"
kill -0 "$WPID" 2>/dev/null && pass symd/daemon-alive || fail symd/daemon-alive "wardend died"
stop_daemon
finish
