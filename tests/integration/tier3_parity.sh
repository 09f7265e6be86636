#!/usr/bin/env bash
# Tier 3 (gVisor) holds the exec and syscall lines of its manifest as tiers
# 1-2 do, with network.allow: []. The attacks run INSIDE the sandbox
# (tests/helpers/netprobe); the verdict comes from OUTSIDE: a marker file
# on a host `write` path that only the forbidden program would create, and
# the denials warden recorded from the sentry's log.
. tests/lib.sh
set -u
if ! command -v runsc >/dev/null 2>&1 && [ -z "${WARDEN_RUNSC:-}" ]; then
	skip tier3_parity "runsc (gVisor) not installed"
	finish
fi
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
cp "$HELPERS/netprobe" "$T/netprobe"
cp "$HELPERS/netprobe" "$T/other" # readable, not in filesystem.exec
mkdir "$T/w" && chmod 777 "$T/w"
chmod 755 "$T/netprobe" "$T/other"
P=$T/netprobe
cat >"$T/m.yaml" <<Y
name: parity_t3
tier: 3
exec: ["$P"]
timeout_ms: 30000
memory_mb: 128
pids: 16
network: {allow: []}
filesystem: {read: ["$T/other"], write: ["$T/w"], exec: ["$P"]}
output: {max_bytes: 8192}
Y
run() { "$WARDEN" exec --policy "$T/m.yaml" --json -- "$P" "$@" >"$T/out.json" 2>"$T/err.txt"; }
field() { jq -r "$1" "$T/out.json" 2>/dev/null; }

# positive control: the allowed program runs and can leave a marker
run mark "$T/w/control"
if [ -e "$T/w/control" ] && [ "$(field .exit_code)" = 0 ]; then
	pass t3p/control-runs
else
	fail t3p/control-runs "exit $(field .exit_code) $(field .stdout) $(cat "$T/err.txt")"
fi

# a readable binary outside filesystem.exec
run exec "$T/other" mark "$T/w/outside"
[ ! -e "$T/w/outside" ] && pass t3p/exec-outside-not-run ||
	fail t3p/exec-outside-not-run "the marker exists: $(field .stdout)"
expect_match t3p/exec-outside-refused "$(field .stdout)" "exec: refused: Permission denied"

# write-then-exec: in /tmp, and in a write path
for d in /tmp "$T/w"; do
	n=$(basename "$d")
	run write-exec "$d/copy" mark "$T/w/wx-$n"
	[ ! -e "$T/w/wx-$n" ] && pass "t3p/write-exec-$n-not-run" ||
		fail "t3p/write-exec-$n-not-run" "the marker exists: $(field .stdout)"
	expect_match "t3p/write-exec-$n-refused" "$(field .stdout)" "create: succeeded.*exec: refused: Permission denied|exec: refused: Permission denied"
done

# an anonymous executable: a copy of the program in a memfd (on no noexec
# mount, and gVisor has no vm.memfd_noexec), run through /proc/self/fd/N;
# and execveat of a bare fd (AT_EMPTY_PATH), refused as in tier 1 (here on
# the allowed program itself: the rule, not the file, is what is judged)
run memfd-exec mark "$T/w/memfd"
[ ! -e "$T/w/memfd" ] && pass t3p/memfd-exec-not-run ||
	fail t3p/memfd-exec-not-run "the marker exists: $(field .stdout)"
expect_match t3p/memfd-create-refused "$(field .stdout)" "memfd_create: refused: Operation not permitted"
expect_match t3p/memfd-denial-recorded \
	"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" "gvisor memfd_create"
run fd-exec mark "$T/w/fdexec"
[ ! -e "$T/w/fdexec" ] && pass t3p/execveat-empty-path-not-run ||
	fail t3p/execveat-empty-path-not-run "the marker exists: $(field .stdout)"
expect_match t3p/execveat-empty-path-refused "$(field .stdout)" "execveat: refused: Operation not permitted"

# every syscall of the baseline deny list, by number (tests/helpers/probe
# deny-table, as exec_escape does for tiers 1-2): refused by the OCI
# seccomp profile with EPERM and recorded from the sentry's log; a call
# this gVisor does not implement at all answers ENOSYS (nothing to deny)
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
sed -e "s|parity_t3|parity_t3_table|" -e "s|$P|$T/probe|g" "$T/m.yaml" >"$T/mt.yaml"
BASELINE=$(sed -n '/wd_seccomp_baseline\[\] = {/,/NULL}/p' daemon/enforce/seccomp.c | grep -o '"[a-z_0-9]*"' | tr -d '"')
"$WARDEN" exec --policy "$T/mt.yaml" --json -- "$T/probe" deny-table $BASELINE >"$T/table.json" 2>"$T/err.txt"
table=$(jq -r .stdout "$T/table.json")
nb=$(printf '%s\n' $BASELINE | wc -l)
nsys=$(printf '%s\n' "$table" | grep -c '^sys ')
nok=$(printf '%s\n' "$table" | grep -cE '^sys \S+ -?[0-9]+: (refused errno (1|38)|not on this arch)')
neperm=$(printf '%s\n' "$table" | grep -c 'refused errno 1$')
expect_eq t3p/deny-table-all-tried "$nsys" "$nb"
if [ "$nok" = "$nb" ] && [ "$neperm" -ge $((nb * 3 / 4)) ]; then pass t3p/deny-table-refused
else fail t3p/deny-table-refused "$nok of $nb refused ($neperm EPERM): $(printf '%s\n' "$table" | grep -vE 'refused errno (1|38)|not on this arch' | head -3)"; fi
nrec=$(jq '[.denials[]? | select(.source == "gvisor")] | length' "$T/table.json")
[ "${nrec:-0}" -ge "$neperm" ] && pass t3p/deny-table-recorded ||
	fail t3p/deny-table-recorded "$nrec gvisor denials recorded for $neperm EPERM answers"

# the baseline deny list, with no syscalls.deny of the manifest's own
for a in unshare-user clone-newuser; do
	run "$a"
	expect_match "t3p/$a-refused" "$(field .stdout)" "refused: Operation not permitted"
	expect_match "t3p/$a-denial-recorded" \
		"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" \
		"gvisor ${a%%-*}"
done

# ICMP: ping sockets refused in the sentry too unless families lists icmp
# (inside gVisor a ping reaches only the sentry's loopback: the verdict is
# the denial warden recorded from the sentry)
for fam in 4 6; do
	run ping $fam
	expect_match "t3p/ping$fam-refused" "$(field .stdout)" "socket ping: refused: Operation not permitted"
	expect_match "t3p/ping$fam-denial-recorded" \
		"$(jq -r '.denials[]? | "\(.source) \(.syscall)"' "$T/out.json" | tr '\n' ';')" "gvisor socket"
done
finish
