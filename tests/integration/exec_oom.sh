#!/usr/bin/env bash
# A call that reaches its memory_mb ends with status oom, and nothing else
# dies: the attacks run inside the sandbox (the shipped shell tool's
# `cat /dev/zero > /tmp/fill`: tmpfs pages no process maps, so the OOM
# killer's choice is not the writer), the verdicts come from outside it:
# `warden exec`'s own exit and output, wardend still answering, and a
# bystander run of another team, started at the same moment, completing
# with its tool's output. On the old build the victim was tier 2's pid 1,
# which ran on the supervisor's memory: `warden exec` died with 137 and no
# output, wardend died with every run in it.
. tests/lib.sh
[ "$(id -u)" -eq 0 ] || { skip exec-oom "needs root"; finish; }
. tests/integration/daemon_lib/common.sh

SHELL_POL=$ROOT_DIR/policy/tools/shell.yaml
# 1. warden exec, the shipped shell tool (tier 2, memory_mb 64)
out=$(printf 'cat /dev/zero > /tmp/fill; echo survived' |
	timeout 60 "$WARDEN" exec --policy "$SHELL_POL" --stdin - --json -- /usr/bin/dash -s)
rc=$?
expect_eq oom/t2-tmpfs-exit-code "$rc" 137
expect_match oom/t2-tmpfs-json "$out" '"status": "oom"'
# without --json: the documented message, the same exit code
err=$(printf 'cat /dev/zero > /tmp/fill' |
	timeout 60 "$WARDEN" exec --policy "$SHELL_POL" --stdin - -- /usr/bin/dash -s 2>&1 >/dev/null)
rc=$?
expect_eq oom/t2-tmpfs-plain-exit-code "$rc" 137
expect_match oom/t2-tmpfs-plain-message "$err" 'out of memory \(limit 64 MB\)'

