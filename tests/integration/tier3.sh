#!/usr/bin/env bash
# Tier 3 (gVisor) through `warden exec`: escape probes run inside the
# sandbox; every verdict is judged by evidence outside it (host files, a
# host listener's accept log, host cgroups, leftover processes and state).
# The sandbox core's probes run twice, once per way a tier-3 call starts
# (checks t3_none_* and t3_allow_*):
#   none   network.allow: [] -> runsc --network=none, only the sentry's
#          own loopback inside;
#   allow  network.allow: ["127.0.0.1:$PORT"] (a host loopback listener
#          of this test) -> the call's own netns and veth, runsc
#          --network=sandbox, the host-side tc programs (gvisor_net.c).
#          The listener is reached once (the positive control, judged by
#          its accept log); everything else is denied.
. "$(dirname "$0")/../lib.sh"
command -v jq >/dev/null || { skip tier3 "jq not installed"; finish; }
if ! command -v runsc >/dev/null; then
	skip tier3 "runsc not installed (Debian package runsc)"
	finish
fi
[ "$(id -u)" = 0 ] || { skip tier3 "needs root"; finish; }

T=$(mktemp -d /tmp/warden-t3.XXXXXX)
SECRET_DIR=$(mktemp -d /root/warden-t3-secret.XXXXXX)
MARK=wardent3mark$$
cleanup() {
	[ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null
	[ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null
	rm -rf "$T" "$SECRET_DIR" "/etc/$MARK" /usr/lib/python3/"$MARK"
}
trap cleanup EXIT

# two host loopback listeners on free ports the kernel picks (loopback is
# the only target, as everywhere): PORT is the one mode allow allows,
# PORT2 is never allowed; each logs its accepts to $T/acc.<port>
python3 -c "
import os, socket, threading
ps = []
for _ in range(2):
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(8); ps.append(s)
def loop(s):
    port = s.getsockname()[1]
    while True:
        c, a = s.accept(); open('$T/acc.%d' % port, 'a').write(str(a) + '\\n'); c.close()
for s in ps:
    threading.Thread(target=loop, args=(s,), daemon=True).start()
open('$T/ports.tmp', 'w').write(' '.join(str(s.getsockname()[1]) for s in ps))
os.rename('$T/ports.tmp', '$T/ready')
threading.Event().wait()
" &
LPID=$!
for _ in $(seq 50); do [ -e "$T/ready" ] && break; sleep 0.1; done
read -r PORT PORT2 <"$T/ready"

PYREAD='["/usr/lib/python3", "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc/ld.so.cache"]'
manifest() { # file name memory_mb pids timeout_ms [extra yaml]
	cat >"$1" <<EOF
name: $2
description: tier 3 test
tier: 3
exec: ["/usr/bin/python3", "-"]
input: stdin
timeout_ms: $5
memory_mb: $3
pids: $4
network: $NET
filesystem: {read: $PYREAD, write: [], exec: ["/usr/bin/python3"]}
output: {max_bytes: 4096}
${6:-}
EOF
}
py() { # code -> json result on stdout, exit code in $T/rc
	printf '%s' "$1" >"$T/code.py"
	"$WARDEN" exec --policy "${2:-$T/p.yaml}" --json --stdin "$T/code.py" >"$T/out.json" 2>"$T/err.txt"
	echo $? >"$T/rc"
	cat "$T/out.json"
}
field() { jq -r "$1" "$T/out.json" 2>/dev/null; }

# -- run_python computes a result ---------------------------------------------
printf '%s' "$(jq -n '{code: "print(sum(i*i for i in range(10)))"}')" >/dev/null
printf 'import statistics\nprint(statistics.mean([3, 5, 10]))\n' >"$T/rp.py"
"$WARDEN" exec --policy policy/tools/run_python.yaml --json --stdin "$T/rp.py" >"$T/out.json" 2>"$T/err.txt"
rc=$?
expect_eq t3_run_python_exit "$rc" 0
expect_eq t3_run_python_result "$(field .stdout)" "6"
expect_eq t3_run_python_tier "$(field .tier)" 3
expect_match t3_run_python_network "$(field .enforcement.network)" "none"

# the root's listing (below): the manifest's paths and the program's start
# closure. closure_expect PROG: what the sandbox should show of the host
# for PROG: the program, the files ld.so lists for it (ldd, at their
# canonical directory) and the cache; the listing inside must equal that
# plus the manifest's paths.
closure_expect() {
	{
		readlink -f "$1"
		ldd "$1" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]\(\/[^ ]*\) .*/\1/p' |
			while read -r p; do echo "$(readlink -f "$(dirname "$p")")/$(basename "$p")"; done
		echo /etc/ld.so.cache
	} | LC_ALL=C sort -u
}
LISTDIRS="/usr/bin /usr/sbin /usr/local/bin /usr/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /etc"
PYSTD=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
links_left() { ip -o link show 2>/dev/null | grep -c ' w3h' || true; }

# probes MODE: the sandbox core's probes with the network of MODE (none or
# allow, above); every check is named t3_MODE_... (N). The body is not
# indented: its heredocs and Python are column-sensitive.
probes() {
local M=$1 N=t3_$1_
case $M in
none) NET='{allow: []}' ;;
allow) NET="{allow: [\"127.0.0.1:$PORT\"]}" ;;
esac
manifest "$T/p.yaml" probe 256 32 20000

