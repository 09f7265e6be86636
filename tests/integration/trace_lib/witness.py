"""A loopback TCP listener that records every connection and the first
line sent on it (the witness that no request leaves a rendered page: it is
both the browser's proxy and the target of the URLs injected into the
trace). Usage: witness.py PORTFILE LOGFILE"""
import socket, sys, threading

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
log = open(sys.argv[2], "a", buffering=1)


def serve(c):
    c.settimeout(2)
    try:
        line = c.recv(4096).split(b"\r\n", 1)[0]
    except OSError:
        line = b""
    log.write("connection: %r\n" % line)
    try:
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        pass
    c.close()


while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
