#!/usr/bin/env bash
# `warden trace` on a store written by an independent implementation of the
# documented format (Python below: crc32c framing, sha256 chain, zlib blobs),
# so the CLI is tested against the contract, not against its own writer:
# ls / show / grep / verify (and tampering) / reindex / gc / export (OTLP to
# a loopback collector this test starts) / usage errors.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

S=$(mktemp -d /tmp/wd-trace-cli.XXXXXX)
COL_PID=
cleanup() { [ -n "$COL_PID" ] && kill "$COL_PID" 2>/dev/null; rm -rf "$S"; }
trap cleanup EXIT

python3 - "$S" <<'PY' || { fail trace-cli-mkstore "python store writer failed"; finish; }
import hashlib, json, os, sys, zlib, datetime
root = os.path.join(sys.argv[1], "trace")
os.makedirs(root + "/segments"); os.makedirs(root + "/blobs")
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = (c >> 8) ^ T[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    d = os.path.join(root, "blobs", h[:2]); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, h[2:]), "wb").write(zlib.compress(data))
    return "sha256:" + h
prev = "0" * 64; seq = 0
seg = open(root + "/segments/%016d.jsonl" % 1, "wb")
base = datetime.datetime(2026, 1, 10, 12, 0, 0)
def rec(run, step, typ, **kw):
    global prev, seq
    seq += 1
    ts = (base + datetime.timedelta(seconds=seq)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    body = {"seq": seq, "ts": ts, "prev": "sha256:" + prev, "run_id": run, "step": step, "type": typ}
    body.update(kw)
    s = json.dumps(body, separators=(",", ":"))[:-1]
    line = (s + ',"crc":"%08x"}' % crc32c(s.encode())).encode()
    seg.write(line + b"\n")
    prev = hashlib.sha256(line).hexdigest()
prompt = blob(b"You are a support agent. Summarise ticket 42.")
for run, agent, status in (("r-ok", "support", "ok"), ("r-fail", "support", "failed"), ("r-b", "billing", "ok")):
    rec(run, 0, "run_start", agent=agent, team="cs", user="alice",
        **{"gen_ai.request.model": "m-large"}, trace={"payloads": "full", "retention_days": 30})
    rec(run, 1, "model_call", **{"gen_ai.request.model": "m-large", "gen_ai.usage.input_tokens": 6412,
        "gen_ai.usage.output_tokens": 184}, cost_usd="0.0231", latency_ms=1840,
        prompt_hash=prompt, prompt_ref=prompt)
    res = blob(("result of %s" % run).encode())
    rec(run, 1, "tool_attempt", **{"gen_ai.tool.name": "send_mail", "gen_ai.tool.call.id": "c-" + run},
        side_effects="external")
    if status == "failed":
        rec(run, 1, "denial", **{"gen_ai.tool.name": "send_mail"},
            event={"kind": "connect", "target": "10.0.0.1:443", "source": "bpf"})
    open(sys.argv[1] + "/res-" + run, "w").write(res)
    rec(run, 1, "tool_result", **{"gen_ai.tool.name": "send_mail", "gen_ai.tool.call.id": "c-" + run},
        status="denied" if status == "failed" else "ok", result_hash=res, result_ref=res, latency_ms=210)
    if status == "failed":
        rec(run, 2, "budget_stop", bound="max_steps")
    rec(run, 2, "run_end", status=status)
open(sys.argv[1] + "/prompt", "w").write(prompt)
PY
PROMPT=$(cat "$S/prompt")
SEG=$S/trace/segments/0000000000000001.jsonl

# usage
$WARDEN trace >/dev/null 2>&1; expect_eq trace-cli-usage-noargs "$?" 2
$WARDEN trace bogus --state "$S" >/dev/null 2>&1; expect_eq trace-cli-usage-unknown "$?" 2
$WARDEN trace --help >/dev/null 2>&1; expect_eq trace-cli-help "$?" 0
$WARDEN trace grep --state "$S" >/dev/null 2>&1; expect_eq trace-cli-grep-needs-filter "$?" 2

# ls and filters (the index is built from the segments on first use)
out=$($WARDEN trace ls --state "$S" --json 2>&1)
expect_eq trace-cli-ls-all "$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>&1)" 3
out=$($WARDEN trace ls --state "$S" --agent support --json)
expect_eq trace-cli-ls-agent "$(printf '%s' "$out" | python3 -c 'import json,sys; print(sorted(r["run_id"] for r in json.load(sys.stdin)))')" "['r-fail', 'r-ok']"
out=$($WARDEN trace ls --state "$S" --status failed --json)
expect_eq trace-cli-ls-status "$(printf '%s' "$out" | python3 -c 'import json,sys; print([r["run_id"] for r in json.load(sys.stdin)])')" "['r-fail']"
out=$($WARDEN trace ls --state "$S" --since 2026-01-10T12:00:06 --json)
expect_eq trace-cli-ls-since "$(printf '%s' "$out" | python3 -c 'import json,sys; print([r["run_id"] for r in json.load(sys.stdin)])')" "['r-fail', 'r-b']"
out=$($WARDEN trace ls --state "$S")
expect_match trace-cli-ls-text "$out" "r-fail +support +cs +alice +failed"

# show
out=$($WARDEN trace show r-fail --state "$S")
expect_match trace-cli-show-model "$out" "model_call +m-large in=6412 out=184 cost=\\\$0.0231"
expect_match trace-cli-show-denial "$out" "denial +DENIED send_mail connect +10.0.0.1:443 \\(bpf\\)"
expect_match trace-cli-show-budget "$out" "budget_stop +bound=max_steps"
expect_match trace-cli-show-header "$out" "run r-fail +agent=support .*status=failed"
n=$($WARDEN trace show r-fail --state "$S" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq trace-cli-show-json "$n" 7
$WARDEN trace show nope --state "$S" >/dev/null 2>&1; expect_eq trace-cli-show-missing "$?" 1

# payload: the step's blobs by run and step (what replay reads), hash checked
out=$($WARDEN trace payload r-ok 1 --state "$S")
expect_eq trace-cli-payload-rc "$?" 0
expect_match trace-cli-payload-prompt "$out" "model_call prompt_ref sha256:[0-9a-f]{64}"$'\n'"You are a support agent. Summarise ticket 42."
expect_match trace-cli-payload-result "$out" "tool_result result_ref sha256:[0-9a-f]{64}"$'\n'"result of r-ok"
n=$($WARDEN trace payload r-ok 1 --type tool_result --state "$S" --json | python3 -c 'import json,sys; a=json.load(sys.stdin); print(len(a), a[0]["payload"])')
expect_eq trace-cli-payload-type-json "$n" "1 result of r-ok"
$WARDEN trace payload r-ok 7 --state "$S" >/dev/null 2>&1; expect_eq trace-cli-payload-no-step "$?" 1
$WARDEN trace payload r-ok x --state "$S" >/dev/null 2>&1; expect_eq trace-cli-payload-usage "$?" 2
# a damaged blob is named, not printed
ref=$($WARDEN trace payload r-b 1 --type tool_result --state "$S" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ref"][7:])')
bf="$S/trace/blobs/${ref:0:2}/${ref:2}"
cp "$bf" "$S/blob.keep"
python3 -c 'import sys,zlib; open(sys.argv[1],"wb").write(zlib.compress(b"result of r-X"))' "$bf"
out=$($WARDEN trace payload r-b 1 --type tool_result --state "$S" 2>&1)
expect_eq trace-cli-payload-damaged-rc "$?" 1
expect_match trace-cli-payload-damaged "$out" "not available: .*$ref"
cp "$S/blob.keep" "$bf"

# grep
out=$($WARDEN trace grep --prompt-hash "$PROMPT" --state "$S" --json)
expect_eq trace-cli-grep-prompt "$(printf '%s' "$out" | python3 -c 'import json,sys; print(sorted({r["run_id"] for r in json.load(sys.stdin)}))')" "['r-b', 'r-fail', 'r-ok']"
out=$($WARDEN trace grep --tool send_mail --status denied --state "$S")
expect_match trace-cli-grep-denied "$out" "^r-fail .*tool_result send_mail denied"
expect_eq trace-cli-grep-denied-count "$(printf '%s\n' "$out" | grep -c .)" 1

# verify, then tamper
out=$($WARDEN trace verify --state "$S"); rc=$?
expect_eq trace-cli-verify-ok "$rc:$out" "0:trace verify: ok"
cp "$SEG" "$S/seg.bak"
python3 - "$SEG" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
nl = [i for i, c in enumerate(b) if c == 10]
b[nl[4] + 30] ^= 0x01  # a bit in line 6
open(p, "wb").write(b)
PY
off=$(python3 -c "import sys; b=open('$S/seg.bak','rb').read(); print([i for i,c in enumerate(b) if c==10][4]+1)")
out=$($WARDEN trace verify --state "$S"); rc=$?
expect_eq trace-cli-verify-bitflip-exit "$rc" 1
expect_match trace-cli-verify-bitflip-location "$out" "frame: 0000000000000001.jsonl offset $off line 6"
cp "$S/seg.bak" "$SEG"
B=$(find "$S/trace/blobs" -type f | head -1)
cp "$B" "$S/blob.bak"; printf 'x' >> "$B"
out=$($WARDEN trace verify --state "$S" --json); rc=$?
expect_eq trace-cli-verify-blob-exit "$rc" 1
expect_match trace-cli-verify-blob-location "$out" "\"file\": \"blobs/$(basename "$(dirname "$B")")/$(basename "$B")\""
cp "$S/blob.bak" "$B"
$WARDEN trace verify r-ok --state "$S" >/dev/null; expect_eq trace-cli-verify-run "$?" 0
# every run named is verified ("verify r-ok r-b" checked r-ok only)
cp "$bf" "$S/blob.keep"; printf 'x' >>"$bf"
$WARDEN trace verify r-ok --state "$S" >/dev/null; expect_eq trace-cli-verify-run-other-damaged "$?" 0
out=$($WARDEN trace verify r-ok r-b --state "$S"); rc=$?
expect_eq trace-cli-verify-runs-exit "$rc" 1
expect_match trace-cli-verify-runs-names "$out" "blobs/${ref:0:2}/${ref:2}"
cp "$S/blob.keep" "$bf"

# reindex gives the same answers
before=$($WARDEN trace ls --state "$S" --json)
out=$($WARDEN trace reindex --state "$S"); expect_eq trace-cli-reindex "$?:$out" "0:trace reindex: ok"
expect_eq trace-cli-reindex-same "$($WARDEN trace ls --state "$S" --json)" "$before"

# export to a loopback OTLP collector
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$PORT" "$S/otlp" <<'PY' &
import http.server, sys
out = open(sys.argv[2], "ab")
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(n)
        out.write(self.path.encode() + b" " + body + b"\n"); out.flush()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
COL_PID=$!
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT))" 2>/dev/null && break; sleep 0.1; done
out=$($WARDEN trace export --otlp "http://127.0.0.1:$PORT" --state "$S" 2>&1); rc=$?
expect_eq trace-cli-export-exit "$rc" 0
expect_match trace-cli-export-count "$out" "exported 7 spans \\(0 failed, 0 dropped\\)"
check=$(python3 - "$S/otlp" <<'PY'
import json, sys
spans = []
for line in open(sys.argv[1], "rb"):
    path, body = line.split(b" ", 1)
    assert path == b"/v1/traces", path
    for rs in json.loads(body)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            spans += ss["spans"]
def attrs(s): return {a["key"]: list(a["value"].values())[0] for a in s["attributes"]}
chat = [attrs(s) for s in spans if attrs(s).get("gen_ai.operation.name") == "chat"]
tool = [attrs(s) for s in spans if attrs(s).get("gen_ai.operation.name") == "execute_tool"]
den = [s for s in spans if s["name"].startswith("denial")]
ok = (len(chat) == 3 and len(tool) == 3 and len(den) == 1
      and chat[0]["gen_ai.request.model"] == "m-large"
      and chat[0]["gen_ai.usage.input_tokens"] == "6412"
      and chat[0]["gen_ai.usage.output_tokens"] == "184"
      and tool[0]["gen_ai.tool.name"] == "send_mail"
      and tool[0]["gen_ai.tool.call.id"].startswith("c-")
      and chat[0]["warden.prompt_ref"].startswith("sha256:")
      and all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
      and b"support agent" not in open(sys.argv[1], "rb").read())
print("ok" if ok else "bad: %r %r" % (chat[:1], tool[:1]))
PY
)
expect_eq trace-cli-export-genai-spans "$check" ok
# the filters select what goes (they were parsed and ignored: every run went)
out=$($WARDEN trace export --otlp "http://127.0.0.1:$PORT" --agent billing --state "$S" 2>&1); rc=$?
expect_eq trace-cli-export-agent "$rc:$out" "0:exported 2 spans (0 failed, 0 dropped)"
out=$($WARDEN trace export --otlp "http://127.0.0.1:$PORT" --agent billing r-ok --state "$S" 2>&1); rc=$?
expect_match trace-cli-export-runs-or-filters "$rc $out" "^2 .*not both"
# an option a subcommand does not read, or a RUN it would not look at, is
# refused ("trace ls r-ok" listed every run)
out=$($WARDEN trace ls r-ok --state "$S" 2>&1); rc=$?
expect_match trace-cli-ls-run-refused "$rc $out" "^2 warden trace ls: takes no RUN argument"
out=$($WARDEN trace ls --type tool_result --state "$S" 2>&1); rc=$?
expect_match trace-cli-ls-type-refused "$rc $out" "^2 warden trace ls: --type does not apply to ls"
out=$($WARDEN trace gc --since 1d --state "$S" 2>&1); rc=$?
expect_match trace-cli-gc-since-refused "$rc $out" "^2 warden trace gc: --since does not apply to gc"
out=$($WARDEN trace ls --since @nan --state "$S" 2>&1); rc=$?
expect_match trace-cli-since-nan-refused "$rc $out" "^2 warden trace: bad time '@nan'"
kill "$COL_PID" 2>/dev/null; wait "$COL_PID" 2>/dev/null; COL_PID=
t0=$(date +%s)
$WARDEN trace export --otlp "http://127.0.0.1:$PORT" --state "$S" >/dev/null 2>&1; rc=$?
expect_eq trace-cli-export-dead-collector "$rc:$(( $(date +%s) - t0 < 20 ))" "1:1"

# gc: 40 days after the runs: r-ok and r-b lose their result blobs, r-fail
# keeps everything, the shared prompt stays (r-fail needs it)
nblobs=$(find "$S/trace/blobs" -type f | wc -l)
out=$($WARDEN trace gc --state "$S" --now 2026-02-20); rc=$?
expect_eq trace-cli-gc "$rc:$out" "0:trace gc: 2 payload blob(s) deleted"
expect_eq trace-cli-gc-left "$(find "$S/trace/blobs" -type f | wc -l)" "$((nblobs - 2))"
$WARDEN trace verify --state "$S" >/dev/null; expect_eq trace-cli-verify-after-gc "$?" 0
out=$($WARDEN trace show r-ok --state "$S")
expect_match trace-cli-gc-keeps-metadata "$out" "gc +1 payload blobs dropped \\(retention\\)"

# a second segment, weeks later: a run of another team, user and tool,
# chained to the last record of the first segment (gc appended to it)
python3 - "$S" <<'PY' || fail trace-cli-mkseg2 "python segment writer failed"
import hashlib, json, os, sys, zlib
root = os.path.join(sys.argv[1], "trace")
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = (c >> 8) ^ T[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF
last = open(root + "/segments/%016d.jsonl" % 1, "rb").read().rstrip(b"\n").split(b"\n")[-1]
prev = hashlib.sha256(last).hexdigest(); seq = json.loads(last)["seq"]
seg = open(root + "/segments/%016d.jsonl" % (seq + 1), "wb")
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    d = os.path.join(root, "blobs", h[:2]); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, h[2:]), "wb").write(zlib.compress(data))
    return "sha256:" + h
