#!/usr/bin/env bash
# mode: audit for network.allow through `warden exec` (issue 2, item 5):
# what enforce mode denies is recorded and let through, in tiers 1 and 2;
# the same manifest in enforce mode is denied and recorded. Judged by a
# loopback listener the test starts (outside the sandbox): it must see the
# audited connection and must not see the enforced one.
. tests/lib.sh
tmp=$(mktemp -d /tmp/warden-audit.XXXXXX)
lpid=
trap '[ -n "$lpid" ] && kill "$lpid" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 0711 "$tmp"

# a listener that logs every accepted connection, on a free port
python3 - "$tmp/port" "$tmp/hits" <<'EOF' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, a = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("hit %s\n" % (a,))
    c.close()
EOF
lpid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port" 2>/dev/null)
[ -n "$port" ] || { fail audit-listener "the loopback listener did not start"; finish; }

manifest() { # tier mode
	cat <<EOF
name: audit_net_probe
description: connects to a loopback port the manifest does not allow
tier: $1
exec: ["/usr/bin/bash"]
timeout_ms: 10000
memory_mb: 128
pids: 16
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin"]}
side_effects: none
output: {max_bytes: 4096}
mode: $2
EOF
}

hits() { [ -f "$tmp/hits" ] && wc -l <"$tmp/hits" || echo 0; }

for tier in 1 2; do
	for mode in audit enforce; do
		manifest "$tier" "$mode" >"$tmp/m.yaml"
		n0=$(hits)
		out=$("$WARDEN" exec --policy "$tmp/m.yaml" --json -- /usr/bin/bash -c \
			"exec 3<>/dev/tcp/127.0.0.1/$port && echo connected" 2>/dev/null)
		sleep 0.3 # the listener logs after accept
		n1=$(hits)
		rec=$(printf '%s' "$out" | jq -c --arg t "127.0.0.1:$port" \
			'[.denials[] | select(.target == $t)] | first // empty')
		name=audit-t$tier-$mode
		expect_eq "$name-syscall" "$(printf '%s' "$rec" | jq -r .syscall)" connect
		if [ "$mode" = audit ]; then
			expect_eq "$name-connected" "$(printf '%s' "$out" | jq -r .stdout)" connected
			expect_eq "$name-listener-saw-it" "$((n1 - n0))" 1
			expect_eq "$name-verdict" "$(printf '%s' "$rec" | jq -r .verdict)" audited
		else
			expect_eq "$name-not-connected" "$(printf '%s' "$out" | jq -r .stdout)" ""
			expect_eq "$name-listener-saw-nothing" "$((n1 - n0))" 0
			expect_eq "$name-verdict" "$(printf '%s' "$rec" | jq -r .verdict)" denied
		fi
	done
done
finish
