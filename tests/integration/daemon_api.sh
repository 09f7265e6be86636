#!/usr/bin/env bash
# wardend's API: the socket (0666, identity from SO_PEERCRED), request
# validation, status, metrics on TCP (and nothing else there), policy reload
# on SIGHUP and POST (a bad file keeps the old policy and says why; a run in
# progress is not dropped), the node-wide event stream with kernel denials
# attributed to run/step/tool, concurrent runs.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip daemon-api "needs root"; finish; }

base_policy
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: none" "approval: always"
tool net '["/usr/bin/curl", "-sS", "--max-time", "3", "http://127.0.0.1:9/"]' "input: stdin" \
	"args_schema: {type: object}" "auth: {mode: on_behalf_of_user, scopes: [\"test:net\"]}" \
	"side_effects: none"
sed -i 's|read: \[|read: ["/etc/ssl", |' "$POL/tools/net.yaml"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "final: {{result.stdout}}"}
S
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {}}]}
{"text": "after approval"}
S
script netter <<'S'
{"step": 0, "tool_calls": [{"name": "net", "arguments": {}}]}
{"text": "done"}
S
agent one once '[echo]'
agent gate gate '[gated]'
agent netter netter '[net]'
write_gateway
MPORT=$((20000 + RANDOM % 20000))
start_daemon --metrics "127.0.0.1:$MPORT" || { fail daemon-start "see log"; finish; }

# socket
expect_eq socket-mode "$(stat -c %a "$SOCK")" 666
expect_match healthz "$(api GET /healthz)" '^200 .*"ok"'
expect_match unknown-endpoint "$(api GET /v1/nope)" '^404 '
expect_match bad-json "$(api POST /v1/runs '{"agent":')" '^400 .*not JSON'
expect_match wrong-method "$(api GET /v1/policy/reload)" '^405 '
expect_match bad-run-id "$(api GET '/v1/runs/..%2f..%2fetc')" '^(400|404) '
# a query parameter the endpoint does not read is refused, not ignored
expect_match unread-query-key "$(api GET '/v1/trace/runs?agent=one&nosuch=1')" "^400 .*query parameter 'nosuch': this endpoint does not read it"
expect_match unread-filter-type "$(api GET '/v1/trace/runs?type=tool_result')" "^400 .*type: only /v1/runs/ID/payload/STEP"
expect_match status-no-keys "$(api GET '/v1/status?verbose=1')" "^400 .*'verbose'.*reads none"
expect_match unread-empty-key "$(api GET '/v1/trace/runs?&agnet=x')" "^400 .*query parameter '':"
expect_match unread-spaced-key "$(api GET '/v1/cost?by+since=1')" "^400 .*query parameter 'by since'"
expect_match unknown-agent "$(api POST /v1/runs '{"agent":"ghost","task":"x"}')" "^404 .*no agent 'ghost'"
expect_match status "$(api GET /v1/status)" '^200 .*"agents":3'

# metrics: TCP listener serves /metrics and nothing else
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
expect_match metrics-tcp "$m" 'warden_runs_started_total'
expect_match metrics-tcp-no-api "$(curl -s -X POST -d '{"agent":"one","task":"x"}' "http://127.0.0.1:$MPORT/v1/runs")" 'only /metrics'

# identity: the caller is the socket peer
out=$(as_user 1000 "$WARDEN" run --json one "hi" 2>&1)
expect_match peer-identity "$(printf '%s\n' "$out" | grep '"type":"run_start"')" '"user":"alice","uid":1000'
expect_match run-output "$(printf '%s\n' "$out" | grep run_end)" '"output":"final: .*hi'

# concurrent runs
pids=()
for i in $(seq 10); do as_user 1000 "$WARDEN" run --json one "c$i" >"$T/c$i.out" 2>&1 & pids+=($!); done
okc=0
for i in $(seq 10); do wait "${pids[$((i - 1))]}" && grep -q "\"output\":\"final: .*\\\\\"c$i\\\\\"" "$T/c$i.out" && okc=$((okc + 1)); done
expect_eq concurrent-runs "$okc" 10

# reload without dropping a run in progress
gid=$(as_user 1000 "$WARDEN" run --detach gate go)
wait_until 10 test -n "$(first_approval)"
has_ap() { [ -n "$(first_approval)" ]; }
wait_until 10 has_ap
agent two once '[echo]'
kill -HUP "$WPID"
wait_until 5 grep -q 'policy reloaded' "$T/wardend.log"
expect_match sighup-reload-new-agent "$(as_user 1000 "$WARDEN" run two "x" 2>&1)" 'status=ok'
# a bad file: the old policy stays, the error names the file and line
printf 'name: broken\nteam: t\nbogus_key: 1\n' >"$POL/agents/broken.yaml"
r=$(api POST /v1/policy/reload)
expect_match reload-bad-422 "$r" '^422 .*broken.yaml:[0-9]+:[0-9]+'
expect_match reload-bad-keeps-old "$(as_user 1000 "$WARDEN" run two "x" 2>&1)" 'status=ok'
kill -HUP "$WPID"
wait_until 5 grep -q 'policy reload failed, keeping the old policy' "$T/wardend.log" &&
	pass sighup-bad-says-why || fail sighup-bad-says-why "no log line"
