#!/usr/bin/env python3
"""A fake model provider on loopback, speaking the Anthropic Messages API and
the OpenAI Chat Completions API wire formats (python3 standard library only).

    fakemodel.py --port PORT [--port-file FILE] [--key KEY] [--scenario FILE]

PORT 0 picks a free port; it is written to --port-file (and printed as
"READY <port>") once the server listens.

Lanes: a request path may carry a prefix naming a lane, so one server can
play several providers: "/a/v1/messages" is lane "a", "/v1/messages" lane "".
Each lane has its own queue of behaviours and its own request log.

Control (JSON over HTTP, on the same port):
  POST /_control {"lane": "a", "queue": [B, ...], "reset": true,
                  "default": B}
      append behaviours to the lane's queue (reset empties queue and log
      first). Each request takes the next behaviour; with an empty queue the
      lane's "default" behaviour answers (initially: reply text "ok").
  GET  /_requests?lane=a    [{path, peer, headers, body}, ...] received so
                            far (peer: the client's port, i.e. which
                            keep-alive connection carried the request)
  GET  /_health             "ok"

A behaviour B (all fields optional):
  {"status": 429, "retry_after": "1", "retry_after_ms": 1500,
   "error_type": "rate_limit_error", "message": "slow down",
   "delay_ms": 2000,                      # sleep before answering
   "body": "raw text",                    # send this body verbatim
   "echo_key": true,                      # error body quoting the API key
   "reply": {"text": "...", "tool_calls": [{"name": "t", "arguments": {}}],
             # OpenAI: "raw_arguments": "text" sends that argument string
             "stop": "end_turn|tool_use|max_tokens",
             "usage": {"input_tokens": 10, "output_tokens": 5,
                       "cached_tokens": 2,          # read from the cache
                       "cache_write_tokens": 3,     # Anthropic: written, 5m
                       "cache_write_1h_tokens": 1}}} # written, 1h
  "quota": true                           # with status 429 (OpenAI) or 402
                                          # (Anthropic billing_error): the
                                          # provider's quota/billing body
  reply.stop may be any provider word: Anthropic end_turn, max_tokens,
  stop_sequence, tool_use, pause_turn, refusal,
  model_context_window_exceeded; OpenAI stop, length, tool_calls,
  content_filter (end_turn/tool_use/max_tokens are translated for OpenAI).
  reply.refusal (OpenAI): message.refusal text, content null.
  "context_overflow": true                # 400 prompt too long (Anthropic
                                          # invalid_request_error "prompt is
                                          # too long", OpenAI code
                                          # context_length_exceeded)
Prompt caching, as the references describe it: an Anthropic request may
mark up to 4 blocks (tools, system, message content) with cache_control
{"type": "ephemeral", "ttl": "5m"|"1h"} (1h marks before 5m ones); a prefix
ending at a mark is written to the lane's cache, and a later request whose
prefix up to a mark — or up to a block at most 20 before it — matches a
written one reads it: usage reports input_tokens (uncached part),
cache_creation_input_tokens, cache_read_input_tokens and cache_creation
{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}. Prefixes under
--cache-min tokens (default 1024) are not cached. OpenAI caches message
prefixes of >= 1024 tokens by itself, in steps of 128, and reports
usage.prompt_tokens_details.cached_tokens. Tokens are estimated as JSON
bytes / 4. (Explicit reply.usage overrides all of this.)
Parameters are range checked as the APIs document: temperature 0..1 on the
Messages API, 0..2 on Chat Completions. Anthropic text blocks must contain
non-whitespace text, and a final assistant turn must not end in
whitespace.
A status >= 400 sends that provider's error body shape. --key makes every
request without that key fail with 401 (authentication error), as the real
APIs do. Requests are validated like the real APIs (required headers and
fields, tool results answering the previous turn's tool calls); a malformed
request gets 400 invalid_request_error.
"""
import argparse
import itertools
import json
import random
import socket
import string
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.RLock()
LANES = {}
IDS = itertools.count(1)
API_KEY = None
CACHE_MIN = 1024


def lane(name):
    with LOCK:
        if name not in LANES:
            LANES[name] = {"queue": [], "log": [],
                           "default": {"reply": {"text": "ok"}}}
        return LANES[name]


def rand_id(n=24):
    return "".join(random.choice(string.ascii_letters + string.digits)
                   for _ in range(n))


