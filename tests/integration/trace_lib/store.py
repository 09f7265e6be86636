"""A trace store written from the documented format (daemon/trace/trace.h:
crc32c framing, sha256 chain, zlib blobs), independently of warden's own
writer, for the viewer tests (trace_html.sh, trace_diff.sh,
trace_failures.sh). Usage: python3 store.py STATE SCENARIO [ARGS...]."""
import datetime, hashlib, json, os, random, sys, zlib

_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = (c >> 8) ^ _T[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF


class Store:
    def __init__(self, state):
        self.root = os.path.join(state, "trace")
        os.makedirs(self.root + "/segments", exist_ok=True)
        os.makedirs(self.root + "/blobs", exist_ok=True)
        self.prev = "0" * 64
        self.seq = 0
        self.seg = open(self.root + "/segments/%016d.jsonl" % 1, "wb")
        self.t = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
        self.blob_bytes = 0  # compressed payload bytes written

    def blob(self, data):
        if isinstance(data, str):
            data = data.encode()
        h = hashlib.sha256(data).hexdigest()
        d = os.path.join(self.root, "blobs", h[:2])
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, h[2:])
        if not os.path.exists(p):
            z = zlib.compress(data)
            self.blob_bytes += len(z)
            open(p, "wb").write(z)
        return "sha256:" + h

    def rec(self, run, step, typ, dt=0.2, **kw):
        self.seq += 1
        self.t += datetime.timedelta(seconds=dt)
        body = {"seq": self.seq, "ts": self.t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "prev": "sha256:" + self.prev, "run_id": run, "step": step, "type": typ}
        for k, v in kw.items():
            body[k.replace("__", ".")] = v
        s = json.dumps(body, separators=(",", ":"))[:-1]
        line = (s + ',"crc":"%08x"}' % crc32c(s.encode())).encode()
        self.seg.write(line + b"\n")
        self.prev = hashlib.sha256(line).hexdigest()

    def close(self):
        self.seg.close()


def start(st, run, agent="support", team="cs", user="alice", uid=1000, **kw):
    st.rec(run, 0, "run_start", agent=agent, team=team, user=user, uid=uid,
           gen_ai__request__model="m-large",
           trace={"payloads": kw.pop("payloads", "full"), "retention_days": 30},
           bounds={"max_steps": 40, "token_budget": 200000, "wall_clock_s": 60,
                   "cost_cap_usd": 1.0}, **kw)


def model(st, run, step, prompt, response, tin=1000, tout=100, cost=0.01):
    p = st.blob(prompt)
    r = st.blob(response)
    st.rec(run, step, "model_call", gen_ai__request__model="m-large",
           gen_ai__usage__input_tokens=tin, gen_ai__usage__output_tokens=tout,
           cost_usd=cost, latency_ms=800, prompt_hash=p, prompt_ref=p, response_ref=r)


def tool(st, run, step, name, args, result, status="ok", call=None, hash_only=False):
    call = call or "c-%s-%d" % (run, step)
    # args_hash: sha256 of the compact arguments, as the broker writes it
    ah = "sha256:" + hashlib.sha256(json.dumps(args, separators=(",", ":")).encode()).hexdigest()
    kw = {} if hash_only else {"args": args}
    st.rec(run, step, "tool_attempt", gen_ai__tool__name=name, gen_ai__tool__call__id=call,
           side_effects="none", args_hash=ah, **kw)
    r = st.blob(result)
    st.rec(run, step, "tool_result", gen_ai__tool__name=name, gen_ai__tool__call__id=call,
           status=status, exit_code=0 if status == "ok" else 1, latency_ms=30,
           result_hash=r, result_ref=r)
    return call


def end(st, run, steps, status="ok", reason=None, **kw):
    extra = {"reason": reason} if reason else {}
    st.rec(run, steps, "run_end", status=status, steps=steps, cost_usd=0.01 * steps, **extra, **kw)