# anonymous memory in a pipe's buffers (no process's RSS either): 32
# pipes of 1 MiB (the unprivileged F_SETPIPE_SZ bound) filled and held
cat >"$T/pipes.yaml" <<EOF
name: pipes
description: fill pipe buffers
tier: 2
exec: ["/usr/bin/python3", "-c"]
timeout_ms: 20000
memory_mb: 24
pids: 16
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin/python3"]}
EOF
if [ -x /usr/bin/python3 ]; then
	out=$(timeout 60 "$WARDEN" exec --policy "$T/pipes.yaml" --json -- /usr/bin/python3 -c '
import os, fcntl
keep = []
for i in range(256):
    r, w = os.pipe()
    try: fcntl.fcntl(w, 1031, 1 << 20)
    except OSError: pass
    os.set_blocking(w, False)
    try:
        while True: os.write(w, b"x" * 65536)
    except BlockingIOError: pass
    keep.append((r, w))
print("held", len(keep))')
	rc=$?
	expect_match oom/t2-pipes-status "$out" '"status": "oom"'
	expect_eq oom/t2-pipes-exit-code "$rc" 137
else
	skip oom/t2-pipes "python3 missing"
fi

# 2. under wardend: team-fill's run fills /tmp; team-by's run, started
# at the same moment, must complete untouched and the daemon live
base_policy
cat >"$POL/tools/fill.yaml" <<EOF
name: fill
description: fills its /tmp
tier: 2
exec: ["/usr/bin/dash", "-c", "cat /dev/zero > /tmp/fill"]
input: stdin
args_schema: {type: object}
timeout_ms: 20000
memory_mb: 32
pids: 16
network: {allow: []}
filesystem: {read: $LIBS, write: [], exec: ["/usr/bin/dash", "/usr/bin/cat"]}
auth: {mode: on_behalf_of_user, scopes: ["test:fill"]}
side_effects: none
EOF
cat >"$POL/tools/bystander.yaml" <<EOF
name: bystander
description: works for a while, then answers
tier: 2
exec: ["/usr/bin/dash", "-c", "sleep 1.5; echo bystander-ok"]
input: stdin
args_schema: {type: object}
timeout_ms: 20000
memory_mb: 32
pids: 16
network: {allow: []}
filesystem: {read: $LIBS, write: [], exec: ["/usr/bin/dash", "/usr/bin/sleep"]}
auth: {mode: on_behalf_of_user, scopes: ["test:by"]}
side_effects: none
EOF
script callfill <<'S'
{"tool_calls": [{"name": "fill", "arguments": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}}
S
script callby <<'S'
{"tool_calls": [{"name": "bystander", "arguments": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}}
S
agent filler callfill '[fill]' 1
agent byst callby '[bystander]' 1
write_gateway
start_daemon || { fail oom/daemon-start "see log"; finish; }
as_user 1000 "$WARDEN" run --json byst go >"$T/by.out" 2>&1 &
BY=$!
as_user 1000 "$WARDEN" run --json filler go >"$T/fill.out" 2>&1
wait $BY
fill_id=$(head -1 "$T/fill.out" | jq_py 'd["run_id"]' 2>/dev/null)
by_id=$(head -1 "$T/by.out" | jq_py 'd["run_id"]' 2>/dev/null)
if kill -0 "$WPID" 2>/dev/null && curl -s --unix-socket "$SOCK" http://w/healthz >/dev/null; then
	pass oom/daemon-alive
else
	fail oom/daemon-alive "wardend died: $(tail -3 "$T/wardend.log")"
fi
expect_match oom/daemon-tool-result-oom "$(rec_of "$fill_id" tool_result)" '"status":"oom"'
expect_match oom/bystander-completed "$(rec_of "$by_id" tool_result)" '"status":"ok"'
expect_match oom/bystander-output "$(cat "$T/by.out")" 'bystander-ok'
# the daemon still runs tools afterwards
as_user 1000 "$WARDEN" run --json byst again >"$T/by2.out" 2>&1
expect_match oom/daemon-still-works "$(cat "$T/by2.out")" 'bystander-ok'
stop_daemon

# 3. under wardend: a tier-1 tool leaves a 10,000-deep tree (and a
# symlink to /) in its write path; the end of the call walks it (its
# files re-owned to the caller: sandbox/settle.c, iterative, never through
# a link) while another team's run goes on. The daemon lives, the bystander
# completes, and the deepest directory belongs to the caller (uid 1000).
mkdir -p "$T/deepw" && chmod 755 "$T/deepw"
cat >"$T/deep.py" <<'PY'
import os, sys
os.chdir(sys.argv[1]); os.symlink("/", "root-link")
for i in range(10000):
    os.mkdir("d"); os.chdir("d")
print("depth", i + 1)
PY
chmod 644 "$T/deep.py"
cat >"$POL/tools/deep.yaml" <<EOF
name: deep
description: leaves a deep tree in its write path
tier: 1
exec: ["/usr/bin/python3", "$T/deep.py", "$T/deepw"]
input: stdin
args_schema: {type: object}
timeout_ms: 60000
memory_mb: 64
pids: 16
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "$T/deep.py"], write: ["$T/deepw"], exec: ["/usr/bin/python3"]}
auth: {mode: on_behalf_of_user, scopes: ["test:fill"]}
side_effects: none
EOF
script calldeep <<'S'
{"tool_calls": [{"name": "deep", "arguments": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}}
S
agent deeper calldeep '[deep]' 1
write_gateway
start_daemon || { fail deep/daemon-start "see log"; finish; }
as_user 1000 "$WARDEN" run --json byst go >"$T/by3.out" 2>&1 &
BY=$!
as_user 1000 "$WARDEN" run --json deeper go >"$T/deep.out" 2>&1
wait $BY
deep_id=$(head -1 "$T/deep.out" | jq_py 'd["run_id"]' 2>/dev/null)
if kill -0 "$WPID" 2>/dev/null && curl -s --unix-socket "$SOCK" http://w/healthz >/dev/null; then
	pass deep/daemon-alive
else
	fail deep/daemon-alive "wardend died: $(tail -3 "$T/wardend.log")"
fi
expect_match deep/tool-ok "$(rec_of "$deep_id" tool_result)" '"status":"ok"'
expect_match deep/bystander-output "$(cat "$T/by3.out")" 'bystander-ok'
owner=$(python3 -c '
import os, sys
os.chdir(sys.argv[1]); n = 0
while os.path.isdir("d") and not os.path.islink("d"):
    os.chdir("d"); n += 1
print(n, os.stat(".").st_uid)' "$T/deepw")
expect_eq deep/tree-settled-to-caller "$owner" "10000 1000"
expect_eq deep/link-not-followed "$(stat -c %u /)" 0
stop_daemon
rm -rf "$T/deepw"
finish
