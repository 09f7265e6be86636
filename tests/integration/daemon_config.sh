#!/usr/bin/env bash
# policy/daemon.yaml, end to end on a real wardend: a bad key or a bad regex
# stops wardend at start with file:line:col; a configured redaction pattern
# keeps the secret out of every segment and blob of the store; a configured
# OTLP endpoint (a loopback collector started here) receives GenAI spans of
# a real run; the warm pool's counters are in /metrics and the status API
# and move (pool size 1: a miss, then a hit); --warm-pool overrides the
# file; a reload checks the file (a bad one fails it) and names the settings
# that need a restart.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-config "needs root"; finish; }

COLL_PID=
cleanup_cfg() {
	[ -n "$COLL_PID" ] && kill "$COLL_PID" 2>/dev/null && wait "$COLL_PID" 2>/dev/null
	cleanup_all
}
trap cleanup_cfg EXIT

base_policy
# the shipped run_python manifest (tier 3), granted to the test's users
sed 's/scopes: \["code:run"\]/scopes: ["test:code"]/' policy/tools/run_python.yaml \
	>"$POL/tools/run_python.yaml"
script py <<'S'
{"step": 0, "tool_calls": [{"name": "run_python", "arguments": {"code": "print('password=' + 'hunter' + '2xyz', 'canary=' + 'visible' + '42')\n"}}]}
{"text": "final: {{result.stdout}}"}
S
agent py py '[run_python]'
write_gateway

