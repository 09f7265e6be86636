#!/usr/bin/env bash
# Escape attempts by a static helper INSIDE the sandbox, tiers 1 and 2.
# Each is judged by the helper's exit status AND by evidence outside the
# sandbox (files on the host, a listener's accept count, processes alive).
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
P=$T/probe
SECRET=$T/secret; echo topsecret > "$SECRET"; chmod 644 "$SECRET"
VICTIM_PIDS=()
# Landlock denial records need audit on; the test turns it on for its
# calls and leaves the node's audit state as it found it.
AUDIT_WAS=$("$HELPERS/auditstate" get 2>/dev/null)
cleanup() {
	[ -n "$AUDIT_WAS" ] && "$HELPERS/auditstate" set "$AUDIT_WAS" 2>/dev/null
	for p in "${VICTIM_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# A loopback listener that counts connections (evidence outside).
python3 - "$T" <<'PY' &
import socket, sys, os, threading
d = sys.argv[1]
def serve(fam, addr, port, typ):
    s = socket.socket(fam, typ)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    open(f"{d}/port-{fam.name}-{typ.name}", "w").write(str(s.getsockname()[1]))
    if typ == socket.SOCK_STREAM:
        s.listen(64)
        while True:
            c, _ = s.accept()
            open(f"{d}/hits", "a").write("x\n"); c.close()
    else:
        while True:
            s.recvfrom(100); open(f"{d}/hits", "a").write("u\n")
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        threading.Thread(target=serve, args=(fam, addr, 0, typ), daemon=True).start()
threading.Event().wait()
PY
LPID=$!
for i in $(seq 50); do [ -f "$T/port-AF_INET6-SOCK_DGRAM" ] && break; sleep 0.1; done
TCP4=$(cat "$T/port-AF_INET-SOCK_STREAM"); UDP4=$(cat "$T/port-AF_INET-SOCK_DGRAM")
TCP6=$(cat "$T/port-AF_INET6-SOCK_STREAM"); UDP6=$(cat "$T/port-AF_INET6-SOCK_DGRAM")
hits() { [ -f "$T/hits" ] && wc -l < "$T/hits" || echo 0; }

# A host process the tool must not be able to signal or trace.
sleep 300 & VICTIM=$!; VICTIM_PIDS+=("$VICTIM")

manifest() { # tier allow-json
	cat > "$T/m$1.yaml" <<Y
name: probe_t$1
tier: $1
exec: ["$P"]
timeout_ms: 8000
memory_mb: 64
pids: 16
network: {allow: $2}
filesystem: {read: ["$T/probe"], write: [], exec: ["$T/probe"]}
output: {max_bytes: 4096}
Y
	echo "$T/m$1.yaml"
}

for tier in ${ESCAPE_TIERS:-1 2}; do # vmtest runs tier 1 only (TCG is ~10x slower)
	M=$(manifest $tier "[]")
	run() { "$WARDEN" exec --policy "$M" --json -- "$P" "$@" 2>/dev/null; }
	denied() { # name action... : helper must fail (exit != 0) and leave no trace
		local n=$1; shift
		local out; out=$(run "$@")
		local code; code=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["exit_code"])' 2>/dev/null)
		if [ "$code" != "0" ] && [ -n "$code" ]; then pass "t$tier/$n"; else fail "t$tier/$n" "helper succeeded or no result: $(printf '%s' "$out" | head -c 400)"; fi
		LAST=$out
	}
	# landlock_call ACTION...: one call with WARDEN_LANDLOCK_AUDIT=enable,
	# result in LAST. Another fresh call (3 in all) only when the kernel
	# dropped audit records meanwhile: Landlock logs with GFP_ATOMIC, and
	# audit_log_start() (kernel/audit.c) drops such a record, counted in
	# audit_lost, while more than audit_backlog_limit records wait for
	# kauditd (a burst from other work on the node). Any other miss is
	# judged as it is.
	landlock_call() {
		local try lost0 lost1
		for try in 1 2 3; do
			lost0=$("$HELPERS/auditstate" lost)
			LAST=$(WARDEN_LANDLOCK_AUDIT=enable "$WARDEN" exec --policy "$M" --json -- "$P" "$@" 2>/dev/null)
			printf '%s' "$LAST" | grep -q '"source": "landlock"' && return
			lost1=$("$HELPERS/auditstate" lost)
			[ "$lost1" != "$lost0" ] || return
			echo "# t$tier: kernel dropped audit records during the call (audit_lost $lost0 -> $lost1): one more call"
		done
	}
	has_denial() { # name kind-regex
		if printf '%s' "$LAST" | python3 -c "import json,sys,re; d=json.load(sys.stdin)['denials']; sys.exit(0 if any(re.search('$2', e.get('kind','')+' '+e.get('syscall','')+' '+e.get('target','')) for e in d) else 1)"; then pass "t$tier/$1-recorded"; else fail "t$tier/$1-recorded" "no denial matching $2 in $(printf '%s' "$LAST" | head -c 600)"; fi
	}

	# -- network: every way to get a packet out
	h0=$(hits)
	denied tcp4 connect4 127.0.0.1 "$TCP4"; has_denial tcp4 "connect.*127.0.0.1:$TCP4"
	denied tcp6 connect6 ::1 "$TCP6"
	denied mapped6 connect6 ::ffff:127.0.0.1 "$TCP4"
	denied udp4 udp4 127.0.0.1 "$UDP4"
	denied udp6 udp6 ::1 "$UDP6"
	denied fastopen fastopen 127.0.0.1 "$TCP4"
	denied netlink socket netlink; has_denial netlink "socket"
	denied packet socket packet
	denied raw rawsock
	sleep 0.3
	expect_eq "t$tier/no-packet-reached-listener" "$(hits)" "$h0"

	# -- filesystem
	denied read-secret read "$SECRET"
	# Landlock's own record (audit, ABI 7): tier 1 meets the secret; in
	# tier 2 it is not even mounted, so the root directory is the probe.
	if [ "${LL_ABI:=$("$WARDEN" status --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["features"]["landlock"]["abi"])' 2>/dev/null || echo 0)}" -lt 7 ]; then
		skip "t$tier/landlock-read-recorded" "Landlock ABI $LL_ABI < 7 reports no denials (audit records came with ABI 7)"
	elif [ -z "$AUDIT_WAS" ]; then
		skip "t$tier/landlock-read-recorded" "kernel audit unavailable (AUDIT_GET failed: CONFIG_AUDIT off?); Landlock reports denials only through audit"
	else
		# The call turns audit on itself (WARDEN_LANDLOCK_AUDIT=enable);
		# its record must come whether audit was off or on before it.
		# First from off (switched off here whatever the node had; the
		# trap puts $AUDIT_WAS back), with T's pid steered to 4 digits:
		# an even count of digits was once decoded as hex ("pid=5347"
		# -> "SG"), which lost every record of such calls and looked
		# like "audit was off" on freshly booted nodes. Then with audit
		# on, at whatever pid comes.
		if [ "$tier" = 1 ]; then
			act=(read "$SECRET"); want="fs.read_file.*$SECRET"
		else
			act=(ls /); want="fs.read_dir.* /$"
		fi
		"$HELPERS/auditstate" set 0 || fail "t$tier/audit-off" "auditstate set 0 failed"
		{ echo 3999 > /proc/sys/kernel/ns_last_pid; } 2>/dev/null
		landlock_call "${act[@]}"
		has_denial landlock-read-from-audit-off "$want"
		landlock_call "${act[@]}"
		has_denial landlock-read "$want"
	fi
	denied read-shadow read /etc/shadow
	denied ls-root ls /
	denied write-etc write /etc/warden-pwned
	[ -e /etc/warden-pwned ] && fail "t$tier/etc-untouched" "file created" || pass "t$tier/etc-untouched"
	denied write-host-tmp write "$T/pwned"
	[ -e "$T/pwned" ] && fail "t$tier/host-tmp-untouched" || pass "t$tier/host-tmp-untouched"
	denied exec-sh exec /bin/sh -c true
	denied hardlink-secret hardlink /tmp "$SECRET"

	# -- processes and privileges
	denied kill-host kill "$VICTIM"
	kill -0 "$VICTIM" && pass "t$tier/victim-alive" || fail "t$tier/victim-alive"
	denied ptrace-host ptrace "$VICTIM"; has_denial ptrace-host "ptrace"
	denied setuid0 setuid0
	denied unshare-user unshare-user; has_denial unshare "unshare"
	denied clone-newuser clone-newuser; has_denial clone-newuser "clone"
	denied mount mount
	denied chroot chroot
	denied cgroup-escape cgroup-escape /sys/fs/cgroup/unified
	out=$(run caps)
	expect_match "t$tier/no-capabilities" "$out" 'CapEff:(\\t| )*0000000000000000'
	expect_match "t$tier/no-permitted-capabilities" "$out" 'CapPrm:(\\t| )*0000000000000000'
	expect_match "t$tier/not-root" "$out" '"exit_code": 0'

	# -- kernel attack surface
	denied bpf bpf; has_denial bpf "bpf"
	denied perf perf
	denied io_uring io_uring; has_denial io_uring "io_uring"
	denied keyctl keyctl
	denied userfaultfd userfaultfd
	out=$(run int80)
	expect_match "t$tier/int80-killed" "$out" '"exit_code": 1(59|37)'
	denied x32 x32

	# -- environment
	out=$(SECRET_TOKEN=hunter2 ANTHROPIC_API_KEY=sk-ant-x "$WARDEN" exec --policy "$M" --json -- "$P" env 2>/dev/null)
	if printf '%s' "$out" | grep -q 'hunter2\|sk-ant'; then fail "t$tier/env-clean" "caller env leaked"; else pass "t$tier/env-clean"; fi