class BadRequest(Exception):
    pass


# ---- request validation (what the real APIs reject) -------------------------

def check_cache_control(where, cc, seen):
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
        raise BadRequest(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = cc.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise BadRequest(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    if ttl == "1h" and "5m" in seen:
        raise BadRequest("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block")
    seen.append(ttl)


def check_anthropic(req):
    if not isinstance(req, dict):
        raise BadRequest("body must be a JSON object")
    for f in ("model", "max_tokens", "messages"):
        if f not in req:
            raise BadRequest(f"{f}: Field required")
    t = req.get("temperature")
    if t is not None and (not isinstance(t, (int, float)) or not 0 <= t <= 1):
        raise BadRequest("temperature: Input should be less than or equal to 1")
    # cache order: tools, then system, then messages
    seen = []
    for k, tl in enumerate(req.get("tools", [])):
        if "cache_control" in tl:
            check_cache_control(f"tools.{k}", tl["cache_control"], seen)
    if isinstance(req.get("system"), list):
        for k, b in enumerate(req["system"]):
            if b.get("type") != "text" or not isinstance(b.get("text"), str):
                raise BadRequest(f"system.{k}: text block required")
            if not b["text"].strip():
                raise BadRequest("system: text content blocks must contain non-whitespace text")
            if "cache_control" in b:
                check_cache_control(f"system.{k}", b["cache_control"], seen)
    for i, m in enumerate(req.get("messages") or []):
        for j, b in enumerate(m.get("content") if isinstance(m.get("content"), list) else []):
            if isinstance(b, dict) and "cache_control" in b:
                check_cache_control(f"messages.{i}.content.{j}", b["cache_control"], seen)
    if len(seen) > 4:
        raise BadRequest(f"A maximum of 4 blocks with cache_control may be provided. Found {len(seen)}.")
    if not isinstance(req["max_tokens"], int) or req["max_tokens"] < 1:
        raise BadRequest("max_tokens: must be a positive integer")
    msgs = req["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages: at least one message is required")
    if "system" in req and not isinstance(req["system"], (str, list)):
        raise BadRequest("system: must be a string")
    prev_role, prev_tool_ids = None, set()
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise BadRequest("messages: first message must use the \"user\" role")
        if role == prev_role:
            raise BadRequest("messages: roles must alternate between \"user\" and \"assistant\"")
        content = m.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = content
        else:
            raise BadRequest(f"messages.{i}.content: Input should be a valid list")
        tool_ids = set()
        answered = set()
        for j, b in enumerate(blocks):
            t = b.get("type")
            if t == "text":
                if not isinstance(b.get("text"), str):
                    raise BadRequest(f"messages.{i}.content.{j}.text: Field required")
                if not b["text"]:
                    raise BadRequest("messages: text content blocks must be non-empty")
                if not b["text"].strip():
                    raise BadRequest(f"messages.{i}.content.{j}: text content blocks must contain non-whitespace text")
            elif t == "tool_use":
                if role != "assistant":
                    raise BadRequest(f"messages.{i}.content.{j}: tool_use only in assistant turns")
                if not (isinstance(b.get("id"), str) and isinstance(b.get("name"), str)
                        and isinstance(b.get("input"), dict)):
                    raise BadRequest(f"messages.{i}.content.{j}: tool_use needs id, name, input object")
                tool_ids.add(b["id"])
            elif t == "tool_result":
                if role != "user":
                    raise BadRequest(f"messages.{i}.content.{j}: tool_result only in user turns")
                tid = b.get("tool_use_id")
                if tid not in prev_tool_ids:
                    raise BadRequest(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")
                if "is_error" in b and not isinstance(b["is_error"], bool):
                    raise BadRequest(f"messages.{i}.content.{j}.is_error: Input should be a valid boolean")
                if not isinstance(b.get("content", ""), (str, list)):
                    raise BadRequest(f"messages.{i}.content.{j}.content: invalid")
                answered.add(tid)
            else:
                raise BadRequest(f"messages.{i}.content.{j}.type: unknown block type {t!r}")
        if role == "user" and prev_tool_ids and answered != prev_tool_ids:
            raise BadRequest(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {sorted(prev_tool_ids - answered)}")
        prev_role, prev_tool_ids = role, tool_ids
    last = msgs[-1]
    if last.get("role") == "assistant":
        lc = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        if lc and lc[-1].get("type") == "text" and lc[-1]["text"] != lc[-1]["text"].rstrip():
            raise BadRequest("messages: final assistant content cannot end with trailing whitespace")
    for k, t in enumerate(req.get("tools", [])):
        if not (isinstance(t.get("name"), str) and isinstance(t.get("input_schema"), dict)):
            raise BadRequest(f"tools.{k}: name and input_schema are required")


def check_openai(req):
    if not isinstance(req, dict):
        raise BadRequest("body must be a JSON object")
    for f in ("model", "messages"):
        if f not in req:
            raise BadRequest(f"Missing required parameter: '{f}'.")
    msgs = req["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("Invalid 'messages': empty array.")
    t = req.get("temperature")
    if t is not None and (not isinstance(t, (int, float)) or not 0 <= t <= 2):
        raise BadRequest(f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {t} instead.")
    pending = set()
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise BadRequest(f"Invalid value for 'messages[{i}].role'.")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                raise BadRequest(f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{i}])")
            if not isinstance(m.get("content"), str):
                raise BadRequest(f"Invalid 'messages[{i}].content': expected a string.")
            pending.discard(tid)
            continue
        if pending:
            raise BadRequest(f"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(sorted(pending))}")
        if role == "assistant":
            for k, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function") or {}
                if tc.get("type") != "function" or not isinstance(tc.get("id"), str) \
                        or not isinstance(fn.get("name"), str) \
                        or not isinstance(fn.get("arguments"), str):
                    raise BadRequest(f"Invalid 'messages[{i}].tool_calls[{k}]'.")
                # arguments are the model's own text, sent back as it
                # came (it need not be valid JSON)
                pending.add(tc["id"])
            if m.get("content") is None and not m.get("tool_calls"):
                raise BadRequest(f"Invalid 'messages[{i}]': content or tool_calls required.")
        elif not isinstance(m.get("content"), str):
            raise BadRequest(f"Invalid 'messages[{i}].content': expected a string.")
    if pending:
        raise BadRequest("tool_call_ids without response messages: " + ", ".join(sorted(pending)))
    for k, t in enumerate(req.get("tools", [])):
        fn = t.get("function") or {}
        if t.get("type") != "function" or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("parameters", {}), dict):
            raise BadRequest(f"Invalid 'tools[{k}]'.")


# ---- responses ----------------------------------------------------------------

def usage_of(req_bytes, reply):
    u = reply.get("usage") or {}
    inp = u.get("input_tokens", max(1, req_bytes // 4))
    out = u.get("output_tokens", max(1, len(json.dumps(reply)) // 4))
    return inp, out, u.get("cached_tokens", 0)


def toks(obj):
    return len(json.dumps(obj, sort_keys=True)) // 4


def anthropic_blocks(req):
    """The request as the cache sees it: blocks in cache order (tools,
    system, message content), each with its cache_control or None."""
    out = []
    for t in req.get("tools", []):
        out.append((t, t.get("cache_control")))
    sysv = req.get("system")
    if isinstance(sysv, str):
        out.append(({"type": "text", "text": sysv}, None))
    elif isinstance(sysv, list):
        for b in sysv:
            out.append((b, b.get("cache_control")))
    for m in req.get("messages", []):
        c = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for b in c:
            out.append(({"role": m["role"], "b": b}, b.get("cache_control") if isinstance(b, dict) else None))
    return out


def strip_cc(o):
    if isinstance(o, dict):
        return {k: strip_cc(v) for k, v in o.items() if k != "cache_control"}
    if isinstance(o, list):
        return [strip_cc(v) for v in o]
    return o


def anthropic_cache(ln, req, total):
    """(uncached input, written 5m, written 1h, read) for the request."""
    blocks = anthropic_blocks(req)
    keys, size, acc = [], [], 0
    for b, _ in blocks:
        acc += toks(strip_cc(b))
        keys.append(hash(json.dumps(strip_cc([x for x, _ in blocks[:len(keys) + 1]]), sort_keys=True)))
        size.append(acc)
    cache = ln.setdefault("cache", {})
    marks = [(i, cc.get("ttl", "5m")) for i, (_, cc) in enumerate(blocks) if cc]
    read = 0
    for i, _ in marks:
        for j in range(i, max(-1, i - 21), -1):
            if keys[j] in cache:
                read = max(read, size[j])
                break
    w5 = w1 = 0
    top = read
    for i, ttl in marks:
        if size[i] < CACHE_MIN or keys[i] in cache:
            continue
        cache[keys[i]] = ttl
        if size[i] > top:
            if ttl == "1h":
                w1 += size[i] - top
            else:
                w5 += size[i] - top
            top = size[i]
    total = max(total, top)
    return total - top, w5, w1, read


def openai_cache(ln, req, total):
    msgs = req.get("messages", [])
    cache = ln.setdefault("ocache", set())
    best, acc = 0, 0
    for k in range(len(msgs)):
        acc += toks(msgs[k])
        key = hash(json.dumps(msgs[:k + 1], sort_keys=True))
        if key in cache:
            best = acc
        if acc >= 1024:
            cache.add(key)
    best = min(best, total)
    return (best // 128) * 128 if best >= 1024 else 0


def anthropic_reply(req, reply, req_bytes, ln=None):
    content = []
    if reply.get("text"):
        content.append({"type": "text", "text": reply["text"]})
    for tc in reply.get("tool_calls", []):
        content.append({"type": "tool_use", "id": "toolu_01" + rand_id(22),
                        "name": tc["name"], "input": tc.get("arguments", {})})
    stop = reply.get("stop") or ("tool_use" if reply.get("tool_calls") else "end_turn")
    inp, out, cached = usage_of(req_bytes, reply)
    u = reply.get("usage") or {}
    if "input_tokens" in u or ln is None:
        w5, w1 = u.get("cache_write_tokens", 0), u.get("cache_write_1h_tokens", 0)
        unc = inp - cached - w5 - w1
    else:
        unc, w5, w1, cached = anthropic_cache(ln, req, inp)
    return {"id": "msg_01" + rand_id(22), "type": "message", "role": "assistant",
            "model": req.get("model"), "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": unc,
                      "cache_creation_input_tokens": w5 + w1,
                      "cache_read_input_tokens": cached,
                      "cache_creation": {"ephemeral_5m_input_tokens": w5,
                                         "ephemeral_1h_input_tokens": w1},
                      "output_tokens": out}}


def openai_reply(req, reply, req_bytes, ln=None):
    msg = {"role": "assistant", "content": reply.get("text") or None,
           "refusal": reply.get("refusal")}
    if reply.get("tool_calls"):
        msg["tool_calls"] = [{"id": "call_" + rand_id(24), "type": "function",
                              "function": {"name": tc["name"],
                                           "arguments": tc["raw_arguments"] if "raw_arguments" in tc
                                           else json.dumps(tc.get("arguments", {}))}}
                             for tc in reply["tool_calls"]]
    stop = reply.get("stop")
    fin = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           None: "tool_calls" if reply.get("tool_calls") else "stop"}.get(stop, stop)
    inp, out, cached = usage_of(req_bytes, reply)
    if "input_tokens" not in (reply.get("usage") or {}) and ln is not None:
        cached = openai_cache(ln, req, inp)
    return {"id": "chatcmpl-" + rand_id(29), "object": "chat.completion",
            "created": int(time.time()), "model": req.get("model"),
            "choices": [{"index": 0, "message": msg, "logprobs": None,
                         "finish_reason": fin}],
            "usage": {"prompt_tokens": inp, "completion_tokens": out,
                      "total_tokens": inp + out,
                      "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                    "accepted_prediction_tokens": 0,
                                                    "rejected_prediction_tokens": 0}},
            "system_fingerprint": "fp_fake"}


ANTHROPIC_ERR = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error",
                 500: "api_error", 529: "overloaded_error"}
OPENAI_ERR = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
              429: ("requests", "rate_limit_exceeded"), 500: ("server_error", None),
              503: ("server_error", None)}


def error_body(kind, status, message, etype=None):
    if kind == "anthropic":
        return {"type": "error",
                "error": {"type": etype or ANTHROPIC_ERR.get(status, "api_error"),
                          "message": message}}
    t, code = OPENAI_ERR.get(status, ("server_error", None))
    return {"error": {"message": message, "type": etype or t, "param": None,
                      "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs
    server_version = "fakemodel/1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: without NODELAY,
        # Nagle + delayed ACK add 40 ms to every keep-alive response
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, status, obj=None, raw=None, headers=()):
        data = raw.encode() if raw is not None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_" + rand_id(20))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/_health":
            return self.send(200, raw="ok")
        if u.path == "/_requests":
            name = parse_qs(u.query).get("lane", [""])[0]
            with LOCK:
                log = list(lane(name)["log"])
            return self.send(200, log)
        self.send(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        u = urlparse(self.path)
        if u.path == "/_control":
            c = json.loads(body)
            ln = lane(c.get("lane", ""))
            with LOCK:
                if c.get("reset"):
                    ln["queue"].clear()
                    ln["log"].clear()
                    ln.pop("cache", None)
                    ln.pop("ocache", None)
                ln["queue"].extend(c.get("queue", []))
                if "default" in c:
                    ln["default"] = c["default"]
            return self.send(200, {"ok": True})
        if u.path.endswith("/v1/messages"):
            kind, name = "anthropic", u.path[:-len("/v1/messages")].strip("/")
        elif u.path.endswith("/v1/chat/completions"):
            kind, name = "openai", u.path[:-len("/v1/chat/completions")].strip("/")
        else:
            return self.send(404, {"error": "no such endpoint " + u.path})
        ln = lane(name)
        with LOCK:
            if len(ln["log"]) < 1000:
                ln["log"].append({"path": u.path, "peer": self.client_address[1],
                                  "headers": dict(self.headers),
                                  "body": body.decode("utf-8", "replace")})
            b = ln["queue"].pop(0) if ln["queue"] else ln["default"]
        if b.get("delay_ms"):
            time.sleep(b["delay_ms"] / 1000.0)
        if kind == "anthropic":
            key = self.headers.get("x-api-key")
            if self.headers.get("anthropic-version") != "2023-06-01":
                return self.send(400, error_body(kind, 400, "anthropic-version: header is required"))
        else:
            auth = self.headers.get("Authorization", "")
            key = auth[7:] if auth.startswith("Bearer ") else None
        if b.get("echo_key"):
            return self.send(401, error_body(kind, 401, f"Incorrect API key provided: {key}. You can find your API key at https://example.invalid."))
        if API_KEY is not None and key != API_KEY:
            msg = "invalid x-api-key" if kind == "anthropic" else "Incorrect API key provided."
            return self.send(401, error_body(kind, 401, msg))
        st = b.get("status", 200)
        hdrs = []
        if "retry_after" in b:
            hdrs.append(("retry-after", str(b["retry_after"])))
        if "retry_after_ms" in b:
            hdrs.append(("retry-after-ms", str(b["retry_after_ms"])))
        if "body" in b:
            return self.send(st, raw=b["body"], headers=hdrs)
        if st >= 400 and b.get("quota"):
            if kind == "openai":
                body_q = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                                    "type": "insufficient_quota", "param": None,
                                    "code": "insufficient_quota"}}
            else:
                body_q = error_body(kind, st, "Your credit balance is too low to access the Anthropic API.",
                                    "billing_error")
            return self.send(st, body_q, headers=hdrs)
        if st >= 400:
            return self.send(st, error_body(kind, st, b.get("message", "fake error %d" % st),
                                            b.get("error_type")), headers=hdrs)
        if b.get("context_overflow"):
            if kind == "openai":
                return self.send(400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
                                                 "type": "invalid_request_error", "param": "messages",
                                                 "code": "context_length_exceeded"}})
            return self.send(400, error_body(kind, 400, "prompt is too long: 210000 tokens > 200000 maximum"))
        try:
            req = json.loads(body)
            (check_anthropic if kind == "anthropic" else check_openai)(req)
        except (ValueError, BadRequest, AttributeError, TypeError) as e:
            return self.send(400, error_body(kind, 400, str(e)))
        reply = b.get("reply", {"text": "ok"})
        fn = anthropic_reply if kind == "anthropic" else openai_reply
        with LOCK:
            resp = fn(req, reply, len(body), ln)
        self.send(200, resp, headers=hdrs)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # a client that gave up (timeout tests) is expected, not an error
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    global API_KEY
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--key")
    ap.add_argument("--cache-min", type=int, default=1024)
    ap.add_argument("--scenario", help="JSON file: {lane: [behaviours]}")
    a = ap.parse_args()
    API_KEY = a.key
    global CACHE_MIN
    CACHE_MIN = a.cache_min
    if a.scenario:
        with open(a.scenario) as f:
            for name, q in json.load(f).items():
                lane(name)["queue"].extend(q)
    srv = Server(("127.0.0.1", a.port), Handler)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    print("READY", port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