def rec(run, step, typ, **kw):
    global prev, seq
    seq += 1
    body = {"seq": seq, "ts": "2026-03-01T09:00:%02d.000000Z" % seq, "prev": "sha256:" + prev,
            "run_id": run, "step": step, "type": typ}
    body.update(kw)
    s = json.dumps(body, separators=(",", ":"))[:-1]
    line = (s + ',"crc":"%08x"}' % crc32c(s.encode())).encode()
    seg.write(line + b"\n")
    prev = hashlib.sha256(line).hexdigest()
res = blob(b"fetched page")
rec("r-ops", 0, "run_start", agent="oncall", team="ops", user="bob",
    trace={"payloads": "full", "retention_days": 30})
rec("r-ops", 1, "tool_attempt", **{"gen_ai.tool.name": "fetch_url", "gen_ai.tool.call.id": "c-ops"},
    side_effects="none")
rec("r-ops", 1, "tool_result", **{"gen_ai.tool.name": "fetch_url", "gen_ai.tool.call.id": "c-ops"},
    status="ok", result_hash=res, result_ref=res)
rec("r-ops", 2, "run_end", status="ok")
open(sys.argv[1] + "/res-r-ops", "w").write(res)
PY
$WARDEN trace verify --state "$S" >/dev/null; expect_eq trace-cli-verify-two-segments "$?" 0
ids() { python3 -c 'import json,sys; print(sorted(r["run_id"] for r in json.load(sys.stdin)))'; }

