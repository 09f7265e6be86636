#!/usr/bin/env bash
# Tier 3 (gVisor) holds the exec and syscall lines of its manifest as tiers
# 1-2 do, with an empty network.allow and with one rule. The attacks run INSIDE the sandbox
# (tests/helpers/netprobe); the verdict comes from OUTSIDE: a marker file
# on a host `write` path that only the forbidden program would create, and
# the denials warden recorded from the sentry's log.
# Every probe runs twice, once per way a tier-3 call starts (checks
# t3p/none/... and t3p/allow/...): network.allow: [] (runsc
# --network=none), and network.allow: ["127.0.0.1:$PORT"], a host loopback
# listener of this test (the call's own netns and veth, runsc
# --network=sandbox, the host-side tc programs: sandbox/gvisor_net.c),
# reached once from inside as the positive control, judged by its accept
# log; another listener's port is denied.
. tests/lib.sh
set -u
if ! command -v runsc >/dev/null 2>&1 && [ -z "${WARDEN_RUNSC:-}" ]; then
	skip tier3_parity "runsc (gVisor) not installed"
	finish
fi
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
LPID=
trap '[ -z "$LPID" ] || kill "$LPID" 2>/dev/null; rm -rf "$T"' EXIT
cp "$HELPERS/netprobe" "$T/netprobe"
cp "$HELPERS/netprobe" "$T/other" # readable, not in filesystem.exec
mkdir "$T/w" && chmod 777 "$T/w"
chmod 755 "$T/netprobe" "$T/other"
P=$T/netprobe
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
BASELINE=$(sed -n '/wd_seccomp_baseline\[\] = {/,/NULL}/p' daemon/enforce/seccomp.c | grep -o '"[a-z_0-9]*"' | tr -d '"')
# two host loopback listeners on free ports: PORT is the one mode allow
# allows, PORT2 is never allowed; each logs its accepts to $T/acc.<port>
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
run() { "$WARDEN" exec --policy "$T/m.yaml" --json -- "$P" "$@" >"$T/out.json" 2>"$T/err.txt"; }
field() { jq -r "$1" "$T/out.json" 2>/dev/null; }
acc() { { wc -l <"$T/acc.$1"; } 2>/dev/null || echo 0; }

