#!/usr/bin/env bash
# A hash_only run keeps no argument value anywhere a reader sees it: not in
# the refusal a schema bound or an argv rule writes, not in an approval's
# reason, not in the approval-expiry webhook, not in the trace files on
# disk, the API's answers or the event stream. The model's calls of one
# hash_only run carry a secret-looking string and number that break an
# argv rule (a leading '-'), a schema bound (maximum) and cross an approval
# threshold (then the approval expires at its TTL and is posted to the
# test's webhook receiver). The messages still name the property and the
# rule; an approver still sees the arguments to decide on them.
# A kernel denial's target is often an argument too (a tool that connects
# to the host it was given, outside its network.allow; one that opens the
# path it was given, outside its filesystem.read): of a hash_only run it is
# kept as sha256:<hex> of itself (a network target keeps its port) in the
# denial records, the result, /v1/events and the denial-spike alert's
# webhook body.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-hashonly "needs root"; finish; }

base_policy
SECRET="sk-live-$$x7Q"
NUM=918273 # printed whole by %g: the old messages quoted it
tool dash '["/usr/bin/echo"]' "input: argv" \
	"args_schema: {type: object, required: [v], properties: {v: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
tool bounded '["/usr/bin/cat"]' "input: stdin" \
	"args_schema: {type: object, required: [n], properties: {n: {type: integer, maximum: 10}, note: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
tool pay '["/usr/bin/cat"]' "input: stdin" \
	"args_schema: {type: object, required: [amount], properties: {amount: {type: integer}, memo: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: external" \
	"approval: {required_above: {amount: 100}}"
# the denied host and path are argument values
SECRET_IP="127.$((RANDOM % 200 + 20)).$((RANDOM % 200 + 20)).$((RANDOM % 200 + 20))"
SECRET_PATH="$T/$SECRET-file"
echo hidden >"$SECRET_PATH"
tool dialer "[\"$HELPERS/netprobe\", \"connect-flood\", \"9\", \"40\"]" "input: argv" \
	"argv: [\"{host}\"]" \
	"args_schema: {type: object, required: [host], properties: {host: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
tool opener "[\"$HELPERS/probe\", \"read\"]" "input: argv" \
	"argv: [\"{path}\"]" \
	"args_schema: {type: object, required: [path], properties: {path: {type: string}}}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:x\"]}" "side_effects: none"
script leaky <<S
{"step": 0, "tool_calls": [{"name": "dash", "arguments": {"v": "-$SECRET-dash"}}, {"name": "bounded", "arguments": {"n": $NUM, "note": "$SECRET-note"}}, {"name": "pay", "arguments": {"amount": $NUM, "memo": "$SECRET-memo"}}]}
{"step": 1, "tool_calls": [{"name": "dialer", "arguments": {"host": "$SECRET_IP"}}, {"name": "opener", "arguments": {"path": "$SECRET_PATH"}}]}
{"text": "done"}
S
agent leaky leaky '[dash, bounded, pay, dialer, opener]'
sed -i 's/payloads: full/payloads: hash_only/' "$POL/agents/leaky.yaml"
write_gateway

cat >"$T/hook.py" <<'P'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        with open(sys.argv[2], "ab") as f:
            f.write(self.rfile.read(n) + b"\n")
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
P
python3 "$T/hook.py" "$T/hook.port" "$T/hook.log" &
HOOK_PID=$!
for _ in $(seq 100); do [ -s "$T/hook.port" ] && break; sleep 0.05; done
trap 'kill $HOOK_PID 2>/dev/null; cleanup_all' EXIT

# the TTL leaves the test time to look at the pending approval; then it
# expires and is posted to the webhook
# the denial-spike alerts go to the same receiver (--alert-window 5: the
# denials come after the approval's TTL, past the detector's warm-up of two
# windows; 40 denials in a second are a spike)
start_daemon --approval-ttl 15 --webhook "http://127.0.0.1:$(cat "$T/hook.port")/hook" \
	--alert-webhook "http://127.0.0.1:$(cat "$T/hook.port")/alert" --alert-window 5 ||
	{ fail daemon-start "see log"; finish; }
id=$(as_user 1000 "$WARDEN" run --detach leaky go)
has_approval() { [ "$(approvals_count)" -ge 1 ]; }
wait_until 30 has_approval || fail hashonly-approval-asked "no approval: $(tail -3 "$T/wardend.log")"

