#!/usr/bin/env python3
"""receiver.py PORT_FILE OUT: an Alertmanager webhook receiver on
127.0.0.1 (a free port, written to PORT_FILE). Each POST body (JSON) is
appended to OUT as one line; answers 200."""
import http.server
import json
import sys


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        try:
            line = json.dumps(json.loads(body), separators=(",", ":"))
        except ValueError:
            line = json.dumps({"invalid": body.decode("utf-8", "replace")})
        with open(sys.argv[2], "a", encoding="utf-8") as f:
            f.write(line + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w", encoding="utf-8") as f:
    f.write(str(srv.server_address[1]))
import os  # noqa: E402

os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