INJECT = ('</script><script>fetch("http://127.0.0.1:%s/script")</script>'
          '<img src="http://127.0.0.1:%s/img"> & "quotes" \'single\'')


def viewer(st, port):
    """run-v: 5 steps; a kernel denial at step 2; an approval at step 3
    decided by bob; a sub-agent at step 4; a prompt with an injection."""
    run = "run-v"
    # a task longer than the page shows of a field (4 KiB): cut, with its hash
    start(st, run, subagents=["helper"], task="TASK-LONG " + "x" * 9000)
    model(st, run, 0, "PROMPT-0 summarise ticket 42 " + INJECT % (port, port),
          "RESPONSE-0 I will fetch the ticket")
    tool(st, run, 0, "fetch_ticket", {"id": 42}, "ticket 42: printer on fire")
    model(st, run, 1, "PROMPT-1 look up the customer", "RESPONSE-1 calling crm")
    tool(st, run, 1, "crm_lookup", {"customer": "acme"}, "acme: gold tier")
    model(st, run, 2, "PROMPT-2 check the status page", "RESPONSE-2 curl status")
    call = "c-run-v-2"
    st.rec(run, 2, "tool_attempt", gen_ai__tool__name="http_get", gen_ai__tool__call__id=call,
           side_effects="none", args={"url": "http://10.9.9.9/status"})
    st.rec(run, 2, "denial", gen_ai__tool__name="http_get", call_id=call,
           event={"kind": "connect", "target": "10.9.9.9:80", "source": "bpf"})
    r = st.blob("curl: (7) Couldn't connect to server")
    st.rec(run, 2, "tool_result", gen_ai__tool__name="http_get", gen_ai__tool__call__id=call,
           status="error", exit_code=7, latency_ms=12, result_hash=r, result_ref=r)
    model(st, run, 3, "PROMPT-3 send the reply", "RESPONSE-3 send_mail")
    call = "c-run-v-3"
    st.rec(run, 3, "approval_request", approval_id="ap-1", gen_ai__tool__name="send_mail",
           gen_ai__tool__call__id=call, reason="approval: always")
    st.rec(run, 3, "approval_decision", approval_id="ap-1", gen_ai__tool__call__id=call,
           decision="approved", by="bob", reason="looks right")
    tool(st, run, 3, "send_mail", {"to": "acme"}, "sent", call=call)
    model(st, run, 4, "PROMPT-4 ask the helper", "RESPONSE-4 delegate")
    st.rec(run, 4, "tool_attempt", gen_ai__tool__name="delegate", gen_ai__tool__call__id="c-sub",
           side_effects="none", subagent="helper", child_run_id="run-v-child")
    start(st, "run-v-child", agent="helper", parent_run_id=run, parent_step=4)
    model(st, "run-v-child", 0, "CHILD-PROMPT", "CHILD-RESPONSE")
    end(st, "run-v-child", 1)
    r = st.blob("helper says hi")
    st.rec(run, 4, "tool_result", gen_ai__tool__name="delegate", gen_ai__tool__call__id="c-sub",
           status="ok", latency_ms=900, child_run_id="run-v-child", result_hash=r, result_ref=r,
           usage={"steps": 3, "input_tokens": 50000, "output_tokens": 500, "cost_usd": 0.25})
    end(st, run, 5, output="done")


def words(rng, n):
    ws = ("ticket customer printer invoice refund shipping delay account "
          "password reset order status warehouse label carrier tracking "
          "escalate priority agent reply summary policy").split()
    out = []
    size = 0
    while size < n:
        w = rng.choice(ws) + str(rng.randint(0, 999))
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def big(st, steps=30, size=100 * 1024):
    """run-big: `steps` steps, each with a `size`-byte prompt of varied
    text (it compresses like prose, not like a repeated byte)."""
    rng = random.Random(7)
    run = "run-big"
    start(st, run)
    for s in range(steps):
        model(st, run, s, "STEP-%d " % s + words(rng, size), "answer %d " % s + words(rng, 400))
        tool(st, run, s, "search", {"q": "x%d" % s}, words(rng, 2000))
    end(st, run, steps)


