#!/usr/bin/env bash
# The sandbox with BPF LSM: `warden exec` in tiers 1 and 2 arms the LSM
# hooks for the call (daemon/sandbox/native.c -> enforce/lsm.c) and the
# denials they make come back in the call's result with source bpf_lsm.
# Runs in the vmtest guest (hooks active) and on the host, where the hooks
# are unavailable and `require: [bpf_lsm]` must be refused instead.
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-vmlsm.XXXXXX)
chmod 755 "$T"
cp "$HELPERS/probe" "$T/probe"
chmod 755 "$T/probe"
P=$T/probe
cleanup() {
	[ -n "${VICTIM:-}" ] && kill "$VICTIM" 2>/dev/null
	[ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# json FIELD-EXPR: evaluate a python expression on the JSON in $OUT (d)
json() { printf '%s' "$OUT" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }
# lsm_denial KIND: the result holds a bpf_lsm denial of that kind
lsm_denial() { json "any(e.get('source')=='bpf_lsm' and e.get('kind')=='$1' for e in d['denials'])"; }

manifest() { # tier [require]
	local req=${2:-}
	cat >"$T/m$1$req.yaml" <<Y
name: vm_lsm_t$1
tier: $1
exec: ["$P"]
timeout_ms: 20000
memory_mb: 64
pids: 16
network: {allow: []}
filesystem: {read: ["$P"], write: [], exec: ["$P"]}
output: {max_bytes: 4096}
${req:+require: [$req]}
Y
	echo "$T/m$1$req.yaml"
}

active=$("$WARDEN" status --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
def walk(o):
    if isinstance(o, dict):
        if "hook" in o and "active" in o:
            yield o
        for v in o.values():
            yield from walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from walk(v)
hs = list(walk(d))
print(sum(1 for h in hs if h["active"]), len(hs))' 2>/dev/null)
n_active=${active% *}
n_hooks=${active#* }
if [ -z "$active" ] || [ "$n_hooks" = 0 ]; then
	fail lsm-status "warden status --json lists no BPF LSM hooks"
	finish
fi
pass lsm-status

python3 -c '
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open("'"$T"'/port", "w").write(str(s.getsockname()[1]))
time.sleep(600)' &
LPID=$!
sleep 300 &
VICTIM=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")

if [ "$n_active" != "$n_hooks" ]; then
	OUT=$("$WARDEN" exec --policy "$(manifest 1 bpf_lsm)" --json -- "$P" env 2>&1)
	rc=$?
	expect_eq lsm-require-refused "$rc" 125
	expect_match lsm-require-names-mechanism "$OUT" "bpf_lsm"
	skip lsm-sandbox "$n_active of $n_hooks BPF LSM hooks active on this kernel ($(uname -r)); the vmtest guest runs these"
	finish
fi

for tier in 1 2; do
	M=$(manifest $tier)
	OUT=$("$WARDEN" exec --policy "$M" --json -- "$P" env 2>/dev/null)
	code=$(json "d['exit_code']")
	if [ "$code" = 0 ]; then pass "t$tier/lsm-runs"; else
		fail "t$tier/lsm-runs" "exit '$code': $(printf '%s' "$OUT" | tr '\n' ' ' | head -c 500)"
	fi
	expect_match "t$tier/lsm-armed" "$(json "d['enforcement'].get('bpf_lsm','')")" '^(enforced|audit)'
	# connect: the LSM's socket_connect runs before cgroup/connect4
	OUT=$("$WARDEN" exec --policy "$M" --json -- "$P" connect4 127.0.0.1 "$PORT" 2>/dev/null)
	expect_eq "t$tier/lsm-connect-denied" "$(json "d['exit_code']")" 1
	expect_eq "t$tier/lsm-connect-recorded" "$(lsm_denial connect)" True
	# kill outside the call (Landlock has no signal scoping before ABI 6)
	if [ "$tier" = 1 ]; then
		OUT=$("$WARDEN" exec --policy "$M" --json -- "$P" kill "$VICTIM" 2>/dev/null)
		expect_eq "t$tier/lsm-kill-denied" "$(json "d['exit_code']")" 1
		kill -0 "$VICTIM" && pass "t$tier/lsm-victim-alive" || fail "t$tier/lsm-victim-alive" "victim died"
	fi
	OUT=$("$WARDEN" exec --policy "$(manifest $tier bpf_lsm)" --json -- "$P" env 2>&1)
	code=$(json "d['exit_code']")
	if [ "$code" = 0 ]; then pass "t$tier/lsm-require-accepted"; else
		fail "t$tier/lsm-require-accepted" "exit '$code': $(printf '%s' "$OUT" | tr '\n' ' ' | head -c 500)"
	fi
done

# names in network.allow with the LSM on: socket_connect runs before the
# cgroup redirect and must let port 53 through to it (a connected UDP
# query, as glibc sends, to any address), then the answer is reachable
echo "{\"svc.test\": [[\"A\", \"127.0.0.1\", 30]]}" >"$T/zone.json"
python3 tests/integration/dns_lib/zone.py "$T/zone.port" "$T/zone.json" /dev/null &
ZPID=$!
for _ in $(seq 100); do [ -s "$T/zone.port" ] && break; sleep 0.1; done
cat >"$T/names.yaml" <<Y
name: vm_names
tier: 1
timeout_ms: 30000
network: {allow: ["svc.test:$PORT"], allow_private: ["127.0.0.1/32"]}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin", "/lib64", "/usr/lib"]}
Y
OUT=$("$WARDEN" exec --json --dns-upstream "127.0.0.1:$(cat "$T/zone.port")" --policy "$T/names.yaml" \
	-- /usr/bin/python3 -c '
import socket, struct, sys
q = struct.pack(">HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"\x03svc\x04test\x00" + struct.pack(">HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
u.connect(("10.9.9.9", 53)); u.send(q); m = u.recv(512)
addr = socket.inet_ntoa(m[-4:])
c = socket.socket(); c.settimeout(5); c.connect((addr, int(sys.argv[1]))); print("reached", addr)' "$PORT" 2>/dev/null)
kill "$ZPID" 2>/dev/null
if [[ "$(json "d['stdout']")" =~ ^reached\ 127\.0\.0\.1 ]]; then
	pass lsm-names-resolved-and-reached
else
	fail lsm-names-resolved-and-reached "$(printf '%s' "$OUT" | tr '\n' ' ' | head -c 1500)"
fi
finish
