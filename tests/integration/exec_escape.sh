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
# ... and one of nobody's (65534, outside any sandbox; the uid root
# callers' tools once ran as): see also exec_tenants.sh.
setpriv --reuid=65534 --regid=65534 --clear-groups sleep 301 & VICTIM65=$!; VICTIM_PIDS+=("$VICTIM65")

# The baseline deny list, from the source the filter is built from.
BASELINE=$(sed -n '/wd_seccomp_baseline\[\] = {/,/NULL}/p' daemon/enforce/seccomp.c | grep -o '"[a-z_0-9]*"' | tr -d '"')

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
	# record NAME SOURCE KIND SYSCALL NR ERRNO TARGET-REGEX: LAST has a
	# denial with exactly these fields (NR "-": no syscall_nr, the number
	# cannot be known), its target matching the anchored regex
	record() {
		local n=$1; shift
		if printf '%s' "$LAST" | python3 -c '
import json, re, sys
src, kind, sysc, nr, err, tgt = sys.argv[1:]
d = json.load(sys.stdin)["denials"]
def ok(e):
    return (e.get("source") == src and e.get("kind") == kind and
            e.get("syscall") == sysc and e.get("errno") == int(err) and
            (("syscall_nr" not in e) if nr == "-" else e.get("syscall_nr") == int(nr)) and
            re.fullmatch(tgt, e.get("target", "")) is not None and
            e.get("verdict") == "denied")
sys.exit(0 if any(ok(e) for e in d) else 1)' "$@"; then
			pass "t$tier/$n-record"
		else
			fail "t$tier/$n-record" "no denial {source $1 kind $2 syscall $3 nr $4 errno $5 target ~ $6} in $(printf '%s' "$LAST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["denials"])' 2>&1 | head -c 700)"
		fi
	}
	has_denial() { # name kind-regex
		if printf '%s' "$LAST" | python3 -c "import json,sys,re; d=json.load(sys.stdin)['denials']; sys.exit(0 if any(re.search('$2', e.get('kind','')+' '+e.get('syscall','')+' '+e.get('target','')) for e in d) else 1)"; then pass "t$tier/$1-recorded"; else fail "t$tier/$1-recorded" "no denial matching $2 in $(printf '%s' "$LAST" | head -c 600)"; fi
	}

	# -- network: every way to get a packet out
	h0=$(hits)
	denied tcp4 connect4 127.0.0.1 "$TCP4"; has_denial tcp4 "connect.*127.0.0.1:$TCP4"
	record tcp4 bpf connect connect 42 1 "127\.0\.0\.1:$TCP4"
	denied tcp6 connect6 ::1 "$TCP6"
	record tcp6 bpf connect connect 42 1 "\[::1\]:$TCP6"
	denied mapped6 connect6 ::ffff:127.0.0.1 "$TCP4"
	# the hook sees the v4 destination (in v4-mapped form either way)
	record mapped6 bpf connect connect 42 1 "(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):$TCP4"
	# a sendmsg hook runs for sendto, sendmsg and sendmmsg alike and
	# cannot tell which: the family's name, no number (events/event.h)
	denied udp4 udp4 127.0.0.1 "$UDP4"
	record udp4 bpf sendmsg sendto/sendmsg/sendmmsg - 1 "127\.0\.0\.1:$UDP4"
	denied udp6 udp6 ::1 "$UDP6"
	record udp6 bpf sendmsg sendto/sendmsg/sendmmsg - 1 "\[::1\]:$UDP6"
	denied fastopen fastopen 127.0.0.1 "$TCP4"
	denied netlink socket netlink; has_denial netlink "socket"
	denied packet socket packet
	denied raw rawsock
	# inet protocols and types no cgroup hook judges (SCTP's sendmsg,
	# MPTCP, UDP-Lite, SOCK_SEQPACKET): refused at socket() by seccomp,
	# whether or not this kernel has the protocol
	denied mptcp inetproto 4 1 262 127.0.0.1 "$TCP4"
	record mptcp seccomp syscall socket 41 1 "family=2 type=1 protocol=262"
	denied sctp inetproto 4 1 132 127.0.0.1 "$TCP4"
	record sctp seccomp syscall socket 41 1 "family=2 type=1 protocol=132"
	denied sctp-seqpacket inetproto 4 5 132 127.0.0.1 "$TCP4"
	record sctp-seqpacket seccomp syscall socket 41 1 "family=2 type=5 protocol=132"
	denied seqpacket6 inetproto 6 5 0 ::1 "$TCP6"
	record seqpacket6 seccomp syscall socket 41 1 "family=10 type=5 protocol=0"
	denied udplite inetproto 4 2 136 127.0.0.1 "$UDP4"
	record udplite seccomp syscall socket 41 1 "family=2 type=2 protocol=136"
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
			rec=(fs.read_file openat 257 13 "$SECRET")
		else
			act=(ls /); want="fs.read_dir.* /$"
			rec=(fs.read_dir openat 257 13 "/")
		fi
		"$HELPERS/auditstate" set 0 || fail "t$tier/audit-off" "auditstate set 0 failed"
		{ echo 3999 > /proc/sys/kernel/ns_last_pid; } 2>/dev/null
		landlock_call "${act[@]}"
		has_denial landlock-read-from-audit-off "$want"
		landlock_call "${act[@]}"
		has_denial landlock-read "$want"
		record landlock-read landlock "${rec[@]}"
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
	# same uid as the tool: kill(2) and a pidfd (pidfd_open needs only
	# the uid; pidfd_send_signal then goes through the same LSM hook)
	denied kill-same-uid kill "$VICTIM65"
	denied pidfd-kill-same-uid pidfd-kill "$VICTIM65"
	sleep 0.1
	kill -0 "$VICTIM65" && pass "t$tier/same-uid-victim-alive" || fail "t$tier/same-uid-victim-alive" "pid $VICTIM65 is gone"
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
	# every syscall of the baseline deny list, by number with harmless
	# arguments: EPERM, and a seccomp record with its number and name
	LAST=$(run deny-table $BASELINE)
	lines=$(printf '%s' "$LAST" | python3 -c '
import json, re, sys
tier = sys.argv[1]
d = json.load(sys.stdin)
recs = {(e.get("syscall_nr"), e.get("syscall")) for e in d["denials"]
        if e.get("source") == "seccomp" and e.get("kind") == "syscall" and
        e.get("errno") == 1 and e.get("verdict") == "denied"}
seen, notarch = set(), []
for l in d["stdout"].splitlines():
    m = re.match(r"sys (\S+) (-?\d+): (.*)", l) or re.match(r"sys (\S+)(): (.*)", l)
    if not m:
        continue
    name, nr, what = m.group(1), m.group(2), m.group(3)
    seen.add(name)
    if what == "not on this arch":
        notarch.append(name)
    elif what != "refused errno 1":
        print(f"FAIL t{tier}/deny-{name}: {l}")
    elif (int(nr), name) not in recs:
        print(f"FAIL t{tier}/deny-{name}: EPERM but no seccomp record with syscall_nr {nr} and name {name}")
    else:
        print(f"PASS t{tier}/deny-{name}")
for name in sys.argv[2:]:
    if name not in seen:
        print(f"FAIL t{tier}/deny-{name}: the helper never tried it (no line)")
if notarch:
    sep = chr(44)
    print(f"# t{tier}/deny-{sep.join(notarch)}: not system calls on this architecture (nothing to deny; the filter skips them too)")
' "$tier" $BASELINE 2>&1)
	printf '%s\n' "$lines"
	printf '%s\n' "$lines" | grep -q '^PASS' || fail "t$tier/deny-table" "no result: $(printf '%s' "$LAST" | head -c 400)"
	printf '%s\n' "$lines" | grep -q '^FAIL\|Traceback' && _fail=1
	expect_eq "t$tier/deny-table-count" "$(printf '%s\n' $BASELINE | wc -l)" "$(printf '%s' "$LAST" | python3 -c 'import json,sys; print(sum(l.startswith("sys ") for l in json.load(sys.stdin)["stdout"].splitlines()))')"

	# inotify: no Landlock right covers a watch, so without this a tool
	# could watch host directories its uid may read
	out=$(run deny-table inotify_add_watch)
	expect_match "t$tier/inotify-watch-refused" "$out" 'sys inotify_add_watch -?[0-9]+: refused errno 1'

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
