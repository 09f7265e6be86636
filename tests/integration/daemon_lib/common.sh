# Shared by tests/integration/daemon*.sh and agent*.sh: a test policy (tools,
# agents, users, gateway with the script provider and the loopback fake
# model server), starting/stopping a real wardend, and JSON helpers.
# Source after tests/lib.sh.
WARDEND=${WARDEND:-$PWD/$BUILD/wardend}
ROOT_DIR=$PWD
T=$(mktemp -d "${WARDEN_TEST_TMP:-/tmp}/warden-it.XXXXXX")
chmod 711 "$T"
POL=$T/policy
SOCK=$T/wardend.sock
export WARDEN_SOCKET=$SOCK
WPID=
FAKE_PID=
FAKE_PORT=
SLOW_MARK=29.$$1 # a unique sleep duration: finds the test's own slow tool

cleanup_all() {
	[ -n "$WPID" ] && kill -KILL "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
	[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
	kill_slow_tools
	remove_spares # the killed wardend's spare v1 leaves
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup_all EXIT

# Processes of the test's own slow tool (matched by its unique argv), by pid.
kill_slow_tools() {
	local p
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "sleep $SLOW_MARK"; then
			kill -KILL "${p#/proc/}" 2>/dev/null
		fi
	done 2>/dev/null
}

jq_py() { # EXPR: evaluate a python expression over `d` (stdin JSON)
	python3 -c "import json,sys
d=json.load(sys.stdin)
r=$1
print(r if not isinstance(r,(dict,list)) else json.dumps(r, separators=(',', ':')))"
}

# records of a run from the trace store (read-only, works while wardend runs)
run_records() { "$WARDEN" trace show --json --state "$T/state" "$1" 2>/dev/null; }
# first record of TYPE (JSON) or ""
rec_of() { run_records "$1" | python3 -c "import json,sys
for r in json.load(sys.stdin):
    if r.get('type')=='$2':
        print(json.dumps(r, separators=(',', ':'))); break"; }
recs_of() { run_records "$1" | python3 -c "import json,sys
print(json.dumps([r for r in json.load(sys.stdin) if r.get('type')=='$2'], separators=(',', ':')))"; }

as_user() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --clear-groups --no-new-privs "$@"; }

start_fake() {
	python3 "$ROOT_DIR/tests/fakemodel/fakemodel.py" --port 0 --port-file "$T/fake.port" \
		--key test-key >"$T/fake.log" 2>&1 &
	FAKE_PID=$!
	for _ in $(seq 100); do [ -s "$T/fake.port" ] && break; sleep 0.05; done
	FAKE_PORT=$(cat "$T/fake.port")
}
fake_ctl() { curl -sS -X POST -H 'Content-Type: application/json' \
	--data "$1" "http://127.0.0.1:$FAKE_PORT/_control" >/dev/null; }

start_daemon() { # extra wardend args...
	rm -f "$SOCK"
	FAKE_KEY=test-key "$WARDEND" --state "$T/state" --policy "$POL" --socket "$SOCK" \
		--workers 4 "$@" >>"$T/wardend.log" 2>&1 &
	WPID=$!
	for _ in $(seq 200); do
		[ -S "$SOCK" ] && curl -s --unix-socket "$SOCK" http://w/healthz >/dev/null 2>&1 && return 0
		kill -0 "$WPID" 2>/dev/null || break
		sleep 0.05
	done
	echo "wardend did not start:"; tail -20 "$T/wardend.log"
	return 1
}
stop_daemon() {
	[ -n "$WPID" ] || return 0
	kill -TERM "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	WPID=
}
kill9_daemon() {
	kill -KILL "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	WPID=
}

# api METHOD PATH [BODY] -> prints "STATUS BODY"
api() {
	local out
	out=$(curl -s --unix-socket "$SOCK" -X "$1" -H 'Content-Type: application/json' \
		${3:+--data "$3"} -w '\n%{http_code}' "http://w$2")
	printf '%s %s\n' "$(printf '%s' "$out" | tail -1)" "$(printf '%s' "$out" | sed '$d')"
}

# wait_until SECONDS CMD...: poll until CMD succeeds
wait_until() {
	local t=$1; shift
	local end=$(($(date +%s%N) + t * 1000000000))
	while [ "$(date +%s%N)" -lt $end ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

run_state() { "$WARDEN" run --help >/dev/null; api GET "/v1/runs/$1" | cut -d' ' -f2- | jq_py "d.get('$2')"; }
run_done() { [ "$(run_state "$1" state)" = done ]; }
approvals_count() { "$WARDEN" approvals ls --json | jq_py 'len(d)'; }
first_approval() { "$WARDEN" approvals ls --json | jq_py 'd[0]["id"] if d else ""'; }

LIBS='["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"]'

# tool NAME EXEC_JSON EXTRA_YAML...: a tier-1 tool
tool() {
	local name=$1 exec=$2 bin
	shift 2
	bin=$(printf '%s' "$exec" | python3 -c 'import json,sys; print(json.dumps([json.load(sys.stdin)[0]]))')
	{
		echo "name: $name"
		echo "description: test tool $name"
		echo "tier: 1"
		echo "exec: $exec"
		echo "timeout_ms: 20000"
		echo "network: {allow: []}"
		echo "filesystem: {read: $LIBS, write: [], exec: $bin}"
		local x
		for x in "$@"; do echo "$x"; done
	} >"$POL/tools/$name.yaml"
}

# agent NAME MODEL TOOLS_JSON [bounds...] [context_budget]
agent() {
	local name=$1 model=$2 tools=$3 steps=${4:-10} tokens=${5:-1000000} wall=${6:-60} cost=${7:-10} ctx=${8:-32000}
	cat >"$POL/agents/$name.yaml" <<Y
name: $name
team: team-$name
model: $model
system_prompt: "You are a test agent."
tools: $tools
bounds: {max_steps: $steps, token_budget: $tokens, wall_clock_s: $wall, cost_cap_usd: $cost}
context: {budget_tokens: $ctx, strategy: sliding_window}
trace: {payloads: full, retention_days: 1}
Y
}

# script NAME: the rules on stdin; adds an alias NAME to the gateway
script() {
	cat >"$POL/models/$1.script"
	echo "  $1: [{provider: script, model: models/$1.script}]" >>"$POL/aliases.part"
}

write_gateway() {
	{
		cat <<Y
providers:
  script: {kind: script}
  fa: {kind: openai, base_url: "http://127.0.0.1:${FAKE_PORT:-1}/a", api_key_env: FAKE_KEY, timeout_ms: 5000}
  fb: {kind: anthropic, base_url: "http://127.0.0.1:${FAKE_PORT:-1}/b", api_key_env: FAKE_KEY, timeout_ms: 5000}
retries: {max_attempts: 2, backoff_base_ms: 10, backoff_max_ms: 50, retry_after_max_ms: 1000}
prices:
  script: {input: 3.0, output: 15.0}
  m1: {input: 1.0, output: 2.0}
  m2: {input: 1.0, output: 2.0}
models:
  failover: [{provider: fa, model: m1}, {provider: fb, model: m2}]
Y
		cat "$POL/aliases.part" 2>/dev/null
	} >"$POL/gateway.yaml"
}

base_policy() {
	mkdir -p "$POL/tools" "$POL/agents" "$POL/models" "$T/state"
	: >"$POL/aliases.part"
	cat >"$POL/users.yaml" <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng]}
  bob:   {uid: 1001, groups: [eng]}
  carol: {uid: 1002, groups: [readers]}
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
  readers: {scopes: ["docs:read"]}
approvers:
  users: [bob]
  groups: []
Y
	tool echo '["/usr/bin/cat"]' "input: stdin" \
		"args_schema: {type: object, required: [n], additionalProperties: false, properties: {n: {type: string}}}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:echo\"]}" "side_effects: none"
}

# team_users [APPROVERS [USER_LINE]]: users.yaml for the trace's read rule
# (after base_policy): alice runs, bob is in her agents' team group
# team-one, carol in another team's, dave an auditor; APPROVERS (default
# "bob") the approvers' names, USER_LINE one more user
team_users() {
	{
		cat <<'Y'
users:
  root:  {uid: 0, groups: [admin]}
  alice: {uid: 1000, groups: [eng]}
  bob:   {uid: 1001, groups: [eng, team-one]}
  carol: {uid: 1002, groups: [eng, team-other]}
  dave:  {uid: 1003, groups: [auditors]}
Y
		[ -z "${2:-}" ] || printf '  %s\n' "$2"
		cat <<Y
groups:
  admin: {scopes: ["*"]}
  eng: {scopes: ["test:*"]}
  team-one: {scopes: []}
  team-other: {scopes: []}
  auditors: {scopes: []}
approvers:
  users: [${1-bob}]
  groups: []
Y
	} >"$POL/users.yaml"
}

# two_listeners: TCP listeners on two free loopback ports, in $A and $B;
# each accept appends its tag (A or B) to $T/hits and answers "pong".
# LPID: their process (kill it at the end).
two_listeners() {
	read -r A B < <(python3 -c '
import socket
ps = [socket.socket() for _ in range(2)]
for s in ps: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ps])')
	python3 - "$T" "$A" "$B" <<'PY' &
import socket, sys, threading
d, A, B = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tcp(port, tag):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(16)
    def loop():
        while True:
            c, _ = s.accept(); open(d + "/hits", "a").write(tag + "\n"); c.sendall(b"pong"); c.close()
    threading.Thread(target=loop, daemon=True).start()
tcp(A, "A"); tcp(B, "B")
open(d + "/listen.ready", "w").write("ok")
threading.Event().wait()
PY
	LPID=$!
	for _ in $(seq 100); do [ -f "$T/listen.ready" ] && break; sleep 0.05; done
}