# ls filters that must exclude something
expect_eq trace-cli-ls-team "$($WARDEN trace ls --state "$S" --team ops --json | ids)" "['r-ops']"
expect_eq trace-cli-ls-team-cs "$($WARDEN trace ls --state "$S" --team cs --json | ids)" "['r-b', 'r-fail', 'r-ok']"
expect_eq trace-cli-ls-user "$($WARDEN trace ls --state "$S" --user bob --json | ids)" "['r-ops']"
expect_eq trace-cli-ls-user-alice "$($WARDEN trace ls --state "$S" --user alice --json | ids)" "['r-b', 'r-fail', 'r-ok']"
expect_eq trace-cli-ls-tool "$($WARDEN trace ls --state "$S" --tool fetch_url --json | ids)" "['r-ops']"
expect_eq trace-cli-ls-tool-send "$($WARDEN trace ls --state "$S" --tool send_mail --json | ids)" "['r-b', 'r-fail', 'r-ok']"
expect_eq trace-cli-ls-team-user-none "$($WARDEN trace ls --state "$S" --team ops --user alice --json | ids)" "[]"

# grep --result-hash: only the records naming that result
out=$($WARDEN trace grep --result-hash "$(cat "$S/res-r-fail")" --state "$S" --json)
expect_eq trace-cli-grep-result "$(printf '%s' "$out" | python3 -c 'import json,sys; print([(r["run_id"], r["type"]) for r in json.load(sys.stdin)])')" "[('r-fail', 'tool_result')]"
out=$($WARDEN trace grep --result-hash "$(cat "$S/res-r-ops")" --state "$S")
expect_match trace-cli-grep-result-text "$out" "^r-ops .*tool_result fetch_url ok"
expect_eq trace-cli-grep-result-count "$(printf '%s\n' "$out" | grep -c .)" 1
$WARDEN trace grep --result-hash "sha256:$(printf '0%.0s' $(seq 64))" --state "$S" >/dev/null 2>&1
expect_eq trace-cli-grep-result-none "$?" 1