no_secret() { # NAME TEXT
	if printf '%s' "$2" | grep -q -F -e "$SECRET" -e "$NUM" -e "$SECRET_IP"; then
		fail "$1" "holds the argument value: $(printf '%s' "$2" | grep -o -F -e "$SECRET" -e "$NUM" -e "$SECRET_IP" | head -3)"
	else
		pass "$1"
	fi
}
# the run's user (not an approver) sees the pending approval, with a hash
no_secret hashonly-approvals-owner "$(as_user 1000 curl -s --unix-socket "$SOCK" http://w/v1/approvals)"
expect_match hashonly-approvals-owner-hash "$(as_user 1000 curl -s --unix-socket "$SOCK" http://w/v1/approvals)" '"args_hash":"sha256:'
# an approver decides on the arguments: shown to them
expect_match hashonly-approver-sees-args "$(as_user 1001 curl -s --unix-socket "$SOCK" http://w/v1/approvals)" "$SECRET-memo"
no_secret hashonly-approval-reason "$(as_user 1001 curl -s --unix-socket "$SOCK" http://w/v1/approvals | jq_py '[a["reason"] for a in d]')"
expect_match hashonly-approval-reason-names-rule "$(as_user 1001 curl -s --unix-socket "$SOCK" http://w/v1/approvals | jq_py 'd[0]["reason"]')" \
	'^amount is above the approval threshold 100'

wait_until 60 run_done "$id" || fail hashonly-run-done "run $id did not finish: $(tail -3 "$T/wardend.log")"
hooked() { grep -q approval_expired "$T/hook.log"; }
wait_until 30 hooked || fail hashonly-webhook-sent "no approval_expired webhook: $(tail -3 "$T/wardend.log")"

# the refusals still say which property broke which rule
refusals=$(recs_of "$id" tool_result)
expect_match hashonly-refusal-argv-rule "$refusals" "\\\$\\.v: a value that starts with '-' would be read as an option"
expect_match hashonly-refusal-bound-rule "$refusals" '\$\.n: the number is greater than maximum 10'

# the denials are there, their targets hashed (the port kept)
ip_ref="sha256:$(printf '%s' "$SECRET_IP" | sha256sum | cut -c1-64)"
dens=$(recs_of "$id" denial)
expect_match hashonly-denial-recorded "$dens" "\"kind\":\"connect\".*\"target\":\"$ip_ref:9\""
otg=$(printf '%s' "$dens" | jq_py '" ".join(x["event"].get("target", "") for x in d if x["gen_ai.tool.name"] == "opener")')
if [ -n "${otg// /}" ]; then
	expect_match hashonly-denial-path-hashed "$otg" '^(sha256:[0-9a-f]{64} ?)+$'
else
	skip hashonly-denial-path-hashed "no denial with a target was recorded for the denied open on this kernel (the connect denials above carry the check)"
fi
expect_match hashonly-events-hashed "$(as_user 1000 curl -s -m 10 --unix-socket "$SOCK" http://w/v1/events)" "\"target\": ?\"$ip_ref:9\""
alerted() { grep -q "$ip_ref" "$T/hook.log"; }
wait_until 30 alerted && pass hashonly-alert-sent ||
	fail hashonly-alert-sent "no denial-spike alert with the hashed target: $(grep -v approval_expired "$T/hook.log" | head -c 400)"

# nowhere a reader (or the webhook's receiver) sees
no_secret hashonly-webhook-body "$(cat "$T/hook.log")"
expect_match hashonly-webhook-hash "$(cat "$T/hook.log")" '"args_hash":"sha256:'
no_secret hashonly-trace-files "$(grep -r -a -l -F -e "$SECRET" -e "$NUM" -e "$SECRET_IP" "$T/state/trace" 2>&1)"
no_secret hashonly-records "$(run_records "$id")"
for ep in "/v1/runs/$id" "/v1/runs/$id/trace" "/v1/runs/$id/stream" "/v1/runs/$id/payload/0" "/v1/runs/$id/payload/1" \
	"/v1/runs" "/v1/events" "/v1/approvals" "/v1/trace/runs" "/v1/trace/records"; do
	no_secret "hashonly-api-owner-$(printf '%s' "$ep" | tr -c 'a-z0-9\n' '-')" \
		"$(as_user 1000 curl -s -m 10 --unix-socket "$SOCK" "http://w$ep")"
	no_secret "hashonly-api-root-$(printf '%s' "$ep" | tr -c 'a-z0-9\n' '-')" \
		"$(curl -s -m 10 --unix-socket "$SOCK" "http://w$ep")"
done
no_secret hashonly-cli-show "$(as_user 1000 "$WARDEN" trace show "$id" 2>&1)"
no_secret hashonly-cli-run-json "$(as_user 1000 "$WARDEN" trace show --json "$id" 2>&1)"
no_secret hashonly-cli-html "$(as_user 1000 "$WARDEN" trace html "$id" -o - 2>&1)"
no_secret hashonly-cli-events "$(as_user 1000 "$WARDEN" events --json 2>&1)"
no_secret hashonly-api-events-root "$(curl -s -m 10 --unix-socket "$SOCK" http://w/v1/events)"
finish
