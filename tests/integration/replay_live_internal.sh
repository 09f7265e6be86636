#!/usr/bin/env bash
# Live internal tools in a replay (--live-internal + a manifest's
# replay.environment), end to end with a real wardend and sandbox: the
# live call's effect is a line in a HOST file read by this script — it
# lands in the replay environment's directory, never in production's; a
# tool that ignores its environment and writes to production is stopped by
# the sandbox (the environment REPLACES filesystem.write); without the
# flag, or without the field, internal stays recorded / refused; an
# external tool stays never-live even when a patched manifest relabels it
# internal and gives it a replay environment. The same for network: the
# environment's allow list replaces production's (two loopback listeners
# are the witnesses). `policy check` names bad
# replay environments at file:line:col.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip replay-live-internal "needs root"; finish; }

export WARDEN_RUNTIME_DIR=$T/run
mkdir -p -m 711 "$WARDEN_RUNTIME_DIR"
base_policy
mkdir -p "$T/prod" "$T/staging" "$T/witness" "$T/bin"
chmod 777 "$T/prod" "$T/staging" "$T/witness"
chmod 755 "$T/bin"
PROD=$T/prod STAGE=$T/staging W=$T/witness/sent.log
# two loopback listeners outside the sandbox, each logging its accepts:
# production's service and the replay environment's staging one
LPIDS=()
listen() { # NAME
	python3 - "$T/$1.port" "$T/$1.hits" <<'PY' &
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, a = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("hit\n")
    c.close()
PY
	LPIDS+=($!)
	for _ in $(seq 50); do [ -s "$T/$1.port" ] && break; sleep 0.1; done
}
trap 'for p in "${LPIDS[@]}"; do kill "$p" 2>/dev/null; done; cleanup_all' EXIT
listen prodsvc
listen stagesvc
PPORT=$(cat "$T/prodsvc.port") SPORT=$(cat "$T/stagesvc.port")
[ -n "$PPORT" ] && [ -n "$SPORT" ] || { fail listeners "did not start"; finish; }
# ledger writes where LEDGER_DIR says (production by default)
printf '#!/bin/sh\n{ cat; echo; } >>"${LEDGER_DIR:-%s}/ledger.log"\n' "$PROD" >"$T/bin/ledger.sh"
# ledger2 ignores any environment: always production
printf '#!/bin/sh\n{ cat; echo; } >>"%s/ledger2.log"\n' "$PROD" >"$T/bin/ledger2.sh"
# mail's effect: a line in the witness (or where MAIL_OUT says)
printf '#!/bin/sh\n{ cat; echo; } >>"${MAIL_OUT:-%s}"\n' "$W" >"$T/bin/mail.sh"
# ping connects where PING_PORT says (production's service by default);
# ping2 always to production's
printf '#!/usr/bin/bash\ncat >/dev/null; exec 3<>/dev/tcp/127.0.0.1/${PING_PORT:-%s} && echo connected\n' "$PPORT" >"$T/bin/ping.sh"
printf '#!/usr/bin/bash\ncat >/dev/null; exec 3<>/dev/tcp/127.0.0.1/%s && echo connected\n' "$PPORT" >"$T/bin/ping2.sh"
chmod 755 "$T/bin/"*.sh
shtool() { # NAME SCRIPT WRITE_DIR SIDE_EFFECTS [EXTRA_YAML...]
	local name=$1 sc=$2 wr=$3 se=$4
	shift 4
	{
		echo "name: $name"
		echo "tier: 1"
		echo "exec: [\"/usr/bin/sh\", \"$T/bin/$sc\"]"
		echo "input: stdin"
		echo "timeout_ms: 20000"
		echo "args_schema: {type: object}"
		echo "auth: {mode: on_behalf_of_user, scopes: [\"test:$name\"]}"
		echo "network: {allow: []}"
		echo "filesystem: {read: [\"/usr/lib\", \"/usr/lib64\", \"/etc/ld.so.cache\", \"$T/bin\"], write: [\"$wr\"], exec: [\"/usr/bin\"]}"
		echo "side_effects: $se"
		local x
		for x in "$@"; do echo "$x"; done
	}
}
ENV_YAML="replay: {environment: {filesystem: {write: [\"$STAGE\"]}, env: {LEDGER_DIR: \"$STAGE\"}}}"
shtool ledger ledger.sh "$PROD" internal "$ENV_YAML" >"$POL/tools/ledger.yaml"
shtool ledger2 ledger2.sh "$PROD" internal "$ENV_YAML" >"$POL/tools/ledger2.yaml"
shtool note ledger.sh "$PROD/note" internal >"$POL/tools/note.yaml"
mkdir -p "$PROD/note" && chmod 777 "$PROD/note"
shtool mail mail.sh "$T/witness" external >"$POL/tools/mail.yaml"
NET_ENV="replay: {environment: {network: {allow: [\"127.0.0.1:$SPORT\"]}, env: {PING_PORT: \"$SPORT\"}}}"
for p in ping ping2; do
	shtool $p $p.sh "$T/witness" internal "$NET_ENV" |
		sed -e "s|\"/usr/bin/sh\"|\"/usr/bin/bash\"|" \
			-e "s|network: {allow: \[\]}|network: {allow: [\"127.0.0.1:$PPORT\"]}|" >"$POL/tools/$p.yaml"
