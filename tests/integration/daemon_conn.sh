#!/usr/bin/env bash
# wardend under hostile and bursty clients (daemon/wardend/conn.h): one uid
# holding 2,000 idle and 200 slowloris connections locks nobody else out;
# what it holds is closed by the request deadline while it still holds
# them (the daemon's fd count returns to its idle value); its surplus is
# refused with a 503 that names the uid; 500 concurrent connects are all
# answered; long streams outlive the timeouts; the CLI says "not running",
# "refused: too many connections from uid N" and "timed out" apart;
# /healthz is 503 with the reason while the trace store cannot write.
# The hostile client is tests/conn_client.py.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-conn "needs root"; finish; }
CC=$ROOT_DIR/tests/conn_client.py
HOSTILE=1001 # bob
OTHER=1000   # alice

base_policy
tool sleeper '["/usr/bin/sleep", "7"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:echo\"]}" "side_effects: none"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
script slow <<'S'
{"step": 0, "tool_calls": [{"name": "sleeper", "arguments": {}}]}
{"text": "slept"}
S
agent one once '[echo]'
agent slow slow '[sleeper]'
write_gateway

fdcount() { ls "/proc/$WPID/fd" 2>/dev/null | wc -l; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }
# median wall time (ms) of 5 runs of CMD; fails (prints FAIL) if any run fails
median_ms() {
	local i t0 rc ts=()
	for i in 1 2 3 4 5; do
		t0=$(ms_now)
		"$@" >/dev/null 2>"$T/median.err" || { echo FAIL; return; }
		ts+=($(($(ms_now) - t0)))
	done
	printf '%s\n' "${ts[@]}" | sort -n | sed -n 3p
}
other_status() { as_user $OTHER curl -sf --unix-socket "$SOCK" http://w/v1/status; }
other_run() { as_user $OTHER "$WARDEN" run --detach one "x"; }
other_approvals() { as_user $OTHER "$WARDEN" approvals ls; }
hostile() { python3 "$CC" --uid $HOSTILE "$1" "$SOCK" "$2" "$3" >"$4" 2>&1; } # MODE N HOLD_S OUT
# NAME CMD...: CMD's median over 5 runs is within 100 ms. The criterion is
# the hostile client's effect: on a loaded machine, where CMD alone
# (measured before the hostile client starts, into base_NAME) is slow
# already, the bound is twice that plus 50 ms if that is more, and the
# output says so.
fast() {
	local n=$1 m b bound=100; shift
	m=$(median_ms "$@")
	b=$(cat "$T/base_$n" 2>/dev/null || echo 0)
	[ "$b" != FAIL ] && [ $((2 * b + 50)) -gt 100 ] && bound=$((2 * b + 50))
	if [ "$m" != FAIL ] && [ "$m" -le $bound ]; then
		pass "$n"
		[ $bound -gt 100 ] && echo "  ($n: machine loaded, ${b} ms without the hostile client; bound $bound ms)"
	else
		fail "$n" "median $m ms (bound $bound ms, ${b} ms without the hostile client): $(cat "$T/median.err")"
	fi
}
baseline() { median_ms "${@:2}" >"$T/base_$1"; }
warmup() { # the first tool call loads the BPF programs (fds that stay)
	as_user $OTHER "$WARDEN" run one warm >/dev/null 2>&1
	api GET /healthz >/dev/null
	"$WARDEN" approvals ls >/dev/null 2>&1
	sleep 1
}
wait_ready() { local f; for f in "$@"; do wait_until 60 grep -q ready "$f" || return 1; done; }
jfield() { tail -1 "$1" | jq_py "d.get('$2')"; }

# ---- phase 1: default per-uid cap, short deadlines ----------------------------
cat >"$POL/daemon.yaml" <<'Y'
api: {request_timeout_s: 8, idle_timeout_s: 30, max_connections_per_uid: 64, max_connections: 1024}
Y
start_daemon || { fail daemon-conn-start "see log"; finish; }
warmup
baseline other-uid-status-fast other_status
baseline other-uid-run-fast other_run
baseline other-uid-approvals-fast other_approvals
sleep 1
idle_fds=$(fdcount)

hostile idle 2000 18 "$T/idle.out" &
p_idle=$!
hostile slowloris 200 18 "$T/slow.out" &
p_slow=$!
if wait_ready "$T/idle.out" "$T/slow.out"; then
	t_ready=$(ms_now)
	# the hostile uid holds its 64 for 8 s (request_timeout_s) from here
	out=$(as_user $HOSTILE "$WARDEN" approvals ls 2>&1)
	expect_match cli-refused-names-uid "$out" "refused: too many connections from uid $HOSTILE"
	if printf '%s' "$out" | grep -q "not running"; then fail cli-refused-not-not-running "$out"; else pass cli-refused-not-not-running; fi
	fast other-uid-status-fast other_status
	fast other-uid-run-fast other_run
	fast other-uid-approvals-fast other_approvals
	[ $(($(ms_now) - t_ready)) -lt 7000 ] || echo "  (the measurements took longer than the hostile uid's 8 s deadline)"
	sleep 1.5 # refused sockets are drained for a second at most
	held=$(fdcount)
	[ "$held" -le $((idle_fds + 64 + 10)) ] && pass fds-bounded-by-cap ||
		fail fds-bounded-by-cap "daemon holds $held fds with one uid at its cap of 64 (idle $idle_fds)"
	# the deadline (8 s) ends what the hostile uid holds while it still
	# holds it (until 18 s); the refused ones are closed within a second
	left=$((10000 - ($(ms_now) - t_ready)))
	[ $left -gt 0 ] && sleep "$(awk -v l=$left 'BEGIN{print l/1000}')"
	now=$(fdcount)
	[ "$now" -le $((idle_fds + 2)) ] && pass fds-back-to-idle ||
		fail fds-back-to-idle "$now fds 10 s after the hostile client connected, idle $idle_fds"
else
	fail hostile-ready "$(tail -3 "$T/idle.out" "$T/slow.out")"
fi
wait "$p_idle" "$p_slow"
expect_match hostile-refused-reason "$(jfield "$T/idle.out" reason)" "too many connections from uid $HOSTILE"
expect_eq hostile-idle-all-closed "$(jfield "$T/idle.out" open_at_end)" 0
expect_eq slowloris-all-closed "$(jfield "$T/slow.out" open_at_end)" 0
m=$(curl -s --unix-socket "$SOCK" http://w/metrics)
expect_match metrics-refused "$m" 'warden_api_connections_refused_total\{reason="per_uid"\} [1-9]'
expect_match metrics-timeouts "$m" 'warden_api_request_timeouts_total [1-9]'

# long streams are not idle connections: a run that outlives both
# deadlines, and an events follower
as_user $OTHER "$WARDEN" events --follow --json >"$T/ev.out" 2>&1 &
p_ev=$!
out=$(as_user $OTHER "$WARDEN" run slow "z" 2>&1)
expect_match stream-outlives-timeouts "$out" 'run_end +status=ok'
if kill -0 $p_ev 2>/dev/null; then pass events-follow-outlives-timeouts; else
	fail events-follow-outlives-timeouts "$(tail -2 "$T/ev.out")"; fi
kill $p_ev 2>/dev/null
wait $p_ev 2>/dev/null

# the CLI's messages
out=$(WARDEN_SOCKET=$T/nope.sock "$WARDEN" approvals ls 2>&1)
expect_match cli-not-running "$out" 'wardend is not running: no socket at'
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$T/stale.sock"
out=$(WARDEN_SOCKET=$T/stale.sock "$WARDEN" approvals ls 2>&1)
expect_match cli-stale-not-running "$out" 'wardend is not running: nothing listens'
kill -STOP "$WPID"
out=$(WARDEN_TIMEOUT=1 timeout 20 "$WARDEN" approvals ls 2>&1)
kill -CONT "$WPID"
expect_match cli-timed-out "$out" '^warden approvals: timed out: wardend at .* did not answer within 1 s'
# warden events goes through the same client: the same three answers
out=$(WARDEN_SOCKET=$T/nope.sock "$WARDEN" events 2>&1)
expect_match cli-events-not-running "$out" '^warden events: wardend is not running: no socket at'
kill -STOP "$WPID"
out=$(WARDEN_TIMEOUT=1 timeout 20 "$WARDEN" events --follow 2>&1)
rc=$?
kill -CONT "$WPID"
expect_match cli-events-timed-out "$rc:$out" '^1:warden events: timed out: wardend at .* did not answer within 1 s'
# a uid at its cap for a moment: its next CLI call is refused (503,
# Retry-After) and tried again until a slot is free (about 1.5 s at most)
hostile idle 64 1 "$T/brief.out" &
p_brief=$!
if wait_ready "$T/brief.out"; then
	out=$(as_user $HOSTILE "$WARDEN" approvals ls --json 2>&1)
	expect_match cli-retries-cap-refusal "$out" '^\['
else
	fail cli-retries-cap-refusal "hostile client not ready: $(tail -2 "$T/brief.out")"
fi
wait "$p_brief"
stop_daemon

# ---- phase 2: caps high enough that MHD itself holds >1,000 sockets ----------
cat >"$POL/daemon.yaml" <<'Y'
api: {request_timeout_s: 4, idle_timeout_s: 5, max_connections_per_uid: 3000, max_connections: 4000}
Y
start_daemon || { fail daemon-conn-start2 "see log"; finish; }
warmup
baseline epoll-other-uid-status-fast other_status
baseline epoll-other-uid-run-fast other_run
sleep 1
idle_fds=$(fdcount)
hostile idle 2000 10 "$T/idle2.out" &
p_idle=$!
if wait_ready "$T/idle2.out"; then
	sleep 1 # the accept loop is still taking them in
	held=$(fdcount)
	[ "$held" -ge $((idle_fds + 1900)) ] && pass held-past-fd-setsize ||
		fail held-past-fd-setsize "daemon holds $held fds (idle $idle_fds)"
	fast epoll-other-uid-status-fast other_status
	fast epoll-other-uid-run-fast other_run
	out=$(python3 "$CC" burst "$SOCK" 500)
	expect_eq burst-500-answered "$(printf '%s' "$out" | jq_py 'd["answered"]')" 500
	sleep 6
	now=$(fdcount)
	[ "$now" -le $((idle_fds + 2)) ] && pass epoll-fds-back-to-idle ||
		fail epoll-fds-back-to-idle "$now fds, idle $idle_fds"
else
	fail hostile2-ready "$(tail -3 "$T/idle2.out")"
fi
wait "$p_idle"
stop_daemon

# ---- phase 3: the TCP listener (--metrics: /healthz, /metrics) ---------------
# one address (127.0.0.1) holds 100 idle and 50 slowloris connections; a
# probe from another loopback source address (127.0.0.2) is answered at once, the
# holder's surplus is refused with its address named, and the request
# deadline closes what it holds
cat >"$POL/daemon.yaml" <<'Y'
api: {request_timeout_s: 3, idle_timeout_s: 30}
Y
MPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_daemon --metrics "127.0.0.1:$MPORT" || { fail daemon-conn-start3 "see log"; finish; }
cat >"$T/tcphold.py" <<'P'
import socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks, refused = [], ""
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.05)
    socks.append(s)
    if i % 3 == 0:
        s.send(b"GET /healthz HTTP/1.1\r\n")  # slowloris: never ends
print("ready", flush=True)
t0, closed = time.monotonic(), set()
while time.monotonic() - t0 < hold:
    for k, s in enumerate(socks):
        if k in closed:
            continue
        try:
            d = s.recv(4096)
            if not d:
                closed.add(k)
            elif b" 503 " in d and not refused:
                refused = d.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip()
        except socket.timeout:
            if k % 3 == 0:
                try:
                    s.send(b"X")
                except OSError:
                    closed.add(k)
        except OSError:
            closed.add(k)
    time.sleep(0.2)
print("closed %d of %d refused %s" % (len(closed), n, refused), flush=True)
P
python3 "$T/tcphold.py" "$MPORT" 150 6 >"$T/tcphold.out" 2>&1 &
p_tcp=$!
if wait_ready "$T/tcphold.out"; then
	t0=$(ms_now)
	out=$(curl -s -m 5 --interface 127.0.0.2 -w ' %{http_code}' "http://127.0.0.1:$MPORT/healthz")
	dt=$(($(ms_now) - t0))
	expect_match tcp-probe-answered "$out" ' 200$'
	[ "$dt" -le 500 ] && pass tcp-probe-fast || fail tcp-probe-fast "/healthz from 127.0.0.2 took $dt ms"
fi
wait "$p_tcp"
out=$(cat "$T/tcphold.out")
expect_match tcp-surplus-refused "$out" 'refused .*too many connections from 127.0.0.1 \(limit 16 per address\)'
expect_match tcp-held-closed-by-deadline "$out" '^closed 150 of 150'
expect_match tcp-probe-after "$(curl -s -m 5 -w ' %{http_code}' "http://127.0.0.1:$MPORT/healthz")" ' 200$'
stop_daemon
rm -f "$POL/daemon.yaml"

# ---- /healthz while the trace store cannot write -------------------------
# state on a small tmpfs of the test's own (unmounted at the end)
SMALL=$T/small
mkdir -p "$SMALL"
if mount -t tmpfs -o size=3m warden-conn-test "$SMALL"; then
	trap 'umount "$SMALL" 2>/dev/null; cleanup_all' EXIT
	rm -f "$POL/daemon.yaml"
	FAKE_KEY=test-key "$WARDEND" --state "$SMALL/state" --policy "$POL" --socket "$SOCK" \
		--workers 2 >>"$T/wardend.log" 2>&1 &
	WPID=$!
	wait_until 20 curl -sf --unix-socket "$SOCK" http://w/healthz
	expect_match healthz-ok-before "$(api GET /healthz)" '^200 .*"ok"'
	dd if=/dev/zero of="$SMALL/fill" bs=64k 2>/dev/null
	for i in 1 2 3 4 5; do as_user $OTHER "$WARDEN" run one "fill $i" >/dev/null 2>&1; done
	h=$(api GET /healthz)
	expect_match healthz-503-store-full "$h" '^503 .*trace store cannot write: No space left on device'
	expect_match metrics-trace-gauge "$(curl -s --unix-socket "$SOCK" http://w/metrics)" 'warden_trace_healthy 0'
	stop_daemon
	umount "$SMALL"
else
	skip healthz-503-store-full "cannot mount a tmpfs here"
fi
finish
