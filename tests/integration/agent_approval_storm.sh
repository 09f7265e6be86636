#!/usr/bin/env bash
# Approval storm: 200 runs each gated by `approval: always`, listed and
# decided by 8 approvers at once while the runs suspend and resume. Every
# approval is listed once, only after its request is in the trace; every
# run ends ok with its tool run once. tests/run.sh also runs this against
# the ThreadSanitizer build (build-tsan): a race report fails it.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip approval-storm "needs root"; finish; }
N=${STORM_RUNS:-200}

base_policy
tool gated '["/usr/bin/cat"]' "input: stdin" "args_schema: {type: object}" \
	"auth: {mode: on_behalf_of_user, scopes: [\"test:gated\"]}" "side_effects: external" \
	"approval: always"
script gate <<'S'
{"step": 0, "tool_calls": [{"name": "gated", "arguments": {"task": "{{task}}"}}]}
{"text": "done: {{result}}"}
S
agent gate gate '[gated]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }

cat >"$T/storm.py" <<'P'
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from flood import call
sock, n = sys.argv[2], int(sys.argv[3])
ids, seen, bad, lock = [], set(), [], threading.Lock()

def creator(k):
    for i in range(k):
        st, d = call(sock, "POST", "/v1/runs", {"agent": "gate", "task": "t%d" % i})
        with lock:
            ids.append(d["run_id"]) if d and "run_id" in d else bad.append("create %s %s" % (st, d))

def approver(stop):
    while not stop.is_set():
        st, d = call(sock, "GET", "/v1/approvals")
        for a in d or []:
            with lock:
                if a["id"] in seen:
                    continue
                seen.add(a["id"])
            st, _ = call(sock, "POST", "/v1/approvals/" + a["id"], {"decision": "approve"})
            if st not in (200, 204, 404):
                with lock:
                    bad.append("decide %s" % st)
        time.sleep(0.01)

stop = threading.Event()
ap = [threading.Thread(target=approver, args=(stop,)) for _ in range(8)]
cr = [threading.Thread(target=creator, args=(n // 4,)) for _ in range(4)]
for t in ap + cr:
    t.start()
for t in cr:
    t.join()
end = time.time() + 120
done = {}
while time.time() < end and len(done) < len(ids):
    for i in ids:
        if i not in done:
            st, d = call(sock, "GET", "/v1/runs/" + i)
            if d and d.get("state") == "done":
                done[i] = d.get("status")
    time.sleep(0.05)
stop.set()
for t in ap:
    t.join()
ok = sum(1 for s in done.values() if s == "ok")
print("created %d approvals %d done %d ok %d bad %d %s" % (len(ids), len(seen), len(done), ok, len(bad), bad[:3]))
P
out=$(as_user 1001 /usr/bin/python3 "$T/storm.py" "$ROOT_DIR/tests/integration/daemon_lib" "$SOCK" "$N" 2>&1)
echo "$out"
expect_match storm-all-runs-ok "$out" "^created $N approvals $N done $N ok $N bad 0"
# each approval's request precedes its decision in the trace, once
bad=0
for id in $("$WARDEN" trace ls --json --state "$T/state" | jq_py '" ".join(r["run_id"] for r in d)'); do
	run_records "$id" | jq_py '[r["type"] for r in d if r["type"].startswith("approval_")] == ["approval_request", "approval_decision"] and sum(1 for r in d if r["type"] == "tool_attempt") == 1' | grep -q True || bad=$((bad + 1))
done
expect_eq storm-request-decision-attempt-once "$bad" 0
stop_daemon
expect_eq storm-daemon-clean-exit "$(grep -c 'ERROR: \|WARNING: ThreadSanitizer' "$T/wardend.log")" 0
finish