def diff(st):
    """run-a: 5 steps; run-b: its replay from step 3 (steps 0-2 from the
    record, then a different answer with different send_mail arguments,
    refused, and no step 4); run-c: like run-a but another tool at step 1
    and another result at step 2; run-d: like run-a with one step more
    inserted at step 2 (a lookup), its steps 2-4 at 3-5; run-e: run-a as a
    hash_only run (arguments by args_hash only) asking step 4 otherwise."""
    def steps(run, variant):
        for s in range(5):
            if variant == "d" and s == 2:
                model(st, run, 2, "prompt 1b", "answer 1b")
                tool(st, run, 2, "lookup", {"id": "x"}, "row x", call="c-d-ins")
            at = s + 1 if variant == "d" and s >= 2 else s
            if variant == "b" and s == 4:
                break
            answer = "answer %d" % s
            if variant == "b" and s < 3:
                # as runtime/replay_run.c records a step taken from the
                # original: one replay_step, no model call, no tool run
                st.rec(run, s, "replay_step", of_run_id="run-a", of_seq=2 + 3 * s,
                       prompt_hash=st.blob("prompt %d" % s), response_ref=st.blob(answer),
                       tool_results=1)
                continue
            if variant == "b" and s == 3:
                answer = "answer 3, in the new voice"
            model(st, run, at, "prompt %d" % s, answer)
            name, args, result = "search", {"q": "s%d" % s}, "result %d" % s
            if s == 3:
                name, args = "send_mail", {"to": "acme", "body": "hello"}
            if variant == "b" and s == 3:
                args = {"to": "acme", "body": "hello from the data team"}
                call = "c-b-3"
                st.rec(run, s, "tool_attempt", gen_ai__tool__name=name,
                       gen_ai__tool__call__id=call, side_effects="external", args=args)
                st.rec(run, s, "replay_refused", gen_ai__tool__name=name,
                       gen_ai__tool__call__id=call, side_effects="external",
                       reason="external side effect, no recording or mock")
                st.rec(run, s, "replay_divergence", kind="different", what="arguments",
                       message="diverged at step 3")
                continue
            if variant == "c" and s == 1:
                name = "http_get"
            if variant == "c" and s == 2:
                result = "result 2, but another"
            if variant == "e" and s == 4:
                args = {"q": "s4, asked otherwise"}
            tool(st, run, at, name, args, result, call="c-%s-%d" % (run, at),
                 hash_only=variant == "e")
    start(st, "run-a")
    steps("run-a", "a")
    end(st, "run-a", 5)
    start(st, "run-b", replay_of={"run_id": "run-a", "from_step": 3, "determinism": "divergent",
                                  "tools": "live", "head": "sha256:" + "0" * 64, "patches": {}})
    steps("run-b", "b")
    end(st, "run-b", 4, replay={"summary": "diverged at step 3"})
    start(st, "run-c")
    steps("run-c", "c")
    end(st, "run-c", 5)
    start(st, "run-d")
    steps("run-d", "d")
    end(st, "run-d", 6)
    start(st, "run-e", payloads="hash_only")
    steps("run-e", "e")
    end(st, "run-e", 5)


def failures(st, n=400):
    """n runs of agent deployer whose deploy tool fails with the same
    bytes (and so end failed with the same reason), 3 failing with
    another result, 5 ok runs, and 7 runs of another agent failing the
    same way (left out by --agent deployer)."""
    same = "psql: connection to server at db:5432 failed: Connection refused"
    k = 0
    for i, (agent, result, ok) in enumerate(
            [("deployer", same, False)] * n + [("deployer", "disk full", False)] * 3 +
            [("deployer", "", True)] * 5 + [("other", same, False)] * 7):
        run = "run-f%04d" % i
        start(st, run, agent=agent)
        model(st, run, 0, "deploy please", "calling deploy")
        if ok:
            tool(st, run, 0, "deploy", {"env": "prod"}, "deployed")
            end(st, run, 1)
        else:
            tool(st, run, 0, "deploy", {"env": "prod"}, result, status="error")
            end(st, run, 1, status="failed", reason="tool deploy failed: " + result[:20])


