#!/usr/bin/env bash
# Fail closed (issue 5 item 4): when the trace store cannot write, no tool
# starts unrecorded unless the agent says trace.unrecorded_read_only: allow,
# and then only tools with side_effects: none. A real wardend with its state
# directory on a small tmpfs that the test fills; whether a tool ran is
# judged outside the daemon, by the marker file the tool writes.
# A sleeping read-only step 0 holds each run while the disk is filled.
# An approval decided while the store cannot write is refused and stays
# pending (the decision is recorded before it takes effect).
# Also: a side-effecting tool_attempt is fdatasync'ed before the tool's
# process is created (strace of the real daemon).
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-failclosed "needs root"; finish; }

base_policy
OUT=$T/out # the tools' marker files (outside the state dir)
mkdir -p "$OUT"
chmod 777 "$OUT"
# mark_tool NAME SIDE_EFFECTS [EXTRA_YAML...]: touches $OUT/<marker>, where
# the marker is the call's "m" argument (argv input: touch's operand)
mark_tool() {
	local name=$1 se=$2
	shift 2
	tool "$name" '["/usr/bin/touch"]' "input: argv" \
		"args_schema: {type: object, required: [m], additionalProperties: false, properties: {m: {type: string}, pad: {type: string}}}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:mark\"]}" "side_effects: $se" "$@"
	sed -i "s|write: \[\]|write: [\"$OUT\"]|" "$POL/tools/$name.yaml"
}
# argv input: every argument's value is an operand of touch, so the pad is
# a file name too (relative: created, if ever, in the tool's cwd, not $OUT)
mark_tool romark none
mark_tool semark external
mark_tool roplain none
mark_tool apmark none "approval: always"
# sleeper: a read-only step 0 that holds the run while the test fills the
# disk (the run must be past its start: run creation refuses a run whose
# marker cannot be written)
tool sleeper '["/usr/bin/sleep"]' "input: argv" \
	"args_schema: {type: object, required: [s], additionalProperties: false, properties: {s: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:mark\"]}" "side_effects: none"

# trace.unrecorded_read_only: validated like every other field
agent strict strict '[sleeper, romark]'
sed -i 's/retention_days: 1}/retention_days: 1, unrecorded_read_only: sometimes}/' "$POL/agents/strict.yaml"
out=$("$WARDEN" policy check "$POL" 2>&1)
expect_match field-bad-value "$out" "strict.yaml:[0-9]+:[0-9]+: 'trace.unrecorded_read_only': 'sometimes' is not one of refuse\|allow"
sed -i 's/unrecorded_read_only: sometimes/unrecorded_read_only: refuse/' "$POL/agents/strict.yaml"
agent lenient lenient '[sleeper, romark, semark]'
sed -i 's/retention_days: 1}/retention_days: 1, unrecorded_read_only: allow}/' "$POL/agents/lenient.yaml"
agent synced synced '[roplain, semark]'
agent approver approver '[apmark]'

# the attempt record is > 4 KiB (args inline up to 4096 bytes): on a full
# tmpfs its write needs a new page whatever the segment's last page holds.
# The pad is base64 without '/': a valid file name for touch, never created
# because the disk is full or the pad's cwd is not writable.
pad=$(head -c 2900 /dev/urandom | base64 -w0 | tr -d '/+=' | head -c 3800)
script strict <<S
{"step": 0, "tool_calls": [{"name": "sleeper", "arguments": {"s": "6"}}]}
{"step": 1, "tool_calls": [{"name": "romark", "arguments": {"m": "$OUT/a-ro.mark", "pad": "$pad"}}]}
{"text": "ran"}
S
script lenient <<S
{"step": 0, "tool_calls": [{"name": "sleeper", "arguments": {"s": "6"}}]}
{"step": 1, "tool_calls": [{"name": "romark", "arguments": {"m": "$OUT/b-ro.mark", "pad": "$pad"}}]}
{"step": 2, "tool_calls": [{"name": "semark", "arguments": {"m": "$OUT/b-se.mark"}}]}
{"text": "ran"}
S
script approver <<S
{"step": 0, "tool_calls": [{"name": "apmark", "arguments": {"m": "$OUT/d-ap.mark"}}]}
{"text": "ran"}
S
script synced <<S
{"step": 0, "tool_calls": [{"name": "semark", "arguments": {"m": "$OUT/c-se.mark"}}]}
{"step": 1, "tool_calls": [{"name": "roplain", "arguments": {"m": "$OUT/c-ro.mark"}}]}
{"text": "done"}
S
write_gateway
check policy-ok "$WARDEN" policy check "$POL"

