#!/usr/bin/env python3
"""Drive many runs through wardend's unix socket (tests and benches).

  flood.py runs SOCK AGENT COUNT [CONCURRENCY]
      COUNT runs of AGENT, CONCURRENCY at a time (each thread creates a run
      and waits for it to end); prints "ok N failed N other N seconds S".
  flood.py create SOCK AGENT COUNT [CONCURRENCY]
      COUNT runs of AGENT created, not waited for; prints "created N
      seconds S".
  flood.py hup PID LOG COUNT
      COUNT policy reloads by SIGHUP, each waited for in the daemon's log
      ("policy reloaded"); prints "reloads N seconds S".
"""
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time


class UConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("w", timeout=60)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(self.path)
        self.sock = s


def call(sock, method, path, body=None):
    for attempt in range(50):
        try:
            c = UConn(sock)
            c.request(method, path, body=json.dumps(body) if body else None,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, json.loads(data) if data else None
        except (ConnectionError, socket.timeout, OSError):
            time.sleep(0.05 * (attempt + 1))
    raise RuntimeError("daemon unreachable")


def runs(sock, agent, count, conc):
    lock = threading.Lock()
    left = [count]
    tally = {"ok": 0, "failed": 0, "other": 0}

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            st, d = call(sock, "POST", "/v1/runs", {"agent": agent, "task": "go"})
            if st not in (200, 201, 202) or not d or "run_id" not in d:
                with lock:
                    tally["other"] += 1
                continue
            rid = d["run_id"]
            while True:
                st, d = call(sock, "GET", "/v1/runs/" + rid)
                if d and d.get("state") == "done":
                    break
                time.sleep(0.01)
            k = d.get("status") if d.get("status") in ("ok", "failed") else "other"
            with lock:
                tally[k] += 1

    t0 = time.time()
    th = [threading.Thread(target=worker) for _ in range(conc)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    print("ok %d failed %d other %d seconds %.1f" %
          (tally["ok"], tally["failed"], tally["other"], time.time() - t0))


def create(sock, agent, count, conc):
    lock = threading.Lock()
    left, made = [count], [0]

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            st, d = call(sock, "POST", "/v1/runs", {"agent": agent, "task": "go"})
            if d and "run_id" in d:
                with lock:
                    made[0] += 1
    t0 = time.time()
    th = [threading.Thread(target=worker) for _ in range(conc)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    print("created %d seconds %.1f" % (made[0], time.time() - t0))


def hup(pid, log, count):
    f = open(log, "rb")
    f.seek(0, os.SEEK_END)
    seen = [0, b""]

    def reloads():
        chunk = seen[1] + f.read()
        lines = chunk.split(b"\n")
        seen[1] = lines.pop()  # a partial last line waits for its end
        seen[0] += sum(1 for x in lines if b"policy reloaded" in x)
        return seen[0]
    t0 = time.time()
    for i in range(1, count + 1):
        os.kill(pid, signal.SIGHUP)
        end = time.time() + 10
        while reloads() < i:
            if time.time() > end:
                print("reloads %d seconds %.1f (stuck)" % (i - 1, time.time() - t0))
                return
            time.sleep(0.001)
    print("reloads %d seconds %.1f" % (count, time.time() - t0))


if __name__ == "__main__":
    if sys.argv[1] == "runs":
        runs(sys.argv[2], sys.argv[3], int(sys.argv[4]),
             int(sys.argv[5]) if len(sys.argv) > 5 else 8)
    elif sys.argv[1] == "create":
        create(sys.argv[2], sys.argv[3], int(sys.argv[4]),
               int(sys.argv[5]) if len(sys.argv) > 5 else 8)
    elif sys.argv[1] == "hup":
        hup(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
