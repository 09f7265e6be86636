#!/usr/bin/env bash
# make demo: the platform's main job on embedded defaults.
#
# Starts wardend on a state directory (DEMO_STATE or a new temporary one)
# with the shipped policy/ and the scripted model, runs the analyst agent
# on seed 004's task as the demo user alice (uid 1000) - a tier-3 run_python
# call, an egress the kernel refuses, an email gated on a human approval
# given by the demo approver bob (uid 1001) - then prints the run's
# timeline, its denials and cost, `warden status`, three `warden exec`
# calls (one allowed, one denied, one reaching search-svc.internal:9200 by
# name), stops the daemon and says how to use a real model; then replays
# the run from its approval step with another system prompt, prints the
# diff of the original and its replay, and last writes the run's page
# (`run viewer: PATH`; written after the replay, it links to it). Needs
# root (the daemon sets up cgroups, BPF and namespaces).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD
POLICY=${DEMO_POLICY:-$PWD/policy}
ALICE=1000 BOB=1001 # uids as listed in policy/users.yaml

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: run as root (wardend needs cgroups, BPF and namespaces)" >&2
	exit 1
fi
for b in warden wardend; do
	[ -x "$BIN/$b" ] || { echo "demo: $BIN/$b missing; run 'make demo'" >&2; exit 1; }
done

if [ -n "${DEMO_STATE:-}" ]; then
	STATE=$DEMO_STATE
	mkdir -p "$STATE"
else
	STATE=$(mktemp -d /tmp/warden-demo.XXXXXX)
fi
# the demo users reach the socket through the directory (traverse only)
chmod 711 "$STATE"
SOCK=$STATE/wardend.sock
export WARDEN_SOCKET=$SOCK
W=$BIN/warden

h() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
as_user() { # UID CMD...: run a command as that uid (no passwd entry needed)
	local u=$1; shift
	setpriv --reuid "$u" --regid "$u" --clear-groups --no-new-privs "$@"
}

h "state directory: $STATE"
"$BIN/wardend" --state "$STATE" --policy "$POLICY" --socket "$SOCK" \
	>"$STATE/wardend.log" 2>&1 &
WARDEND=$!
stop_daemon() {
	if kill -0 "$WARDEND" 2>/dev/null; then
		kill -TERM "$WARDEND"
		wait "$WARDEND" 2>/dev/null
	fi
}
trap stop_daemon EXIT
for _ in $(seq 100); do
	[ -S "$SOCK" ] && break
	kill -0 "$WARDEND" 2>/dev/null || break
	sleep 0.1
done
if ! [ -S "$SOCK" ]; then
	echo "demo: wardend did not start:" >&2
	cat "$STATE/wardend.log" >&2
	exit 1
fi
echo "wardend pid $WARDEND on $SOCK (log: $STATE/wardend.log)"

TASK="Calculate the average of this list of numbers and tell me if it's above 50: 45, 80, 62, 63"
h "alice (uid $ALICE): warden run analyst \"$TASK\""
as_user $ALICE "$W" run analyst "$TASK" >"$STATE/run.out" 2>&1 &
RUNPID=$!