done
script rp <<'S'
{"step": 0, "tool_calls": [{"name": "ledger", "arguments": {"entry": "a"}}]}
{"step": 1, "tool_calls": [{"name": "ledger2", "arguments": {"entry": "b"}}]}
{"step": 2, "tool_calls": [{"name": "note", "arguments": {"k": "1"}}]}
{"step": 3, "tool_calls": [{"name": "mail", "arguments": {"to": "x@example.com"}}]}
{"step": 4, "tool_calls": [{"name": "ping", "arguments": {}}]}
{"step": 5, "tool_calls": [{"name": "ping2", "arguments": {}}]}
{"text": "done: {{result}}"}
S
agent rp rp '[ledger, ledger2, note, mail, ping, ping2]'
write_gateway

# --- policy check: the field is validated with file:line:col
mkdir -p "$T/bad"
shtool bad1 mail.sh "$T/witness" external \
	"replay: {environment: {filesystem: {write: [\"$STAGE\"]}}}" >"$T/bad/ext.yaml"
shtool bad2 ledger.sh "$PROD" internal \
	"replay: {environment: {filesystem: {write: [\"$PROD/sub\"]}, env: {PATH: /x}, nope: 1}}" >"$T/bad/int.yaml"
shtool bad3 ledger.sh "$PROD" internal \
	"replay: {environment: {filesystem: {write: [\"$PROD/sub\"]}}}" >"$T/bad/overlap.yaml"
out=$("$WARDEN" policy check "$T/bad/ext.yaml" 2>&1)
expect_match check-external "$out" "ext.yaml:11:[0-9]+: 'replay.environment': only a side_effects: internal tool has one .*external tool never runs live"
out=$("$WARDEN" policy check "$T/bad/int.yaml" 2>&1)
expect_match check-unknown-key "$out" "int.yaml:11:[0-9]+: unknown key 'nope' in 'replay.environment'"
expect_match check-env-name "$out" "int.yaml:11:[0-9]+: 'replay.environment.env': 'PATH' is not a name it may set"
out=$("$WARDEN" policy check "$T/bad/overlap.yaml" 2>&1)
expect_match check-overlap "$out" "overlap.yaml:11:[0-9]+: 'replay.environment.filesystem.write': '$PROD/sub' overlaps filesystem.write '$PROD'"
out=$("$WARDEN" policy check "$POL/tools/ledger.yaml" 2>&1)
expect_match check-good "$out" '^ok'