# -- identity: never root ---------------------------------------------------------
py 'import os; print(os.getuid(), os.getgid(), open("/proc/self/status").read().split("CapEff:")[1].split()[0])' >/dev/null
# the call's own uid/gid (sandbox/uidpool.h: the default range), as OCI
# process.user, and what --json reports
t3u=$(field .run_as_uid)
expect_eq "${N}identity" "$(field .stdout)" "$t3u $(field .run_as_gid) 0000000000000000"
if [ -n "$t3u" ] && [ "$t3u" -ge 2000000000 ] && [ "$t3u" -le 2000004095 ]; then pass "${N}identity_own_uid"; else fail "${N}identity_own_uid" "run_as_uid '$t3u' not in the default range"; fi

# -- files outside the manifest: unreadable ----------------------------------------
echo "topsecret-$MARK" >"$SECRET_DIR/secret"
chmod 644 "$SECRET_DIR/secret"
echo "hostpasswd-$MARK" >"$T/hostfile"
chmod 644 "$T/hostfile"
py "
for p in ['$SECRET_DIR/secret', '$T/hostfile', '/etc/shadow', '/etc/passwd', '/root/.bash_history']:
    try:
        print('READ', p, open(p).read()[:40])
    except OSError as e:
        print('DENIED', p, e.errno)
" >/dev/null
out=$(field .stdout)
if printf '%s' "$out" | grep -q "topsecret-$MARK\|hostpasswd-$MARK\|^READ"; then
	fail "${N}read_outside" "sandbox read a host file: $out"
else
	expect_match "${N}read_outside" "$out" "DENIED $SECRET_DIR/secret"
fi

# -- writes: nothing lands on the host ---------------------------------------------
py "
import os
for p in ['/etc/$MARK', '/usr/lib/python3/$MARK', '$T/$MARK', '/tmp/$MARK']:
    try:
        open(p, 'w').write('x'); print('WROTE', p)
    except OSError as e:
        print('DENIED', p, e.errno)
" >/dev/null
leaked=""
for p in "/etc/$MARK" "/usr/lib/python3/$MARK" "$T/$MARK" "/tmp/$MARK"; do
	[ -e "$p" ] && leaked="$leaked $p"
done
expect_eq "${N}write_outside_host_unchanged" "$leaked" ""
expect_match "${N}write_tmp_is_scratch" "$(field .stdout)" "WROTE /tmp/$MARK"