# The agent asks to email two customers: the run suspends (no thread held)
# until an approver decides. bob approves, as himself.
AID=
for _ in $(seq 300); do
	AID=$("$W" approvals ls --json 2>/dev/null |
		python3 -c 'import json,sys
a=json.load(sys.stdin)
print(a[0]["id"] if a else "")' 2>/dev/null)
	[ -n "$AID" ] && break
	kill -0 $RUNPID 2>/dev/null || break
	sleep 0.1
done
cat "$STATE/run.out"
if [ -n "$AID" ]; then
	h "pending approvals (as bob, uid $BOB)"
	as_user $BOB "$W" approvals ls
	h "bob: warden approvals approve $AID"
	as_user $BOB "$W" approvals approve "$AID" --reason "demo: looks right"
else
	echo "demo: no approval request appeared" >&2
fi
wait $RUNPID
RUN_RC=$?
h "the run, as it streamed (exit $RUN_RC)"
cat "$STATE/run.out"
RUN=$(sed -n 's/^run \(run_[0-9a-f]*\)$/\1/p' "$STATE/run.out" | head -1)

stop_daemon
trap - EXIT

h "timeline: warden trace show --state $STATE $RUN"
"$W" trace show --state "$STATE" "$RUN"
h "denials recorded for the run (kernel-enforced, attributed to run/step/tool)"
"$W" trace show --json --state "$STATE" "$RUN" 2>/dev/null |
	python3 -c '
import json, sys
recs = json.load(sys.stdin)
n = 0
for r in recs:
    if r.get("type") != "denial":
        continue
    e = r.get("event", {})
    n += 1
    print("  step %s %s: %s %s %s (by %s)" % (r.get("step"),
          r.get("gen_ai.tool.name"), e.get("verdict"), e.get("kind"),
          e.get("target", ""), e.get("source")))
print("  %d denial(s)" % n)' || true
h "verify the hash chain: warden trace verify --state $STATE"
"$W" trace verify --state "$STATE"

# cost needs the daemon: start it again on the same state (it recovers)
"$BIN/wardend" --state "$STATE" --policy "$POLICY" --socket "$SOCK" \
	>>"$STATE/wardend.log" 2>&1 &
WARDEND=$!
trap stop_daemon EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && "$W" cost >/dev/null 2>&1 && break; sleep 0.1; done
h "cost by team / agent / user"
"$W" cost --by team
"$W" cost --by agent
"$W" cost --by user
stop_daemon
trap - EXIT

h "warden status"
"$W" status

h "warden exec: an allowed call (tier from the manifest)"
"$W" exec --policy "$POLICY/tools/run_python.yaml" -- /usr/bin/python3 -c \
	'print(sum([45, 80, 62, 63]) / 4)'
echo "exit $?"
h "warden exec: a denied call (egress to an address the manifest does not allow)"
"$W" exec --policy "$POLICY/tools/fetch_url.yaml" --json -- /usr/bin/curl -sS \
	--max-time 3 http://127.0.0.1:9/
echo "exit $?"
h "warden exec: search_internal_docs by name (search-svc.internal:9200)"
# the search service on loopback, named in a hosts file of warden's own;
# the call's DNS goes to its resolver in the kernel, which answers that
# name only and opens 127.0.0.1:9200 to the call for the answer's TTL
python3 -c '
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        q = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({"query": q.get("query"), "passages": [
            "Averages above 50 are reported to the customer by email."]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 9200), H)
open(sys.argv[1], "w").write("ready")
s.serve_forever()' "$STATE/search.ready" &
SEARCH=$!
for _ in $(seq 50); do [ -s "$STATE/search.ready" ] && break; sleep 0.1; done
echo "127.0.0.1 search-svc.internal" >"$STATE/demo-hosts"
echo '{"query": "average above 50"}' | "$W" exec --dns-hosts "$STATE/demo-hosts" \
	--policy "$POLICY/tools/search_internal_docs.yaml" --stdin -
rc=$?
echo
echo "exit $rc"
kill "$SEARCH" 2>/dev/null
wait "$SEARCH" 2>/dev/null

h "use a real model"
cat <<'TXT'
The demo used the scripted model (policy/gateway.yaml alias "default" ->
provider "script", policy/models/demo.script). To run agents against a real
model, point the agent's `model:` (policy/agents/analyst.yaml) at an alias
in policy/gateway.yaml and give the daemon the key in its environment:

  Anthropic:  export ANTHROPIC_API_KEY=sk-ant-...   alias "claude"
              (claude-sonnet-4-5, failover to gpt-4.1)
  OpenAI:     export OPENAI_API_KEY=sk-...          alias "gpt"
              (gpt-4.1, failover to claude-sonnet-4-5)
  Local OpenAI-compatible server (llama.cpp llama-server, vLLM, Ollama):
              uncomment the `local:` provider in policy/gateway.yaml, set its
              base_url (e.g. http://127.0.0.1:11434/v1), add an alias
              `local: [{provider: local, model: qwen2.5:7b}]`, and
              export LOCAL_MODEL_KEY=x (any value).

then:  sed -i 's/^model: default/model: claude/' policy/agents/analyst.yaml
       wardend --state /var/lib/warden --policy policy &   (or SIGHUP it)
       warden run analyst "Calculate the average of ... above 50: 45, 80"
Keys are read from the environment (or api_key_file), never logged or traced.
TXT
# Execution replay: the same run again from its approval step, with a
# changed system prompt. Steps 0-1 come from the record (no model call, no
# sandbox, no cost); from step 2 the agent runs live and writes another
# email, which the broker refuses: send_customer_email is external, and a
# replay never repeats an external side effect (recorded result, mock, or
# refused). The divergence from the original is named.
if [ -n "$RUN" ]; then
	"$BIN/wardend" --state "$STATE" --policy "$POLICY" --socket "$SOCK" \
		>>"$STATE/wardend.log" 2>&1 &
	WARDEND=$!
	trap stop_daemon EXIT
	for _ in $(seq 100); do [ -S "$SOCK" ] && "$W" cost >/dev/null 2>&1 && break; sleep 0.1; done
	AP_STEP=$("$W" trace show --json --state "$STATE" "$RUN" 2>/dev/null |
		python3 -c 'import json,sys
print(next((r["step"] for r in json.load(sys.stdin) if r.get("type")=="approval_request"), 2))')
	printf '%s\n' "You are an analyst on the data team. Use the tools to answer the user's question." \
		"Run Python for any computation. Sign customer emails as the data team." >"$STATE/system_prompt.txt"
	h "alice: warden replay $RUN --from $AP_STEP --system-prompt $STATE/system_prompt.txt"
	as_user $ALICE "$W" replay "$RUN" --from "$AP_STEP" --system-prompt "$STATE/system_prompt.txt" |
		tee "$STATE/replay.out"
	echo "exit ${PIPESTATUS[0]}"
	REPLAY=$(sed -n 's/^run \(run_[0-9a-f]*\) (replay of.*/\1/p' "$STATE/replay.out" | head -1)
	stop_daemon
	trap - EXIT
	h "the original links to its replay: warden trace show --state $STATE $RUN | head -4"
	"$W" trace show --state "$STATE" "$RUN" | head -4
	h "send_customer_email in the trace: one attempt (the original's, approved by bob); the replay's refused"
	"$W" trace grep --tool send_customer_email --state "$STATE"
	if [ -n "$REPLAY" ]; then
		h "the original against its replay: warden trace diff --state $STATE $RUN $REPLAY"
		"$W" trace diff --state "$STATE" "$RUN" "$REPLAY"
	fi
fi

# the page is written last, after the replay: it links to the replay
# ("replayed by ...") and marks the denial at its step
if [ -n "$RUN" ]; then
	HTML="$STATE/$RUN.html"
	h "the run as one self-contained page: warden trace html --state $STATE $RUN -o $HTML"
	if "$W" trace html --state "$STATE" "$RUN" -o "$HTML" >/dev/null; then
		echo "run viewer: $HTML"
		echo "  (open it in any browser, offline: timeline, payloads, the denial at its step, budget chart, the link to its replay)"
	else
		echo "demo: trace html failed" >&2
	fi
fi

h "done; state kept in $STATE"