SMALL=$T/small
mkdir -p "$SMALL"
umount_small() { mountpoint -q "$SMALL" && umount -l "$SMALL"; }
trap 'umount_small; cleanup_all' EXIT

# daemon_on_small: a fresh 4 MiB tmpfs holding the state directory
daemon_on_small() {
	umount_small
	mount -t tmpfs -o size=4m warden-fc "$SMALL" || return 1
	START_STATE=$SMALL/state start_daemon_at
}
start_daemon_at() {
	rm -f "$SOCK"
	FAKE_KEY=test-key "$WARDEND" --state "$START_STATE" --policy "$POL" --socket "$SOCK" \
		--workers 4 >>"$T/wardend.log" 2>&1 &
	WPID=$!
	wait_until 10 curl -sf --unix-socket "$SOCK" http://w/healthz
}
NFILL=0
fill_disk() { # new files each time: never truncates (frees) an earlier one
	NFILL=$((NFILL + 1))
	dd if=/dev/zero of="$SMALL/fill.$NFILL.a" bs=64k 2>/dev/null
	dd if=/dev/zero of="$SMALL/fill.$NFILL.b" bs=4k 2>/dev/null
}
# break_store NAME AGENT: fill the disk, then make the store fail for sure:
# a run whose run_start (> 4 KiB of task) cannot be written latches it
# unhealthy (the index may free space when it gives up: filled again)
break_store() {
	fill_disk
	as_user 1000 "$WARDEN" run --detach "$2" "$pad" >/dev/null 2>&1
	if wait_until 10 store_unhealthy; then pass "$1-store-failed"
	else fail "$1-store-failed" "the store still writes: the test proves nothing"; fi
	fill_disk
}
has_approval() { [ "$(approvals_count)" -ge 1 ]; }
store_unhealthy() { curl -s --unix-socket "$SOCK" http://w/metrics | grep -q '^warden_trace_healthy 0'; }
segments_of() { cat "$SMALL"/state/trace/segments/*.jsonl 2>/dev/null; }
# the sleeper's attempt is on disk: the run is past its start, the tool runs
sleeping() { segments_of | grep -q '"type":"tool_attempt".*"gen_ai.tool.name":"sleeper"\|"gen_ai.tool.name":"sleeper".*"type":"tool_attempt"'; }

if ! mount -t tmpfs -o size=4m warden-fc "$SMALL" 2>/dev/null; then
	skip failclosed-default "cannot mount a tmpfs here"
	skip failclosed-allow "cannot mount a tmpfs here"
else
	umount "$SMALL"
	# (a) default agent, read-only tool, full disk: the tool does not run.
	# Also: an approval decided while the store cannot write is refused
	# with the store's error and stays pending.
	if daemon_on_small; then
		apid=$(as_user 1000 "$WARDEN" run --detach approver go)
		wait_until 10 has_approval || fail default-approval-asked "no approval request: $(tail -3 "$T/wardend.log")"
		ap=$(first_approval)
		id=$(as_user 1000 "$WARDEN" run --detach strict go)
		if wait_until 10 sleeping; then
			break_store default strict
			out=$(as_user 1001 "$WARDEN" approvals approve "$ap" 2>&1) && rc=0 || rc=$?
			if [ -n "$ap" ] && [ "$rc" -ne 0 ]; then pass approve-refused-when-full
			else fail approve-refused-when-full "approve of '$ap' succeeded (rc $rc): $out"; fi
			expect_match approve-refused-reason "$out" "trace store unhealthy: No space left on device"
			expect_eq approve-still-pending "$(first_approval)" "$ap"
			expect_eq approve-run-suspended "$(run_state "$apid" state)" awaiting_approval
			if [ -e "$OUT/d-ap.mark" ]; then
				fail approve-tool-not-run "the tool ran on a refused approval: $OUT/d-ap.mark exists"
			else
				pass approve-tool-not-run
			fi
			wait_until 20 run_done "$id"
			[ -n "${DEBUG_T:-}" ] && { df -k "$SMALL"; ls -laR "$SMALL/state"; "$WARDEN" trace show --state "$SMALL/state" "$id"; tail -20 "$T/wardend.log"; }
			expect_eq default-run-failed "$(run_state "$id" status)" failed
			# whichever record meets the full disk first (the next
			# model_call or romark's attempt), the run ends
			# with the store's error and romark never starts
			expect_match default-reason "$(run_state "$id" reason)" \
				"^(model_call|tool 'romark' not run: its attempt) could not be recorded .*trace.unrecorded_read_only: refuse\): .*No space left on device"
			if [ -e "$OUT/a-ro.mark" ]; then
				fail default-tool-not-run "the read-only tool ran: $OUT/a-ro.mark exists"
			else
				pass default-tool-not-run
			fi
			expect_eq default-no-attempt-on-disk "$(segments_of | grep '"type":"tool_attempt"' | grep -c '"gen_ai.tool.name":"romark"')" 0
		else
			fail default-sleeping "the sleeper's attempt never reached the trace: $(run_state "$id" reason) $(tail -3 "$T/wardend.log")"
		fi
		stop_daemon
	else
		fail default-daemon "did not start: $(tail -3 "$T/wardend.log")"
	fi

	# (b) trace.unrecorded_read_only: allow: the read-only tool runs
	# unrecorded; the side-effecting one of the next step is refused
	if daemon_on_small; then
		id=$(as_user 1000 "$WARDEN" run --detach lenient go)
		if wait_until 10 sleeping; then
			break_store allow lenient
			wait_until 20 run_done "$id"
			if [ -e "$OUT/b-ro.mark" ]; then pass allow-read-only-ran
			else fail allow-read-only-ran "no $OUT/b-ro.mark: $(run_state "$id" reason)"; fi
			expect_match allow-read-only-warned "$(cat "$T/wardend.log")" \
				"run $id: tool_attempt not recorded .*tool 'romark' has no side effects"
			expect_eq allow-run-failed "$(run_state "$id" status)" failed
			expect_match allow-side-effect-refused "$(run_state "$id" reason)" \
				"tool 'semark' not run: its attempt could not be recorded durably: .*No space left on device"
			if [ -e "$OUT/b-se.mark" ]; then
				fail allow-side-effect-not-run "the side-effecting tool ran: $OUT/b-se.mark exists"
			else
				pass allow-side-effect-not-run
			fi
		else
			fail allow-sleeping "the sleeper's attempt never reached the trace: $(run_state "$id" reason) $(tail -3 "$T/wardend.log")"
		fi
		stop_daemon
	else
		fail allow-daemon "did not start: $(tail -3 "$T/wardend.log")"
	fi
	umount_small
fi

# (c) the side-effecting attempt is written, then fdatasync'ed, and only then
# is the tool's first process created; the read-only one is written (not
# necessarily synced) before its process is created
if ! command -v strace >/dev/null; then
	skip attempt-synced-before-clone "strace not installed"
else
	mkdir -p "$T/state"
	rm -f "$SOCK"
	FAKE_KEY=test-key strace -f -tt -y -s 65536 -o "$T/strace.log" \
		-e trace=write,writev,pwrite64,fdatasync,fsync,clone,clone3,execve \
		"$WARDEND" --state "$T/state" --policy "$POL" --socket "$SOCK" \
		--workers 2 >>"$T/wardend.log" 2>&1 &
	SPID=$!
	if wait_until 20 curl -sf --unix-socket "$SOCK" http://w/healthz; then
		WPID=$(cat /proc/$SPID/task/*/children 2>/dev/null | awk '{print $1}')
		id=$(as_user 1000 "$WARDEN" run --detach synced go)
		wait_until 60 run_done "$id"
		expect_eq synced-run-ok "$(run_state "$id" status)" ok
		[ -e "$OUT/c-se.mark" ] && [ -e "$OUT/c-ro.mark" ] && pass synced-tools-ran ||
			fail synced-tools-ran "markers missing: $(run_state "$id" reason)"
		kill -TERM "$WPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
		WPID=
		out=$(python3 - "$T/strace.log" "$OUT" <<'PY'
import re, sys
log, out = sys.argv[1], sys.argv[2]
lines = open(log, errors="replace").read().splitlines()
# strace -f -o: "PID HH:MM:SS.us call(args) = ret", split calls as
# "PID t call(args <unfinished ...>" + "PID t <... call resumed>...) = ret"
head = re.compile(r"^(\d+)\s+\S+\s+(.*)$")
calls = []          # [name, pid, start_idx, end_idx, text, ret]
pending = {}        # pid -> call index
for i, l in enumerate(lines):
    m = head.match(l)
    if not m:
        continue
    pid, rest = int(m.group(1)), m.group(2)
    r = re.match(r"<\.\.\. (\w+) resumed>(.*)$", rest)
    if r:
        c = pending.pop(pid, None)
        if c is not None:
            calls[c][3] = i
            calls[c][4] += r.group(2)
            rm = re.search(r"\) += (-?\d+)", r.group(2))
            calls[c][5] = int(rm.group(1)) if rm else None
        continue
    n = re.match(r"(\w+)\((.*)$", rest)
    if not n:
        continue
    c = [n.group(1), pid, i, None, n.group(2), None]
    if rest.endswith("<unfinished ...>"):
        pending[pid] = len(calls)
    else:
        c[3] = i
        rm = re.search(r"\) += (-?\d+)", rest)
        c[5] = int(rm.group(1)) if rm else None
    calls.append(c)
# which clone created each pid, and was it a thread?
creator = {}
for c in calls:
    if c[0] in ("clone", "clone3") and c[5] and c[5] > 0:
        creator[c[5]] = c
def first_process_clone(pid):
    """the clone that created the tool's first (non-thread) process"""
    top = None
    while pid in creator and "CLONE_THREAD" not in creator[pid][4]:
        top = creator[pid]
        pid = top[1]
    return top
def check(tool, marker, want_sync):
    ex = [c for c in calls if c[0] == "execve" and marker in c[4]]
    if not ex:
        return "FAIL attempt-%s: no execve of the %s tool in the strace log" % (tool, tool)
    top = first_process_clone(ex[0][1])
    if top is None:
        return "FAIL attempt-%s: no clone found for the tool's process" % tool
    seg = re.compile(r'^(\d+)<([^>]*\.jsonl)>')
    wr = [c for c in calls if c[0] in ("write", "writev", "pwrite64")
          and seg.match(c[4]) and '\\"type\\":\\"tool_attempt\\"' in c[4]
          and ('\\"gen_ai.tool.name\\":\\"%s\\"' % tool) in c[4]
          and c[3] is not None and c[2] < top[2]]
    if not wr:
        return "FAIL attempt-%s: its tool_attempt was not written to a segment before the tool's clone" % tool
    w = wr[-1]
    if w[5] is None or w[5] <= 0:
        return "FAIL attempt-%s: the segment write failed (%s)" % (tool, w[5])
    path = seg.match(w[4]).group(2)
    if w[3] >= top[2]:
        return "FAIL attempt-%s: the write completed after the clone started" % tool
    syncs = [c for c in calls if c[0] in ("fdatasync", "fsync")
             and c[2] > w[3] and c[3] is not None and c[3] < top[2]
             and c[5] == 0 and (seg.match(c[4]) or [None, None, None])[2] == path]
    if want_sync and not syncs:
        return "FAIL attempt-%s-synced: no fdatasync of %s completed between the attempt's write (line %d) and the tool's clone (line %d)" % (tool, path, w[3] + 1, top[2] + 1)
    return "PASS attempt-%s-%s" % (tool, "synced-before-clone" if want_sync else "written-before-clone")
print(check("semark", out + "/c-se.mark", True))
print(check("roplain", out + "/c-ro.mark", False))
PY
)
		echo "$out"
		printf '%s\n' "$out" | grep -q '^FAIL' && _fail=1
	else
		fail synced-daemon "wardend under strace did not start: $(tail -3 "$T/wardend.log")"
		kill -TERM "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
fi
finish
