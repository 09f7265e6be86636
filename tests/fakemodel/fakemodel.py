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
             "stop": "end_turn|tool_use|max_tokens",
             "usage": {"input_tokens": 10, "output_tokens": 5,
                       "cached_tokens": 2}}}
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

def check_anthropic(req):
    if not isinstance(req, dict):
        raise BadRequest("body must be a JSON object")
    for f in ("model", "max_tokens", "messages"):
        if f not in req:
            raise BadRequest(f"{f}: Field required")
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
                json.loads(fn["arguments"])
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


def anthropic_reply(req, reply, req_bytes):
    content = []
    if reply.get("text"):
        content.append({"type": "text", "text": reply["text"]})
    for tc in reply.get("tool_calls", []):
        content.append({"type": "tool_use", "id": "toolu_01" + rand_id(22),
                        "name": tc["name"], "input": tc.get("arguments", {})})
    stop = reply.get("stop") or ("tool_use" if reply.get("tool_calls") else "end_turn")
    inp, out, cached = usage_of(req_bytes, reply)
    return {"id": "msg_01" + rand_id(22), "type": "message", "role": "assistant",
            "model": req.get("model"), "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": inp - cached,
                      "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached,
                      "output_tokens": out}}


def openai_reply(req, reply, req_bytes):
    msg = {"role": "assistant", "content": reply.get("text") or None,
           "refusal": None}
    if reply.get("tool_calls"):
        msg["tool_calls"] = [{"id": "call_" + rand_id(24), "type": "function",
                              "function": {"name": tc["name"],
                                           "arguments": json.dumps(tc.get("arguments", {}))}}
                             for tc in reply["tool_calls"]]
    stop = reply.get("stop")
    fin = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           None: "tool_calls" if reply.get("tool_calls") else "stop"}.get(stop, stop)
    inp, out, cached = usage_of(req_bytes, reply)
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
        if st >= 400:
            return self.send(st, error_body(kind, st, b.get("message", "fake error %d" % st),
                                            b.get("error_type")), headers=hdrs)
        try:
            req = json.loads(body)
            (check_anthropic if kind == "anthropic" else check_openai)(req)
        except (ValueError, BadRequest, AttributeError, TypeError) as e:
            return self.send(400, error_body(kind, 400, str(e)))
        reply = b.get("reply", {"text": "ok"})
        fn = anthropic_reply if kind == "anthropic" else openai_reply
        self.send(200, fn(req, reply, len(body)), headers=hdrs)


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
    ap.add_argument("--scenario", help="JSON file: {lane: [behaviours]}")
    a = ap.parse_args()
    API_KEY = a.key
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
