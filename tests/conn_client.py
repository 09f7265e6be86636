#!/usr/bin/env python3
"""A hostile (and a bursty) client of wardend's unix socket, for
tests/integration/daemon_conn.sh and tests/bench/bench_conn.sh.

  conn_client.py idle SOCK N HOLD_S       open N connections, send nothing
  conn_client.py slowloris SOCK N HOLD_S  N connections, a request byte a second
  conn_client.py burst SOCK N             N connects at once, each GET /healthz
  conn_client.py p99 SOCK N               N sequential GET /healthz: latency
  conn_client.py create SOCK N C AGENT    N POST /v1/runs, C at a time: runs/s
  conn_client.py paced SOCK N RATE AGENT  N POST /v1/runs at RATE a second
                                          (tasks p0..pN-1): created, runs/s

idle/slowloris write "ready" to stdout once every connect was tried, hold
the sockets HOLD_S seconds (reading whatever the daemon sends), then print
one JSON line: how many connected, were answered 503 (with the first
reason), were closed by the daemon, and when. burst prints {answered: n,
status: {...}, connect_errors: {...}}. --uid U drops to uid U first.
"""
import errno
import json
import os
import selectors
import socket
import sys
import threading
import time

REQ = b"GET /healthz HTTP/1.1\r\nHost: wardend\r\nX-Slow: " + b"a" * 64 + b"\r\n\r\n"


def connect_nb(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except BlockingIOError:
        # AF_UNIX: EAGAIN means the backlog is full (curl fails there)
        s.close()
        return None, "EAGAIN"
    except OSError as e:
        s.close()
        return None, errno.errorcode.get(e.errno, str(e.errno))
    return s, None


def hold(path, n, hold_s, slow):
    socks, errs = [], {}
    for _ in range(n):
        s, e = None, None
        for _ in range(200):  # the hostile client wants its sockets
            s, e = connect_nb(path)
            if e != "EAGAIN":
                break
            time.sleep(0.005)
        if s:
            socks.append(s)
        else:
            errs[e] = errs.get(e, 0) + 1
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    info = {}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
        info[s] = {"data": b"", "closed_at": None, "sent": 0}
    t0 = time.monotonic()
    next_byte = t0
    while time.monotonic() - t0 < hold_s:
        now = time.monotonic()
        if slow and now >= next_byte:
            next_byte = now + 1.0
            for s, st in info.items():
                if st["closed_at"] is None and st["sent"] < len(REQ):
                    try:
                        s.send(REQ[st["sent"]:st["sent"] + 1])
                        st["sent"] += 1
                    except OSError:
                        pass
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            st = info[s]
            try:
                d = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                d = b""
            if d:
                st["data"] += d
            else:
                st["closed_at"] = time.monotonic() - t0
                sel.unregister(s)
    refused = [st for st in info.values() if b" 503 " in st["data"][:20]]
    reason = None
    if refused:
        body = refused[0]["data"].split(b"\r\n\r\n", 1)[-1]
        try:
            reason = json.loads(body).get("error")
        except ValueError:
            reason = body.decode(errors="replace")
    closed = [st["closed_at"] for st in info.values() if st["closed_at"] is not None]
    out = {
        "connected": len(socks),
        "connect_errors": errs,
        "refused_503": len(refused),
        "reason": reason,
        "closed_by_daemon": len(closed),
        "open_at_end": len(socks) - len(closed),
        "last_close_s": round(max(closed), 2) if closed else None,
    }
    print(json.dumps(out), flush=True)
    for s in socks:
        s.close()


def one_request(path, results, errs, lock):
    s, e = connect_nb(path)
    if not s:
        with lock:
            errs[e] = errs.get(e, 0) + 1
        return
    s.setblocking(True)
    s.settimeout(20)
    status = "none"
    try:
        s.sendall(REQ)
        data = b""
        while b"\r\n\r\n" not in data:
            d = s.recv(4096)
            if not d:
                break
            data += d
        if data.startswith(b"HTTP/1."):
            status = data.split(b" ", 2)[1].decode()
    except OSError as ex:
        status = errno.errorcode.get(ex.errno, "error")
    finally:
        s.close()
    with lock:
        results[status] = results.get(status, 0) + 1


def burst(path, n):
    results, errs, lock = {}, {}, threading.Lock()
    go = threading.Event()

    def worker():
        go.wait()
        one_request(path, results, errs, lock)

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    print(json.dumps({"answered": results.get("200", 0), "status": results,
                      "connect_errors": errs}), flush=True)


def read_all(s):
    """Everything the daemon sends until it closes; closes s."""
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    s.close()
    return data


def p99(path, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")
        data = read_all(s)
        if b" 200 " not in data[:16]:
            print(json.dumps({"error": data[:80].decode(errors="replace")}))
            sys.exit(1)
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    print(json.dumps({"n": n, "p50_ms": round(lat[n // 2], 3),
                      "p99_ms": round(lat[min(n - 1, int(n * 0.99))], 3)}))


def post_run(path, agent, task):
    """POST /v1/runs {agent, task}: the HTTP status as text."""
    body = json.dumps({"agent": agent, "task": task}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    return read_all(s)[9:12].decode(errors="replace")


def create(path, n, conc, agent):
    lock = threading.Lock()
    left = [n]
    codes = {}

    def worker():
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            code = post_run(path, agent, "bench")
            with lock:
                codes[code] = codes.get(code, 0) + 1

    ts = [threading.Thread(target=worker) for _ in range(conc)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    print(json.dumps({"n": n, "seconds": round(dt, 3),
                      "created_per_s": round(codes.get("201", 0) / dt, 1),
                      "status": codes}))


def paced(path, n, rate, agent):
    t0, ok = time.monotonic(), 0
    for i in range(n):
        d = t0 + i / rate - time.monotonic()
        if d > 0:
            time.sleep(d)
        ok += post_run(path, agent, "p%d" % i) == "201"
    print(json.dumps({"n": n, "created": ok,
                      "per_s": round(ok / (time.monotonic() - t0), 1)}))


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "--uid":
        uid = int(a[1])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        a = a[2:]
    mode, path = a[0], a[1]
    if mode in ("idle", "slowloris"):
        hold(path, int(a[2]), float(a[3]), mode == "slowloris")
    elif mode == "burst":
        burst(path, int(a[2]))
    elif mode == "p99":
        p99(path, int(a[2]))
    elif mode == "create":
        create(path, int(a[2]), int(a[3]), a[4])
    elif mode == "paced":
        paced(path, int(a[2]), float(a[3]), a[4])
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
