# Shared by tests/integration/fleet_*.sh (and tests/bench/bench_fleet.sh):
# a real PostgreSQL from Debian's packages (initdb in the test's dir, run as
# `nobody`: postgres refuses root; unix socket only, no TCP), and wardend
# nodes on this machine, each with its own state dir, runtime dir, socket
# and log. Source after tests/lib.sh and daemon_lib/common.sh.
# the newest server Debian's postgresql package installed (15 on bookworm,
# 17 on trixie); PGBIN=DIR to choose
if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
PGDATA_T=$T/pg
PGSOCK=$T/pgsock
PGPORT=$((40000 + RANDOM % 20000))
FLEET_URL="host=$PGSOCK port=$PGPORT user=warden dbname=postgres"
PG_UP=
NODES=()

as_nobody() { setpriv --reuid nobody --regid nogroup --clear-groups "$@"; }

start_pg() {
	[ -x "$PGBIN/postgres" ] || { echo "no $PGBIN/postgres (scripts/deps.sh installs postgresql)"; return 1; }
	mkdir -p "$PGDATA_T" "$PGSOCK" "$T/pglog"
	chown nobody:nogroup "$PGDATA_T" "$PGSOCK" "$T/pglog"
	chmod 700 "$PGDATA_T"
	chmod 755 "$PGSOCK"
	(cd / && as_nobody "$PGBIN/initdb" -D "$PGDATA_T" -U warden -A trust --no-sync >"$T/initdb.log" 2>&1) ||
		{ cat "$T/initdb.log"; return 1; }
	pg_up_again
}
# (again) after stop_pg: the same cluster
pg_up_again() {
	(cd / && as_nobody "$PGBIN/pg_ctl" -D "$PGDATA_T" -l "$T/pglog/pg.log" -w -t 30 \
		-o "-k $PGSOCK -p $PGPORT -c listen_addresses='' -c fsync=off -c max_connections=200 ${PG_OPTS:-}" start >/dev/null) ||
		{ tail -20 "$T/pglog/pg.log"; return 1; }
	PG_UP=1
}
stop_pg() {
	[ -n "$PG_UP" ] || return 0
	(cd / && as_nobody "$PGBIN/pg_ctl" -D "$PGDATA_T" -m immediate -w stop >/dev/null 2>&1)
	PG_UP=
}
# psql_q SQL: one statement, unaligned, tuples only
psql_q() { psql -X -At -q -h "$PGSOCK" -p "$PGPORT" -U warden -d postgres -v ON_ERROR_STOP=1 -c "$1"; }

# mail_tool: tool `mail` (side_effects: external) appends its stdin -- the
# call's arguments -- to $W, a HOST file outside the sandbox this script
# reads: a witness of each side effect
mail_tool() {
	mkdir -p "$T/witness"
	chmod 777 "$T/witness"
	W=$T/witness/sent.log
	: >"$W"
	chmod 666 "$W" # every call has a uid of its own: each appends
	tool mail "[\"/usr/bin/tee\", \"-a\", \"$W\"]" "input: stdin" \
		"args_schema: {type: object, required: [to], properties: {to: {type: string}}}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:mail\"]}" "side_effects: external"
	sed -i "s|write: \[\]|write: [\"$T/witness\"]|" "$POL/tools/mail.yaml"
}

# gate_agent: agent `gate` (team-gate), placed on the nodes labelled
# zone=a, whose first step calls `gated`, a tool that waits for an approval
gate_agent() {
	tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
		"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
	script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"to": "x@example.com"}}]}
{"text": "after approval: {{result}}"}
S
	agent gate gate '[gated]'
	printf 'placement: {zone: "a"}\n' >>"$POL/agents/gate.yaml"
}

# launch_node NAME CAPACITY [wardend args...]: $T/NAME/{state,run},
# $T/NAME.sock; wait_node NAME: until it answers. start_node: both.
launch_node() {
	local n=$1 cap=$2 pid
	shift 2
	mkdir -p "$T/$n/state"
	mkdir -p -m 711 "$T/$n/run"
	rm -f "$T/$n.sock"
	# capacity "-": the fleet's settings from NODE_POL's daemon.yaml
	local fl=(--fleet "$FLEET_URL" --fleet-capacity "$cap" --fleet-lease-ms "${LEASE_MS:-3000}")
	[ "$cap" = - ] && fl=()
	WARDEN_RUNTIME_DIR=$T/$n/run FAKE_KEY=test-key "$WARDEND" --state "$T/$n/state" \
		--policy "${NODE_POL:-$POL}" --socket "$T/$n.sock" --workers 4 "${fl[@]}" "$@" >>"$T/$n.log" 2>&1 &
	pid=$!
	eval "PID_$n=$pid"
	NODES+=("$pid")
}
wait_node() {
	local n=$1 pid
	pid=$(node_pid "$n")
	for _ in $(seq 200); do
		[ -S "$T/$n.sock" ] && curl -s --unix-socket "$T/$n.sock" http://w/healthz >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "node $n did not start:"; tail -20 "$T/$n.log"
	return 1
}
start_node() { launch_node "$@" && wait_node "$1"; }
node_pid() { eval "echo \${PID_$1:-}"; }
stop_node() { # NAME: SIGTERM, wait
	local p
	p=$(node_pid "$1")
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	# not always this shell's child (started in a background subshell)
	while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	wait "$p" 2>/dev/null
	eval "PID_$1="
}
kill9_node() {
	local p
	p=$(node_pid "$1")
	# (the shell's "Killed" job notice goes to this block's stderr)
	{
		kill -KILL "$p"
		while kill -0 "$p"; do sleep 0.02; done
		wait "$p"
	} 2>/dev/null
	eval "PID_$1="
}
node_api() { # NAME METHOD PATH [BODY]
	local out n=$1
	shift
	out=$(curl -s --unix-socket "$T/$n.sock" -X "$1" -H 'Content-Type: application/json' \
		${3:+--data "$3"} -w '\n%{http_code}' "http://w$2")
	printf '%s %s\n' "$(printf '%s' "$out" | tail -1)" "$(printf '%s' "$out" | sed '$d')"
}
# node_id NAME: its fleet id (STATE/fleet-node-id)
node_id() { cat "$T/$1/state/fleet-node-id"; }

fleet_cleanup() {
	local p
	for p in "${NODES[@]}" $WPID; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
	kill_slow_tools
	remove_calls "$T"/*/run
	stop_pg
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap fleet_cleanup EXIT