# -- egress: the host loopback listeners' accept logs are the verdict ------------------
# Inside, the probe tries PORT and PORT2 at 127.0.0.1 (the sandbox's own
# loopback in both modes: not egress) and, where its resolv.conf names a
# gateway (mode allow only: the link's host end, which stands for the
# node's 127.0.0.1, gvisor_net.c), at the gateway.
#   none:  neither listener sees anything but the host-side control.
#   allow: the expected difference: the sandbox reaches PORT at the
#          gateway, once (the positive control); PORT2 there is refused
#          (the host end answers the SYN with a RST) and recorded as the
#          host-side program's denial.
rm -f "$T"/acc.*
py "
import socket
try:
    gw = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]
except Exception:
    gw = None
print('GW', gw)
for host in ['127.0.0.1'] + ([gw] if gw else []):
    for port in [$PORT, $PORT2]:
        s = socket.socket(); s.settimeout(2)
        try:
            s.connect((host, port)); print('CONNECTED', host, port)
        except OSError as e:
            print('REFUSED', host, port, e.errno)
" >/dev/null
for p in "$PORT" "$PORT2"; do # the host-side controls, one each
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $p)).close()" 2>/dev/null
done
sleep 0.3
acc=$( (wc -l <"$T/acc.$PORT" || echo 0; wc -l <"$T/acc.$PORT2" || echo 0) 2>/dev/null | tr '\n' ' ')
out=$(field .stdout)
gw=$(printf '%s\n' "$out" | sed -n 's/^GW //p')
# what connected, but the sandbox's own loopback
conn=$(printf '%s\n' "$out" | grep '^CONNECTED' | grep -v '^CONNECTED 127\.0\.0\.1 ' | tr '\n' ';')
den=$(jq -r '.denials[]? | "\(.source) \(.kind) \(.target)"' "$T/out.json" 2>/dev/null)
if [ "$M" = none ]; then
	expect_eq "${N}no_egress_host_listeners" "$acc" "1 1 " # the controls only
	expect_eq "${N}no_egress_inside" "$gw|$conn" "None|"
else
	expect_eq "${N}egress_allowed_reached_once" "$acc" "2 1 " # + the sandbox's one
	expect_match "${N}egress_gateway_is_link" "$gw" '^169\.254\.[0-9]+\.[0-9]+$'
	expect_eq "${N}egress_inside_only_allowed" "$conn" "CONNECTED $gw $PORT;"
	expect_match "${N}egress_other_port_refused" "$out" "^REFUSED $gw $PORT2 111$"
	expect_match "${N}egress_other_port_recorded" "$den" "^bpf connect 127\.0\.0\.1:$PORT2$"
fi

# -- host processes invisible --------------------------------------------------------
python3 -c "import time; time.sleep(300)" "$MARK" &
SPID=$!
sleep 0.3
py "
import os
pids = [p for p in os.listdir('/proc') if p.isdigit()]
seen = any(b'$MARK' in open('/proc/%s/cmdline' % p, 'rb').read() for p in pids)
print(len(pids), 'SEEN' if seen else 'HIDDEN')
try:
    os.kill($SPID, 9); print('KILLED')
except OSError as e:
    print('NOKILL', e.errno)
" >/dev/null
expect_match "${N}host_procs_invisible" "$(field .stdout)" "^[0-9]+ HIDDEN"
if kill -0 "$SPID" 2>/dev/null; then pass "${N}host_proc_unkillable"; else fail "${N}host_proc_unkillable" "host process $SPID died"; fi
kill "$SPID" 2>/dev/null; SPID=

# -- fork flood contained by pids ------------------------------------------------------
# pids: 16 is RLIMIT_NPROC inside the sentry: fork fails with EAGAIN after
# 15 children and the sandbox lives to print the count and exit 0. If it
# does not live, the result must say the host pids bound killed it.
manifest "$T/ff.yaml" forkflood 256 16 20000
t0=$(date +%s)
py "
import os, time
n = 0
for i in range(2000):
    try:
        p = os.fork()
    except OSError as e:
        print('FORK_FAILED', n, e.errno, flush=True); break
    if p == 0:
        time.sleep(60); os._exit(0)
    n += 1