def many(st, n_own=1200, n_other=300):
    """run-m0 of alice (uid 1000, team cs) with n_own lookup calls and
    run-m1 of uid 1001 (team ops; user "1001", as a uid without a passwd
    name is recorded) with n_other: more records than a page of
    /v1/trace/records (2 records a call: attempt and result)."""
    for run, uid, user, team, n in (("run-m0", 1000, "alice", "cs", n_own),
                                    ("run-m1", 1001, "1001", "ops", n_other)):
        start(st, run, user=user, uid=uid, team=team)
        for i in range(n):
            tool(st, run, i, "lookup", {"i": i}, "row %s %d" % (run, i), call="c-%s-%d" % (run, i))
        end(st, run, n)


def manyruns(st, n_own=1200, n_other=300):
    """More runs than a page of /v1/trace/runs: n_own of alice (uid 1000,
    team cs), n_other of uid 1001 (team ops), interleaved; one record
    each besides start and end, every one started at its own time."""
    for i in range(n_own + n_other):
        own = i % 5 != 4 if i < 5 * n_other else True
        run = "run-r%05d" % i
        if own:
            start(st, run, user="alice", uid=1000, team="cs")
        else:
            start(st, run, user="1001", uid=1001, team="ops")
        model(st, run, 0, "p", "a")
        end(st, run, 1)


def hashold(st):
    """run-h: a hash_only run whose denial targets an older build wrote
    verbatim (a host and a path from its arguments), and whose model call
    names blobs a full run (run-f) stored."""
    run = "run-h"
    start(st, run, payloads="hash_only")
    st.rec(run, 0, "tool_attempt", gen_ai__tool__name="dial", gen_ai__tool__call__id="c-h",
           side_effects="none", args_hash="sha256:" + "0" * 64)
    st.rec(run, 0, "denial", gen_ai__tool__name="dial", call_id="c-h",
           event={"kind": "connect", "target": "10.77.66.55:443", "source": "bpf"})
    st.rec(run, 0, "denial", gen_ai__tool__name="dial", call_id="c-h",
           event={"kind": "file_open", "target": "/srv/secret-hold/file", "source": "lsm"})
    # a full run stored the text this hash_only run only hashed (the blob
    # store is shared: the same text is the same blob); run-h's model call
    # names those blobs by their hashes
    start(st, "run-f")
    model(st, "run-f", 0, "SHARED-SECRET-PROMPT", "SHARED-SECRET-ANSWER")
    end(st, "run-f", 1)
    p, r = st.blob("SHARED-SECRET-PROMPT"), st.blob("SHARED-SECRET-ANSWER")
    st.rec(run, 0, "model_call", gen_ai__request__model="m-large",
           gen_ai__usage__input_tokens=10, gen_ai__usage__output_tokens=5,
           cost_usd=0.01, latency_ms=80, prompt_hash=p, prompt_ref=p, response_ref=r)
    end(st, run, 1)

if __name__ == "__main__":
    st = Store(sys.argv[1])
    scen = sys.argv[2]
    if scen == "viewer":
        viewer(st, sys.argv[3])
    elif scen == "failures":
        failures(st)
    elif scen == "diff":
        diff(st)
    elif scen == "big":
        big(st)
    elif scen == "many":
        many(st)
    elif scen == "manyruns":
        manyruns(st)
    elif scen == "hashold":
        hashold(st)
    else:
        sys.exit("unknown scenario " + scen)
    st.close()
    print(st.blob_bytes)