# metadata retention: the first segment (all of its runs, the failed one
# too) is past 30 days of metadata; the second one is the last: kept
$WARDEN trace gc --state "$S" --metadata-days 0 >/dev/null 2>&1; expect_eq trace-cli-gc-metadata-usage "$?" 2
out=$($WARDEN trace gc --state "$S" --now 2026-03-10 --metadata-days 400); rc=$?
expect_eq trace-cli-gc-metadata-not-yet "$rc:$(ls "$S/trace/segments" | grep -c 'jsonl$')" "0:2"
out=$($WARDEN trace gc --state "$S" --now 2030-01-01 --metadata-days 30); rc=$?
expect_eq trace-cli-gc-metadata-exit "$rc" 0
expect_match trace-cli-gc-metadata "$out" "1 segment\\(s\\) with [0-9]+ record\\(s\\) past metadata retention removed"
expect_eq trace-cli-gc-metadata-files "$(ls "$S/trace/segments" | grep -c 'jsonl$'):$([ -e "$SEG" ] && echo kept || echo gone)" "1:gone"
out=$($WARDEN trace verify --state "$S"); rc=$?
expect_eq trace-cli-gc-metadata-verify "$rc:$out" "0:trace verify: ok"
expect_eq trace-cli-gc-metadata-ls "$($WARDEN trace ls --state "$S" --json | ids)" "['r-ops']"
$WARDEN trace show r-fail --state "$S" >/dev/null 2>&1; expect_eq trace-cli-gc-metadata-show-gone "$?" 1
before=$($WARDEN trace ls --state "$S" --json)
$WARDEN trace reindex --state "$S" >/dev/null
expect_eq trace-cli-gc-metadata-reindex-same "$($WARDEN trace ls --state "$S" --json)" "$before"
finish
