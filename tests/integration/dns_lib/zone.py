#!/usr/bin/env python3
"""A test zone on loopback, UDP and TCP: zone.py PORTFILE ZONE.json LOG.

ZONE.json: {"name": [["A"|"AAAA", "addr", ttl], ...]}; every other name
NXDOMAIN. Each query is logged ("udp|tcp NAME TYPE") so a test can tell
which names reached the upstream (a name a call may not resolve never
does). Plain RFC 1035 wire format, stdlib only."""
import json, socket, struct, sys, threading

port_file, zone_file, log_file = sys.argv[1:4]
zone = {k.lower().rstrip("."): v for k, v in json.load(open(zone_file)).items()}
log = open(log_file, "a", buffering=1)
TYPES = {1: "A", 28: "AAAA"}


def name_at(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            ptr = struct.unpack(">H", msg[off:off + 2])[0] & 0x3FFF
            rest, _ = name_at(msg, ptr)
            labels.append(rest)
            return ".".join(x for x in labels if x), off + 2
        off += 1
        if n == 0:
            return ".".join(labels), off
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def answer(msg, proto):
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    name, off = name_at(msg, 12)
    qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
    question = msg[12:off + 4]
    log.write("%s %s %s\n" % (proto, name.lower(), TYPES.get(qtype, qtype)))
    recs = zone.get(name.lower().rstrip("."))
    rcode = 0 if recs is not None else 3
    ans = b""
    n = 0
    for typ, addr, ttl in recs or []:
        if TYPES.get(qtype) != typ:
            continue
        fam = socket.AF_INET if typ == "A" else socket.AF_INET6
        data = socket.inet_pton(fam, addr)
        ans += struct.pack(">HHHIH", 0xC00C, qtype, 1, ttl, len(data)) + data
        n += 1
    hdr = struct.pack(">HHHHHH", qid, 0x8180 | (flags & 0x0100) | rcode, 1, n, 0, 0)
    return hdr + question + ans


u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
port = u.getsockname()[1]
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", port))
t.listen(16)


def udp():
    while True:
        msg, peer = u.recvfrom(4096)
        try:
            u.sendto(answer(msg, "udp"), peer)
        except Exception as e:  # a malformed query: no answer
            log.write("bad %r\n" % e)


def tcp_one(c):
    with c:
        while True:
            h = c.recv(2)
            if len(h) < 2:
                return
            ln = struct.unpack(">H", h)[0]
            msg = b""
            while len(msg) < ln:
                part = c.recv(ln - len(msg))
                if not part:
                    return
                msg += part
            a = answer(msg, "tcp")
            c.sendall(struct.pack(">H", len(a)) + a)


def tcp():
    while True:
        c, _ = t.accept()
        threading.Thread(target=tcp_one, args=(c,), daemon=True).start()


threading.Thread(target=udp, daemon=True).start()
with open(port_file + ".tmp", "w") as f:
    f.write(str(port))
import os
os.rename(port_file + ".tmp", port_file)
tcp()