done

# -- tier 2 sees only its own processes
M=$(manifest 2 "[]")
out=$("$WARDEN" exec --policy "$M" --json -- "$P" read /proc/self/cmdline 2>/dev/null)
expect_match "t2/own-procfs" "$out" '"exit_code": 0'
out=$("$WARDEN" exec --policy "$M" --json -- "$P" read "/proc/$VICTIM/cmdline" 2>/dev/null)
expect_match "t2/host-pids-invisible" "$out" '"exit_code": 1'

# -- an allowed destination works, and only that port
M=$(manifest 1 "[\"127.0.0.1:$TCP4\", \"[::1]:$TCP6\"]")
h0=$(hits)
out=$("$WARDEN" exec --policy "$M" --json -- "$P" connect4 127.0.0.1 "$TCP4" 2>/dev/null)
expect_match "t1/allowed-connect" "$out" '"exit_code": 0'
out=$("$WARDEN" exec --policy "$M" --json -- "$P" connect6 ::1 "$TCP6" 2>/dev/null)
expect_match "t1/allowed-connect6" "$out" '"exit_code": 0'
out=$("$WARDEN" exec --policy "$M" --json -- "$P" connect4 127.0.0.1 "$UDP4" 2>/dev/null)
expect_match "t1/other-port-denied" "$out" '"exit_code": 1'
sleep 0.3
expect_eq "t1/listener-saw-exactly-allowed" "$(( $(hits) - h0 ))" 2

finish