rm -f "$POL/agents/broken.yaml"
expect_match reload-non-root-403 "$(as_user 1000 curl -s --unix-socket "$SOCK" -X POST http://w/v1/policy/reload)" 'only root'
expect_match reload-ok "$(api POST /v1/policy/reload)" '^200 '
expect_match policy-reload-cli "$("$WARDEN" policy reload 2>&1)" '^policy reloaded'
printf 'name: broken\nteam: t\nbogus_key: 1\n' >"$POL/agents/broken.yaml"
out=$("$WARDEN" policy reload 2>&1); rc=$?
expect_match policy-reload-cli-bad "$rc $out" '^1 .*broken.yaml:[0-9]+'
rm -f "$POL/agents/broken.yaml"
as_user 1001 "$WARDEN" approvals approve "$(first_approval)" >/dev/null
wait_until 10 run_done "$gid"
expect_eq run-survives-reloads "$(run_state "$gid" output)" "after approval"

# kernel denial -> trace record and node-wide event, attributed
out=$(as_user 1000 "$WARDEN" run --json netter go 2>&1)
nid=$(printf '%s\n' "$out" | head -1 | jq_py 'd["run_id"]')
d=$(printf '%s\n' "$out" | grep '"type":"denial"' | grep '"kind":"connect"' | head -1)
expect_match denial-recorded "$d" '"gen_ai.tool.name":"net".*"kind":"connect".*"target":"127.0.0.1:9"'
ev=$(curl -s --unix-socket "$SOCK" "http://w/v1/events?since=0")
evl=$(printf '%s\n' "$ev" | grep "\"run_id\":\"$nid\"" | grep '"kind":"connect"' | head -1)
expect_match events-endpoint "$evl" '"type":"event"'
expect_match events-attrib "$evl" '"tool":"net"'
expect_match events-attrib-agent "$evl" '"agent":"netter"'
# follow: a later denial arrives on an open stream
curl -s -N --max-time 15 --unix-socket "$SOCK" "http://w/v1/events?follow=1&since=$(printf '%s\n' "$ev" | grep -o '"seq":[0-9]*' | tail -1 | cut -d: -f2)" >"$T/follow.out" &
CP=$!
sleep 0.5
as_user 1000 "$WARDEN" run netter again >/dev/null 2>&1
wait_until 10 grep -q '"type":"event"' "$T/follow.out"
kill $CP 2>/dev/null; wait $CP 2>/dev/null
expect_match events-follow "$(cat "$T/follow.out")" '"kind":"connect"'
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
expect_match metrics-denials "$m" 'warden_denials_total\{team="[^"]*",agent="netter",tool="net",tier="[123]",verdict="denied"\} [1-9]'
# --metrics that cannot be served stops the start, before the daemon opens
# anything (a scraper that asked for it would otherwise find nothing there)
out=$(timeout 20 "$WARDEND" --state "$T/state2" --policy "$POL" --socket "$T/s2.sock" \
	--metrics "127.0.0.1:$MPORT" 2>&1); rc=$?
expect_match metrics-port-taken-refused "$rc $out" "^1 .*cannot listen on 127.0.0.1:$MPORT: Address already in use"
expect_eq metrics-port-taken-nothing-opened "$(ls -d "$T/state2" "$T/s2.sock" 2>/dev/null | wc -l)" 0
for a in "127.0.0.1:9464x" "127.0.0.1:65536" "127.0.0.1:0" "localhost:9464"; do
	out=$(timeout 20 "$WARDEND" --state "$T/state2" --policy "$POL" --socket "$T/s2.sock" \
		--metrics "$a" 2>&1); rc=$?
	expect_match "metrics-bad-addr[$a]" "$rc $out" "^2 wardend: --metrics '$a': the (port|address) wants"
done
# numbers whole and in range: a typo is no default
for a in "--workers 8x" "--workers 0" "--approval-ttl -5" "--warm-pool 65"; do
	out=$(timeout 20 "$WARDEND" --state "$T/state2" --policy "$POL" --socket "$T/s2.sock" \
		$a 2>&1); rc=$?
	expect_match "bad-number[$a]" "$rc $out" "^2 wardend: ${a% *} wants a whole number from [0-9]+ to [0-9]+, not '${a#* }'"
done
out=$(WARDEN_APPROVAL_TTL=1h timeout 20 "$WARDEND" --state "$T/state2" --policy "$POL" --socket "$T/s2.sock" 2>&1); rc=$?
expect_match bad-approval-ttl-env "$rc $out" "^2 wardend: WARDEN_APPROVAL_TTL wants a whole number of seconds"
out=$(timeout 20 "$WARDEND" --state "$T/state2" --policy "$POL" --socket "$T/s2.sock" --webhook htp://x 2>&1); rc=$?
expect_match bad-webhook-url "$rc $out" "^2 wardend: --webhook wants an http:// or https:// URL"
out=$(timeout 20 "$WARDEND" --state "" --policy "$POL" --socket "$T/s2.sock" 2>&1); rc=$?
expect_match empty-state-refused "$rc $out" "^2 wardend: --state wants a path"
expect_eq bad-args-nothing-opened "$(ls -d "$T/state2" "$T/s2.sock" 2>/dev/null | wc -l)" 0
out=$(WARDEN_TIMEOUT=5m "$WARDEN" approvals ls 2>&1); rc=$?
expect_match bad-timeout-env "$rc $out" "^[12] .*WARDEN_TIMEOUT wants whole seconds, 1 to 86400, not '5m'"
stop_daemon
expect_eq socket-removed "$([ -e "$SOCK" ] && echo yes || echo no)" no
finish