# -- wardend refuses a bad daemon.yaml, naming file:line:col -----------------
# refuses DIR NAME REGEX: wardend on policy DIR must exit 1 and say REGEX
refuses() {
	local out rc
	out=$(timeout 30 "$WARDEND" --state "$T/state-bad" --policy "$1" \
		--socket "$T/bad.sock" 2>&1)
	rc=$?
	expect_eq "$2-exit" "$rc" 1
	expect_match "$2-diag" "$out" "$3"
	[ -S "$T/bad.sock" ] && fail "$2-no-socket" "the socket exists" || pass "$2-no-socket"
}
mkdir -p "$T/bad"
cp -r "$POL"/* "$T/bad/"
printf 'warm_pool:\n  size: 1\n  idle_sec: 30\n' >"$T/bad/daemon.yaml"
refuses "$T/bad" bad-key "$T/bad/daemon.yaml:3:3: unknown key 'idle_sec' in 'warm_pool' \(did you mean 'idle_s'\?\)"
printf 'trace:\n  redact:\n    - "password=[a-z]+"\n    - "(?i)token=[a-z0-9]+"\n' >"$T/bad/daemon.yaml"
refuses "$T/bad" bad-regex "$T/bad/daemon.yaml:4:7: 'trace.redact': '\(\?i\)token=\[a-z0-9\]\+' is not a POSIX extended regex"
printf 'trace: {otlp: {endpoint: "http://127.0.0.1:1", queue: 0}}\n' >"$T/bad/daemon.yaml"
refuses "$T/bad" bad-queue "$T/bad/daemon.yaml:1:55: 'trace.otlp.queue': 0 is out of range"
"$WARDEN" policy check "$T/bad/daemon.yaml" >/dev/null 2>"$T/check.err"
expect_match policy-check-bad "$(cat "$T/check.err")" "^$T/bad/daemon.yaml:1:55: 'trace.otlp.queue'"
# a uid range holding the node's accounts (regular users' 1000-1999): a
# tool would run as one of them; the conflict is named
want="(uid [0-9]+ is the account '[^']+'|gid [0-9]+ is the group '[^']+'|holds uids up to 60000)"
acct=$(getent passwd | awk -F: '$3 >= 1000 && $3 <= 1999 { print "uid " $3 " is the account \x27" $1 "\x27"; exit }')
[ -n "$acct" ] && want=$acct
printf 'uids:\n  range: 1000-1999\n' >"$T/bad/daemon.yaml"
refuses "$T/bad" uid-range-accounts "$T/bad/daemon.yaml:2:10: 'uids.range': uid range '1000-1999': $want"

# -- a loopback OTLP/HTTP collector ------------------------------------------
cat >"$T/collector.py" <<'PY'
import http.server, json, sys
out, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path,
                                "type": self.headers.get("Content-Type"),
                                "body": json.loads(body)}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portfile, "w").write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$T/collector.py" "$T/otlp.jsonl" "$T/otlp.port" >"$T/collector.log" 2>&1 &
COLL_PID=$!
for _ in $(seq 100); do [ -s "$T/otlp.port" ] && break; sleep 0.05; done
OPORT=$(cat "$T/otlp.port" 2>/dev/null)
[ -n "$OPORT" ] || { fail collector-start "$(cat "$T/collector.log")"; finish; }

cat >"$POL/daemon.yaml" <<Y
warm_pool: {size: 1, per_tenant: 4, idle_s: 300, key_idle_s: 600, max_keys: 8}
trace:
  otlp: {endpoint: "http://127.0.0.1:$OPORT/v1/traces", queue: 64, timeout_ms: 2000}
  redact: ["password=[a-z0-9]+", "[Tt][Oo][Kk][Ee][Nn]=[A-Z0-9]+"]
Y
check policy-check-ok "$WARDEN" policy check "$POL"

start_daemon || { fail daemon-start "see log"; finish; }
expect_match log-config "$(cat "$T/wardend.log")" "daemon config $POL/daemon.yaml: warm pool 1 \(per tenant 4, idle 300 s, 8 keys max\), otlp http://127.0.0.1:$OPORT/v1/traces, 2 extra redaction patterns"

metric() { api GET /metrics | sed -n "s/^$1 //p"; }
expect_match metrics-pool-present "$(api GET /metrics)" $'warden_pool_hits_total 0\n.*warden_pool_misses_total 0'
expect_match status-pool "$(api GET /v1/status)" '^200 .*"warm_pool": ?\{[^}]*"hits": ?0'

have_runsc=1
command -v runsc >/dev/null || have_runsc=

# -- run 1: a tier-3 call on an empty pool is a miss --------------------------
out1=$(as_user 1000 "$WARDEN" run --json py "first TOKEN=SECRETTOKEN77" 2>&1)
RUN1=$(printf '%s\n' "$out1" | grep -o 'run_[0-9a-f]\{16\}' | head -1)
if [ -z "$have_runsc" ]; then
	skip pool-counters "runsc not installed (Debian package runsc): no tier-3 call can run"
else
	expect_match run1-ok "$out1" 'final: \[REDACTED\] canary=visible42'
	expect_eq pool-first-miss "$(metric warden_pool_misses_total):$(metric warden_pool_hits_total)" "1:0"
	# the pool refills in the background: one ready sandbox for the shape
	# (read anew on every try: `test "$(metric ...)"` would be expanded
	# once, before wait_until, and fail whenever the refill came later)
	pool_ready() { [ "$(metric warden_pool_ready)" = 1 ]; }
	if wait_until 60 pool_ready; then
		pass pool-refilled
	else
		fail pool-refilled "ready=$(metric warden_pool_ready) spawned=$(metric warden_pool_spawned_total) failures=$(metric warden_pool_spawn_failures_total)"
	fi
	out2=$(as_user 1000 "$WARDEN" run py "second" 2>&1)
	expect_match run2-ok "$out2" 'final: \[REDACTED\] canary=visible42'
	expect_eq pool-then-hit "$(metric warden_pool_misses_total):$(metric warden_pool_hits_total)" "1:1"
	expect_match status-pool-moved "$(api GET /v1/status)" '"warm_pool": ?\{[^}]*"hits": ?1'
fi

# -- redaction: the secrets are nowhere in the store (segments, blobs) --------
# find_in_store WORD: how many files under state/ hold WORD, raw or inflated
find_in_store() {
	python3 - "$T/state" "$1" <<'PY'
import os, sys, zlib
root, word = sys.argv[1], sys.argv[2].encode()
n = 0
for d, _, files in os.walk(root):
    for f in files:
        b = open(os.path.join(d, f), "rb").read()
        try:
            b += zlib.decompress(b)
        except Exception:
            pass
        n += word in b
print(n)
PY
}
wait_until 10 run_done "$RUN1"
"$WARDEN" trace show --json --state "$T/state" "$RUN1" >"$T/run1.json" 2>/dev/null
nblobs=$(find "$T/state/trace/blobs" -type f | wc -l)
[ "$nblobs" -gt 0 ] && pass store-has-blobs || fail store-has-blobs "no blob under $T/state/trace/blobs"
# the control: text no pattern covers is found (the search really looks
# inside segments and inflated blobs)
[ "$(find_in_store visible42)" -ge 2 ] && pass redact-control-found ||
	fail redact-control-found "canary in $(find_in_store visible42) files"
expect_eq redact-config-password "$(find_in_store hunter2xyz)" 0
expect_eq redact-config-token "$(find_in_store SECRETTOKEN77)" 0
expect_match redact-marker "$(cat "$T/run1.json")" '"first \[REDACTED\]"'

# -- OTLP: the collector got the run's GenAI spans ---------------------------
otlp_has() { # OPERATION: a span with gen_ai.operation.name == OPERATION
	python3 - "$T/otlp.jsonl" "$1" "$RUN1" <<'PY'
import json, sys
path, op, run = sys.argv[1:4]
def attrs(s):
    return {a["key"]: list(a["value"].values())[0] for a in s.get("attributes", [])}
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    sys.exit(1)
for l in lines:
    r = json.loads(l)
    for rs in r["body"]["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                a = attrs(s)
                if a.get("gen_ai.operation.name") == op and run in json.dumps(s):
                    sys.exit(0)
sys.exit(1)
PY
}
if wait_until 15 otlp_has chat; then pass otlp-chat-span; else fail otlp-chat-span "$(head -c 400 "$T/otlp.jsonl" 2>/dev/null)"; fi
if [ -n "$have_runsc" ]; then
	if wait_until 15 otlp_has execute_tool; then pass otlp-tool-span; else fail otlp-tool-span "no execute_tool span"; fi
fi
otlp_req=$(head -1 "$T/otlp.jsonl" 2>/dev/null)
expect_match otlp-path-type "$otlp_req" '^\{"path": "/v1/traces", "type": "application/json"'
expect_match otlp-model-attr "$(cat "$T/otlp.jsonl")" '"gen_ai.request.model"'
expect_eq otlp-no-secret "$(grep -c -e hunter2xyz -e SECRETTOKEN77 "$T/otlp.jsonl")" 0
sent=$(metric warden_otlp_spans_sent_total)
if [ -n "$sent" ] && [ "$sent" -ge 1 ]; then pass otlp-metrics-sent; else fail otlp-metrics-sent "warden_otlp_spans_sent_total '$sent'"; fi
expect_eq otlp-metrics-dropped "$(metric warden_otlp_spans_dropped_total)" 0

# -- reload: a bad daemon.yaml fails it; a changed one names the restart -----
cp "$POL/daemon.yaml" "$T/daemon.good"
printf 'warm_pool: {size: 2, per_tenat: 1}\n' >"$POL/daemon.yaml"
expect_match reload-bad-422 "$(api POST /v1/policy/reload)" "^422 .*daemon.yaml:1:22: unknown key 'per_tenat'"
kill -0 "$WPID" 2>/dev/null && pass reload-bad-daemon-alive || fail reload-bad-daemon-alive "wardend died"
sed 's/size: 1/size: 2/' "$T/daemon.good" >"$POL/daemon.yaml"
kill -HUP "$WPID"
if wait_until 10 grep -q "daemon.yaml: warm_pool.size changed; restart wardend to apply" "$T/wardend.log"; then
	pass reload-names-restart
else
	fail reload-names-restart "$(tail -3 "$T/wardend.log")"
fi
stop_daemon

# -- flags override the file: --warm-pool 0 turns the pool off ---------------
cp "$T/daemon.good" "$POL/daemon.yaml"
start_daemon --warm-pool 0 || { fail daemon-start-flag "see log"; finish; }
expect_match flag-overrides-pool "$(api GET /v1/status)" '"warm_pool": ?null'
if api GET /metrics | grep -q '^warden_pool_'; then
	fail flag-no-pool-metrics "pool metrics without a pool"
else
	pass flag-no-pool-metrics
fi
stop_daemon
finish