start_daemon || { fail daemon-start "see log"; finish; }
as_alice() { as_user 1000 "$WARDEN" "$@"; }
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
rid_of() { sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p'; }

id=$(as_alice run --detach rp go)
wait_until 20 run_done "$id"
expect_eq original-ok "$(run_state "$id" status)" ok
expect_eq original-prod "$(lines "$PROD/ledger.log")/$(lines "$PROD/ledger2.log")/$(lines "$W")" 1/1/1
expect_eq original-no-staging "$(ls "$STAGE" | wc -l)" 0
expect_eq original-net "$(lines "$T/prodsvc.hits")/$(lines "$T/stagesvc.hits")" 2/0

# --- without --live-internal: recorded, nothing runs
out=$(as_alice replay "$id" --from 0 2>&1)
rid=$(printf '%s\n' "$out" | rid_of)
expect_match noflag-recorded "$(recs_of "$rid" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'ledger:recorded.*ledger2:recorded'
expect_eq noflag-nothing "$(lines "$PROD/ledger.log")/$(lines "$STAGE/ledger.log")" 1/0

# --- --live-internal: ledger runs live in its replay environment
out=$(as_alice replay "$id" --from 0 --live-internal 2>&1)
rid=$(printf '%s\n' "$out" | rid_of)
expect_eq live-staging-written "$(lines "$STAGE/ledger.log")" 1
expect_match live-staging-content "$(cat "$STAGE/ledger.log" 2>/dev/null)" '"entry":"a"'
expect_eq live-prod-untouched "$(lines "$PROD/ledger.log")" 1
# the tool that ignores its environment cannot reach production
expect_eq live-ignoring-tool-stopped "$(lines "$PROD/ledger2.log")" 1
expect_match live-ignoring-tool-failed "$(recs_of "$rid" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+x["status"] for x in d]')" 'ledger2:error'
expect_match live-recorded-env "$(recs_of "$rid" tool_attempt | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'ledger:environment.*ledger2:environment'
expect_match live-result-env "$(recs_of "$rid" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'ledger:environment'
expect_eq live-flag-recorded "$(rec_of "$rid" run_start | jq_py 'd["replay_of"]["live_internal"]')" True
# note has no replay environment: its recorded result, as without the flag
expect_match live-no-env-recorded "$(recs_of "$rid" tool_result | jq_py '[x["gen_ai.tool.name"]+":"+str(x.get("replay")) for x in d]')" 'note:recorded'
expect_eq live-mail-not-sent "$(lines "$W")" 1
# network: the environment's allow list replaces production's
sleep 0.3 # the listeners log after accept
expect_eq live-net-staging "$(lines "$T/stagesvc.hits")" 1
expect_eq live-net-prod-untouched "$(lines "$T/prodsvc.hits")" 2
expect_match live-net-ignoring-denied "$(recs_of "$rid" denial | jq_py '[x["gen_ai.tool.name"]+":"+x["event"].get("target","") for x in d]')" "ping2:127.0.0.1:$PPORT"

# --- no environment and no recording of the call: refused, named
out=$(as_alice replay "$id" --from 2 --live-internal --args '2.0={"k":"2"}' 2>&1)
expect_match live-no-env-refused "$out" 'note side_effects=internal: .*names no replay environment'
expect_eq live-no-env-nothing "$(ls "$PROD/note" | wc -l)" 0

# --- external stays never-live: a patch relabelling mail internal with a
# replay environment that would write to staging
shtool mail mail.sh "$T/witness" internal \
	"replay: {environment: {filesystem: {write: [\"$STAGE\"]}, env: {MAIL_OUT: \"$STAGE/mail.log\"}}}" >"$T/relabel.yaml"
"$WARDEN" policy check "$T/relabel.yaml" >/dev/null 2>&1 || fail relabel-fixture "$("$WARDEN" policy check "$T/relabel.yaml" 2>&1)"
for c in "--from 3" "--from 3 --args 3.0={\"to\":\"new@example.com\"}" "--from 0 --determinism recorded-model --args 3.0={\"to\":\"z@example.com\"}"; do
	# shellcheck disable=SC2086
	"$WARDEN" replay "$id" $c --live-internal --tool mail="$T/relabel.yaml" >"$T/ext.out" 2>&1
	expect_eq "external-never-live ($c)" "$(lines "$W")/$(lines "$STAGE/mail.log")" 1/0
done
expect_match external-refused "$(cat "$T/ext.out")" 'replay_refused .*mail side_effects=external'
stop_daemon
finish