# probes MODE: every probe with the network of MODE (none or allow, above),
# its checks named t3p/MODE/... (N). The body is not indented: its
# heredocs are column-sensitive.
probes() {
local M=$1 N=t3p/$1/ NET
rm -f "$T"/w/* "$T"/acc.*
case $M in
none) NET='{allow: []}' ;;
allow) NET="{allow: [\"127.0.0.1:$PORT\"]}" ;;
esac
cat >"$T/m.yaml" <<Y
name: parity_t3
tier: 3
exec: ["$P"]
timeout_ms: 30000
memory_mb: 128
pids: 16
network: $NET
filesystem: {read: ["$T/other"], write: ["$T/w"], exec: ["$P"]}
output: {max_bytes: 8192}
Y
# positive control: the allowed program runs and can leave a marker
run mark "$T/w/control"
if [ -e "$T/w/control" ] && [ "$(field .exit_code)" = 0 ]; then
	pass "${N}control-runs"
else
	fail "${N}control-runs" "exit $(field .exit_code) $(field .stdout) $(cat "$T/err.txt")"
fi

# a readable binary outside filesystem.exec
run exec "$T/other" mark "$T/w/outside"
[ ! -e "$T/w/outside" ] && pass "${N}exec-outside-not-run" ||
	fail "${N}exec-outside-not-run" "the marker exists: $(field .stdout)"
expect_match "${N}exec-outside-refused" "$(field .stdout)" "exec: refused: Permission denied"

# write-then-exec: in /tmp, and in a write path
for d in /tmp "$T/w"; do
	n=$(basename "$d")
	run write-exec "$d/copy" mark "$T/w/wx-$n"
	[ ! -e "$T/w/wx-$n" ] && pass "${N}write-exec-$n-not-run" ||
		fail "${N}write-exec-$n-not-run" "the marker exists: $(field .stdout)"
	expect_match "${N}write-exec-$n-refused" "$(field .stdout)" "create: succeeded.*exec: refused: Permission denied|exec: refused: Permission denied"
done

# an anonymous executable: a copy of the program in a memfd (on no noexec
# mount, and gVisor has no vm.memfd_noexec), run through /proc/self/fd/N;
# and execveat of a bare fd (AT_EMPTY_PATH), refused as in tier 1 (here on
# the allowed program itself: the rule, not the file, is what is judged)
run memfd-exec mark "$T/w/memfd"
[ ! -e "$T/w/memfd" ] && pass "${N}memfd-exec-not-run" ||
	fail "${N}memfd-exec-not-run" "the marker exists: $(field .stdout)"
expect_match "${N}memfd-create-refused" "$(field .stdout)" "memfd_create: refused: Operation not permitted"
expect_match "${N}memfd-denial-recorded" \
	"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" "gvisor memfd_create"
run fd-exec mark "$T/w/fdexec"
[ ! -e "$T/w/fdexec" ] && pass "${N}execveat-empty-path-not-run" ||
	fail "${N}execveat-empty-path-not-run" "the marker exists: $(field .stdout)"
expect_match "${N}execveat-empty-path-refused" "$(field .stdout)" "execveat: refused: Operation not permitted"

# every syscall of the baseline deny list, by number (tests/helpers/probe
# deny-table, as exec_escape does for tiers 1-2): refused by the OCI
# seccomp profile with EPERM and recorded from the sentry's log; a call
# this gVisor does not implement at all answers ENOSYS (nothing to deny)
sed -e "s|parity_t3|parity_t3_table|" -e "s|$P|$T/probe|g" "$T/m.yaml" >"$T/mt.yaml"
"$WARDEN" exec --policy "$T/mt.yaml" --json -- "$T/probe" deny-table $BASELINE >"$T/table.json" 2>"$T/err.txt"
table=$(jq -r .stdout "$T/table.json")
nb=$(printf '%s\n' $BASELINE | wc -l)
nsys=$(printf '%s\n' "$table" | grep -c '^sys ')
nok=$(printf '%s\n' "$table" | grep -cE '^sys \S+ -?[0-9]+: (refused errno (1|38)|not on this arch)')
neperm=$(printf '%s\n' "$table" | grep -c 'refused errno 1$')
expect_eq "${N}deny-table-all-tried" "$nsys" "$nb"
if [ "$nok" = "$nb" ] && [ "$neperm" -ge $((nb * 3 / 4)) ]; then pass "${N}deny-table-refused"
else fail "${N}deny-table-refused" "$nok of $nb refused ($neperm EPERM): $(printf '%s\n' "$table" | grep -vE 'refused errno (1|38)|not on this arch' | head -3)"; fi
nrec=$(jq '[.denials[]? | select(.source == "gvisor")] | length' "$T/table.json")
[ "${nrec:-0}" -ge "$neperm" ] && pass "${N}deny-table-recorded" ||
	fail "${N}deny-table-recorded" "$nrec gvisor denials recorded for $neperm EPERM answers"

# the baseline deny list, with no syscalls.deny of the manifest's own
for a in unshare-user clone-newuser; do
	run "$a"
	expect_match "${N}$a-refused" "$(field .stdout)" "refused: Operation not permitted"
	expect_match "${N}$a-denial-recorded" \
		"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" \
		"gvisor ${a%%-*}"
done

# ICMP: ping sockets refused in the sentry too unless families lists icmp
# (inside gVisor a ping reaches only the sentry's loopback: the verdict is
# the denial warden recorded from the sentry)
for fam in 4 6; do
	run ping $fam
	expect_match "${N}ping$fam-refused" "$(field .stdout)" "socket ping: refused: Operation not permitted"
	expect_match "${N}ping$fam-denial-recorded" \
		"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" "gvisor socket"
done

# TCP to the host's listeners: at 127.0.0.1 (the sandbox's own loopback in
# both modes) and at the nameserver of the sandbox's resolv.conf (mode
# allow only: its link's host end, standing for the node's 127.0.0.1).
# The expected difference: in mode allow the sandbox reaches PORT there,
# once (the positive control, judged by the listener); PORT2 is denied,
# and recorded by the host-side program. In mode none nothing is reached
# and there is no resolv.conf.
run connect-flood "$PORT" 1
lo=$(field .stdout)
run connect-flood "$PORT2" 1 nameserver
other=$(field .stdout)
den=$(jq -r '.denials[]? | "\(.source) \(.kind) \(.target)"' "$T/out.json" 2>/dev/null)
run connect-flood "$PORT" 1 nameserver
allowed=$(field .stdout)
sleep 0.3
expect_match "${N}own-loopback-not-host" "$lo" "0 connected"
if [ "$M" = none ]; then
	expect_eq "${N}listeners-not-reached" "$(acc "$PORT") $(acc "$PORT2")" "0 0"
	expect_match "${N}no-resolv-conf" "$allowed;$other" '^nameserver: refused: [^;]*\(errno 2\);nameserver: refused: [^;]*\(errno 2\)$'
else
	expect_eq "${N}allowed-reached-once" "$(acc "$PORT") $(acc "$PORT2")" "1 0"
	expect_match "${N}allowed-connected" "$allowed" "0 failed otherwise, 1 connected"
	expect_match "${N}other-port-not-connected" "$other" "0 connected"
	expect_match "${N}other-port-recorded" "$den" "^bpf connect 127\.0\.0\.1:$PORT2$"
fi
} # probes

for mode in none allow; do
	probes "$mode"
done
finish
