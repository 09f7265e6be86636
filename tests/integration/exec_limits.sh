#!/usr/bin/env bash
# Resource limits, timeout, output caps, cleanup, audit mode, fail-closed.
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
P=$T/probe
trap 'rm -rf "$T"' EXIT
# A private runtime dir: leftovers are this test's own, whatever else runs.
export WARDEN_RUNTIME_DIR=$T/rt
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

manifest() { # name tier extra-yaml-lines...
	local n=$1 t=$2; shift 2
	{ echo "name: $n"; echo "tier: $t"; echo "exec: [\"$P\"]"
	  echo "filesystem: {read: [\"$T/probe\"], write: [], exec: [\"$T/probe\"]}"
	  for l in "$@"; do echo "$l"; done; } > "$T/$n.yaml"
	echo "$T/$n.yaml"
}

for tier in 1 2; do
	# timeout: every process killed, status timeout, exit 124
	M=$(manifest to$tier $tier "timeout_ms: 700")
	t0=$(date +%s%N)
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" sleep 30 2>/dev/null); rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	expect_eq "t$tier/timeout-exit-124" "$rc" 124
	expect_eq "t$tier/timeout-status" "$(printf '%s' "$out" | jget 'd["status"]')" timeout
	[ "$ms" -lt 10000 ] && pass "t$tier/timeout-prompt (${ms} ms)" || fail "t$tier/timeout-prompt" "${ms} ms"

	# a daemonised grandchild does not outlive the call
	M=$(manifest dz$tier $tier "timeout_ms: 5000")
	rm -f "$T/marker"
	marker=$T/marker
	[ "$tier" = 1 ] && marker=$T/marker
	"$WARDEN" exec --policy "$M" --json -- "$P" daemonize /tmp/marker 1 >/dev/null 2>&1
	sleep 2
	if pgrep -f "$P daemonize" >/dev/null; then fail "t$tier/daemonised-killed" "still running"; else pass "t$tier/daemonised-killed"; fi

	# fork flood held by pids.max; the host is unaffected
	M=$(manifest fb$tier $tier "timeout_ms: 5000" "pids: 16")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" forkbomb 2>/dev/null)
	n=$(printf '%s' "$out" | jget 'd["stdout"]' | grep -o 'forked [0-9]*' | awk '{print $2}')
	[ -n "$n" ] && [ "$n" -lt 16 ] && pass "t$tier/forkbomb-contained ($n forks)" || fail "t$tier/forkbomb-contained" "forked '$n'"
	pgrep -f "$P forkbomb" >/dev/null && fail "t$tier/forkbomb-cleaned" || pass "t$tier/forkbomb-cleaned"

	# memory flood -> oom
	M=$(manifest mem$tier $tier "timeout_ms: 10000" "memory_mb: 32")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" memhog 200 2>>"$T/stderr.log")
	expect_eq "t$tier/oom-status" "$(printf '%s' "$out" | jget 'd["status"]')" oom

	# output flood: capped, drained, flagged
	M=$(manifest of$tier $tier "output: {max_bytes: 4096}")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" outflood 10000000 2>/dev/null)
	expect_eq "t$tier/output-capped" "$(printf '%s' "$out" | jget 'len(d["stdout"])')" 4096
	expect_eq "t$tier/output-truncated" "$(printf '%s' "$out" | jget 'd["truncated"]')" True
	expect_eq "t$tier/output-exit-0" "$(printf '%s' "$out" | jget 'd["exit_code"]')" 0

	# audit mode: what enforce denies is recorded as audited and allowed
	M=$(manifest au$tier $tier "mode: audit")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" keyctl 2>/dev/null)
	expect_match "t$tier/audit-syscall-recorded" "$out" '"verdict": "audited"'
	expect_match "t$tier/audit-syscall-allowed" "$out" 'keyctl: (succeeded|refused: (Required key|No such|Key))'
	M=$(manifest en$tier $tier "mode: enforce")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" keyctl 2>/dev/null)
	expect_match "t$tier/enforce-syscall-denied" "$out" 'keyctl: refused: Operation not permitted'
done


# each constraint the other way: what the manifest allows works
mkdir -p "$T/out"; chown 65534:65534 "$T/out"
for tier in 1 2; do
	M=$(manifest al$tier $tier "memory_mb: 64" "pids: 16" "network: {families: [netlink]}" \
		"filesystem: {read: [\"$T/probe\", \"/usr\"], write: [\"$T/out\"], exec: [\"$T/probe\", \"/usr/bin/true\"]}")
	sed -i '/^filesystem: {read: \["[^"]*"\], write: \[\]/d' "$M"
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" memhog 16 2>/dev/null)
	expect_match "t$tier/memory-within-limit" "$out" '"status": "ok"'
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" socket netlink 2>/dev/null)
	expect_match "t$tier/family-allowed-by-manifest" "$out" 'socket: succeeded'
	rm -f "$T/out/w"
	"$WARDEN" exec --policy "$M" -- "$P" write "$T/out/w" >/dev/null 2>&1
	[ "$(cat "$T/out/w" 2>/dev/null)" = pwned ] && pass "t$tier/write-allowed-path" || fail "t$tier/write-allowed-path" "no file on host"
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" exec /usr/bin/true 2>/dev/null)
	expect_match "t$tier/exec-allowed-path" "$out" '"exit_code": 0'
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" read /usr/bin/true 2>/dev/null)
	expect_match "t$tier/read-allowed-path" "$out" '"exit_code": 0'

	# syscalls.deny adds to the baseline; without it the same call works
	M=$(manifest sd$tier $tier "syscalls: {deny: [userfaultfd, getpriority]}")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" getpriority 2>/dev/null)
	expect_match "t$tier/syscalls-deny-denied" "$out" 'getpriority: refused: Operation not permitted'
	expect_match "t$tier/syscalls-deny-recorded" "$out" '"syscall": "getpriority"'
	M=$(manifest sa$tier $tier)
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" getpriority 2>/dev/null)
	expect_match "t$tier/syscalls-default-allowed" "$out" 'getpriority: succeeded'
done

# nothing left behind: cgroups, call dirs, processes
left=$(find /sys/fs/cgroup -maxdepth 3 -path '*/warden/*' -type d -regex '.*/warden/[0-9a-f]\{16\}' 2>/dev/null | head -3)
[ -z "$left" ] && pass "cgroups-removed" || fail "cgroups-removed" "$left"
left=$(ls "$T/rt/calls" 2>/dev/null | head -3)
[ -z "$left" ] && pass "call-dirs-removed" || fail "call-dirs-removed" "$left"

# fail closed
M=$(manifest req 1 "require: [bpf_lsm]")
out=$("$WARDEN" exec --policy "$M" -- "$P" env 2>&1); rc=$?
if grep -q '^bpf' /sys/kernel/security/lsm 2>/dev/null; then
	skip "require-bpf-lsm-refused" "BPF LSM active on this kernel"
else
	expect_eq "require-bpf-lsm-refused-125" "$rc" 125
	expect_match "require-bpf-lsm-names-mechanism" "$out" 'bpf_lsm'
fi
printf 'name: bad\ntier: 1\ntimeout_mss: 5\n' > "$T/bad.yaml"
out=$("$WARDEN" exec --policy "$T/bad.yaml" -- /bin/true 2>&1); rc=$?
expect_eq "bad-manifest-125" "$rc" 125
expect_match "bad-manifest-file-line-col" "$out" "bad.yaml:3:1"
M=$(manifest ok 1)
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$WARDEN" exec --policy "$M" -- "$P" env 2>&1); rc=$?
expect_eq "non-root-without-daemon-refused" "$rc" 125
finish