print('FORKED', n, flush=True)
" "$T/ff.yaml" >/dev/null
t1=$(date +%s)
ffid=$(field .call_id)
out=$(field .stdout)
forked=$(printf '%s' "$out" | sed -n 's/^FORKED \([0-9]*\).*/\1/p')
killed=$(jq -r '[.denials[]? | select(.kind == "pids") | .target] | join(" ")' "$T/out.json" 2>/dev/null)
if [ -n "$forked" ] && [ "$forked" -lt 16 ] && [ "$(field .status)" = ok ] &&
	printf '%s' "$out" | grep -q "^FORK_FAILED $forked 11"; then
	pass "${N}fork_flood_contained" # survived; EAGAIN inside
elif printf '%s' "$killed" | grep -q "pids.max.*killed" &&
	printf '%s' "$(field .enforcement.pids)" | grep -q "killed by the host pids bound"; then
	pass "${N}fork_flood_contained" # killed, and the result names the bound
else
	fail "${N}fork_flood_contained" "status $(field .status) exit $(cat "$T/rc") stdout '$out' pids '$killed'"
fi
# what this runsc does: RLIMIT_NPROC holds the flood inside the sentry
expect_match "${N}fork_flood_eagain_inside" "$out" "^FORK_FAILED 1[0-5] 11"
expect_eq "${N}fork_flood_sandbox_survives" "$(field .status) $(cat "$T/rc")" "ok 0"
expect_match "${N}fork_flood_limit_reported" "$(field .enforcement.pids)" "^16 tasks: RLIMIT_NPROC in the sentry"
[ $((t1 - t0)) -lt 30 ] && pass "${N}fork_flood_bounded" || fail "${N}fork_flood_bounded" "took $((t1 - t0)) s"
# nothing of the call left on the host: no process names its sandbox id,
# no cgroup leaf
left=$( (pgrep -af "wd-$ffid" || true; ls -d /sys/fs/cgroup/*/warden/"wd-$ffid" /sys/fs/cgroup/warden/"wd-$ffid" 2>/dev/null) | head -3)
expect_eq "${N}fork_flood_nothing_left" "${ffid:+id}$left" "id"

# -- cpus: 0.5 -> the call's host cgroup has quota/period, judged while it runs -------------
manifest "$T/cpu.yaml" cpu 128 32 20000 "cpus: 0.5"
CPUMARK=wardent3cpu$$$M
"$WARDEN" exec --policy "$T/cpu.yaml" --json -- /usr/bin/python3 -c "
import os, time
t = time.time()
os.fork()
while time.time() - t < 4: pass
print('$CPUMARK')" >"$T/cpu.json" 2>"$T/err.txt" &
CPID=$!
cpuid=""
for _ in $(seq 100); do # the call's bundle names our marker in its argv
	cpuid=$(grep -l "$CPUMARK" /run/warden/gvisor/wd-*/config.json 2>/dev/null | head -1 | sed 's|.*/\(wd-[0-9a-f]*\)/config.json|\1|')
	[ -n "$cpuid" ] && break
	sleep 0.05
done
sleep 1.5 # booted and spinning
cg=/nonexistent u0=0 quota="no cgroup found for the call ('$cpuid')"
if [ -n "$cpuid" ] && [ -d /sys/fs/cgroup/cpu/warden/"$cpuid" ]; then
	cg=/sys/fs/cgroup/cpu/warden/$cpuid
	quota="$(cat "$cg/cpu.cfs_quota_us") $(cat "$cg/cpu.cfs_period_us")"
elif [ -n "$cpuid" ] && [ -e /sys/fs/cgroup/warden/"$cpuid"/cpu.max ]; then
	cg=/sys/fs/cgroup/warden/$cpuid
	quota=$(cat "$cg/cpu.max")
fi
usage() { # ns of CPU the call's cgroup used
	if [ -e "$cg/cpu.max" ]; then
		echo $(($(sed -n 's/^usage_usec //p' "$cg/cpu.stat") * 1000))
	else
		cat /sys/fs/cgroup/cpuacct/warden/"$cpuid"/cpuacct.usage 2>/dev/null || echo 0
	fi
}
u0=$(usage) w0=$(date +%s%N)
sleep 1
u1=$(usage) w1=$(date +%s%N)
wait "$CPID"
expect_match "${N}cpu_quota_on_host_cgroup" "$quota" "^50000 100000$"
# two spinning processes held to half a core (slack for accounting)
permille=$(((u1 - u0) * 1000 / (w1 - w0)))
if [ "$permille" -gt 200 ] && [ "$permille" -le 650 ]; then
	pass "${N}cpu_quota_bites"
else
	fail "${N}cpu_quota_bites" "used $permille/1000 of a core"
fi
expect_eq "${N}cpu_call_ok" "$(jq -r .stdout "$T/cpu.json" 2>/dev/null | head -1)" "$CPUMARK"

# -- the program's own exit code passes through -----------------------------------------------
cat >"$T/sh.yaml" <<EOF
name: sh
description: tier 3 sh
tier: 3
exec: ["/usr/bin/dash"]
timeout_ms: 20000
memory_mb: 64
pids: 16
network: $NET
filesystem: {read: ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"], write: [], exec: ["/usr/bin/dash"]}
EOF
"$WARDEN" exec --policy "$T/sh.yaml" --json -- /bin/sh -c 'exit 3' >"$T/out.json" 2>"$T/err.txt"
expect_eq "${N}exit_code_passthrough" "$? $(field .status) $(field .exit_code)" "3 error 3"

# -- the root: the manifest's paths and the program's start closure, nothing else --
# In mode allow the root also holds /etc/resolv.conf (the expected
# difference): the call's own, naming its link's host end where its
# resolver listens (gvisor_net.c, oci.c), never the host's file.
etc_net=""
[ "$M" = allow ] && etc_net=/etc/resolv.conf
cat >"$T/shmin.yaml" <<EOF
name: shmin
description: tier 3 sh with nothing but /etc/hostname
tier: 3
exec: ["/bin/sh", "-c", "read h </etc/hostname; echo host=\$h; for d in $LISTDIRS; do for f in \$d/*; do [ -f \"\$f\" ] && echo \"\$f\"; done; done; [ -e /usr/bin/id ] || echo no-id; [ -e /etc/passwd ] || echo no-passwd"]
timeout_ms: 20000
memory_mb: 64
pids: 16
network: $NET
filesystem: {read: ["/etc/hostname"], write: [], exec: []}
EOF
"$WARDEN" exec --policy "$T/shmin.yaml" --json >"$T/out.json" 2>"$T/err.txt"
rc=$?
expect_eq "${N}min_sh_runs" "$rc $(field .status) $(field .stdout | head -1)" "0 ok host=$(cat /etc/hostname)"
out=$(field .stdout)
expect_match "${N}min_sh_no_id" "$out" "^no-id$"
expect_match "${N}min_sh_no_passwd" "$out" "^no-passwd$"
want=$( (closure_expect /bin/sh; echo /etc/hostname $etc_net | tr ' ' '\n') | LC_ALL=C sort -u | tr '\n' ' ')
got=$(printf '%s\n' "$out" | grep '^/' | LC_ALL=C sort -u | tr '\n' ' ')
expect_eq "${N}min_sh_only_closure_visible" "$got" "$want"

# python3 with only its stdlib under read: its libraries come from the closure
cat >"$T/pymin.yaml" <<EOF
name: pymin
description: tier 3 python with only its stdlib
tier: 3
exec: ["/usr/bin/python3", "-"]
input: stdin
timeout_ms: 20000
memory_mb: 256
pids: 32
network: $NET
filesystem: {read: ["$PYSTD"], write: [], exec: ["/usr/bin/python3"]}
output: {max_bytes: 8192}
EOF
py "
import os, json
print(json.dumps({'sum': sum(range(10))}))
for d in '$LISTDIRS'.split():
    for f in (sorted(os.listdir(d)) if os.path.isdir(d) else []):
        if os.path.isfile(os.path.join(d, f)): print(os.path.join(d, f))
print('ssl', os.path.exists('/usr/lib/x86_64-linux-gnu/libssl.so.3'))
print('resolv', open('/etc/resolv.conf').read().split() if os.path.exists('/etc/resolv.conf') else None)
" "$T/pymin.yaml" >/dev/null
expect_eq "${N}min_python_starts" "$(cat "$T/rc") $(field .stdout | head -1)" '0 {"sum": 45}'
expect_match "${N}min_python_no_other_libs" "$(field .stdout)" "^ssl False$"
want=$( (closure_expect "$(readlink -f /usr/bin/python3)"; [ -z "$etc_net" ] || echo "$etc_net") | LC_ALL=C sort -u | tr '\n' ' ')
got=$(field .stdout | grep '^/' | LC_ALL=C sort -u | tr '\n' ' ')
expect_eq "${N}min_python_only_closure_visible" "$got" "$want"
if [ "$M" = allow ]; then
	expect_match "${N}min_python_resolv_is_the_calls" "$(field .stdout)" "^resolv \['nameserver', '169\.254\.[0-9]+\.[0-9]+'\]$"
else
	expect_match "${N}min_python_no_resolv" "$(field .stdout)" "^resolv None$"
fi

# a static binary needs nothing: no loader, no libraries, no cache
cat >"$T/static.yaml" <<EOF
name: static
description: tier 3 static helper
tier: 3
exec: ["$HELPERS/probe"]
timeout_ms: 20000
memory_mb: 64
pids: 16
network: $NET
filesystem: {read: [], write: [], exec: ["$HELPERS/probe"]}
EOF
for f in /etc/ld.so.cache /lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu/libc.so.6; do
	"$WARDEN" exec --policy "$T/static.yaml" --json -- "$HELPERS/probe" read "$f" >"$T/out.json" 2>"$T/err.txt"
	rc=$?
	expect_match "${N}static_no_lib_binds_$(basename "$f")" "$rc $(field .stdout)" "^1 open: refused: .*errno 2"
done

# a program that is no x86_64 ELF is refused before any sandbox, naming it
head -c 100 "$(readlink -f /bin/sh)" >"$T/trunc"
chmod 755 "$T/trunc"
cat >"$T/trunc.yaml" <<EOF
name: trunc
description: tier 3 truncated program
tier: 3
exec: ["$T/trunc"]
timeout_ms: 20000
network: $NET
filesystem: {read: [], write: [], exec: ["$T/trunc"]}
EOF
"$WARDEN" exec --policy "$T/trunc.yaml" >/dev/null 2>"$T/err.txt"
expect_eq "${N}malformed_program_refused_exit" "$?" 125
expect_match "${N}malformed_program_refused_msg" "$(cat "$T/err.txt")" "$T/trunc.*truncated"

# -- memory flood -> oom ------------------------------------------------------------------
manifest "$T/mem.yaml" memflood 96 32 30000
py "
x = []
while True:
    x.append(bytearray(8 << 20))
" "$T/mem.yaml" >/dev/null
expect_eq "${N}oom_status" "$(field .status)" oom
expect_eq "${N}oom_exit" "$(cat "$T/rc")" 137

# -- timeout -------------------------------------------------------------------------------
manifest "$T/to.yaml" spin 128 32 1500
t0=$(date +%s%N)
py "while True: pass" "$T/to.yaml" >/dev/null
ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "${N}timeout_status" "$(field .status)" timeout
expect_eq "${N}timeout_exit" "$(cat "$T/rc")" 124
[ "$ms" -lt 6000 ] && pass "${N}timeout_prompt" || fail "${N}timeout_prompt" "took $ms ms"

# -- output cap --------------------------------------------------------------------------
py "import sys; sys.stdout.write('y' * 100000)" >/dev/null
expect_eq "${N}output_cap_len" "$(field '.stdout | length')" 4096
expect_eq "${N}output_truncated" "$(field .truncated)" true

# -- syscalls.deny -> EPERM inside + a gvisor denial event ----------------------------------
manifest "$T/sc.yaml" scdeny 128 32 20000 "syscalls: {deny: [ptrace]}"
py "
import ctypes, os
l = ctypes.CDLL(None, use_errno=True)
r = l.ptrace(0, 0, 0, 0)
print('ptrace', r, ctypes.get_errno())
" "$T/sc.yaml" >/dev/null
expect_match "${N}syscall_deny_eperm" "$(field .stdout)" "ptrace -1 1"
expect_match "${N}syscall_deny_event" "$(jq -c '.denials[] | select(.source == "gvisor")' "$T/out.json" 2>/dev/null)" '"syscall":"ptrace"'

# -- refusals: runsc missing, or starting no sandbox (in mode allow after
# the call's link is made: it goes with the refusal, t3_no_leftover_links)
printf 'print(1)' >"$T/one.py"
WARDEN_RUNSC=/nonexistent "$WARDEN" exec --policy "$T/p.yaml" --stdin "$T/one.py" >/dev/null 2>"$T/err.txt"
expect_eq "${N}runsc_missing_exit" "$?" 125
expect_match "${N}runsc_missing_msg" "$(cat "$T/err.txt")" "runsc.*/nonexistent"
env -u WARDEN_RUNSC PATH=/nonexistent-bin "$WARDEN" exec --policy "$T/p.yaml" --stdin "$T/one.py" >/dev/null 2>"$T/err.txt"
expect_eq "${N}runsc_not_on_path_exit" "$?" 125
expect_match "${N}runsc_not_on_path_msg" "$(cat "$T/err.txt")" "runsc.*not found"
# a runsc that runs but starts no sandbox is a refusal, whatever it exits
printf '#!/bin/sh\nexec %s --no-such-flag "$@"\n' "$(command -v runsc)" >"$T/badflag.sh"
chmod 755 "$T/badflag.sh"
for c in "false|/bin/false|exited 1 without booting a sandbox" \
	"true|/bin/true|exited 0 without booting a sandbox" \
	"bad_flag|$T/badflag.sh|exited 2 without booting a sandbox.*flag provided but not defined"; do
	IFS='|' read -r n r msg <<<"$c"
	WARDEN_RUNSC=$r "$WARDEN" exec --policy "$T/p.yaml" --json --stdin "$T/one.py" >"$T/out.json" 2>"$T/err.txt"
	expect_eq "${N}runsc_${n}_exit" "$? $(field .status)" "125 sandbox_error"
	expect_match "${N}runsc_${n}_msg" "$(cat "$T/err.txt")" "tier 3: runsc '$r' $msg"
done
} # probes

for mode in none allow; do
	probes "$mode"
done

# -- an allow-list beyond a node that does not forward is refused (sandbox/t3beyond.h) --
if [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 0 ]; then
	NET='{allow: ["198.51.100.1:80"]}'
	manifest "$T/net.yaml" net 128 32 20000
	py "print(1)" "$T/net.yaml" >/dev/null
	expect_eq t3_network_allow_refused_exit "$(cat "$T/rc")" 125
	expect_match t3_network_allow_refused_msg "$(cat "$T/err.txt")" "network.allow '198\.51\.100\.1:80': beyond this node, and this node does not forward IPv4"
else
	skip t3_network_allow_refused "this node forwards IPv4: a rule beyond it is routed (tier3_beyond.sh)"
fi

# -- nothing left behind ------------------------------------------------------------------------
left=$(ls -d /sys/fs/cgroup/*/warden/wd-* /run/warden/gvisor/wd-* 2>/dev/null | head -5)
expect_eq t3_no_leftover_cgroups_or_bundles "$left" ""
left=$(ls /run/warden/runsc 2>/dev/null | grep '^wd-' | head -3)
expect_eq t3_no_leftover_runsc_state "$left" ""
if pgrep -f "runsc.*--bundle=/run/warden/gvisor" >/dev/null; then
	fail t3_no_leftover_runsc "$(pgrep -af 'runsc.*--bundle=/run/warden/gvisor' | head -3)"
else
	pass t3_no_leftover_runsc
fi
# the calls' links (mode allow) went with them
# (the kernel deletes a call's pair with its netns, in the background)
for _ in $(seq 50); do [ "$(links_left)" = 0 ] && break; sleep 0.1; done
expect_eq t3_no_leftover_links "$(links_left)" 0
finish
