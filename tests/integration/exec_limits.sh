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
# call leaves in every hierarchy; those left by earlier tests are not ours
cg_leaves() { call_leaves /sys/fs/cgroup/*/warden /sys/fs/cgroup/warden; }
cg_before=$(cg_leaves)

manifest() { # name tier extra-yaml-lines...
	local n=$1 t=$2; shift 2
	{ echo "name: $n"; echo "tier: $t"; echo "exec: [\"$P\"]"
	  echo "filesystem: {read: [\"$T/probe\"], write: [], exec: [\"$T/probe\"]}"
	  for l in "$@"; do echo "$l"; done; } > "$T/$n.yaml"
	echo "$T/$n.yaml"
}

# cpu_limit PID: "QUOTA PERIOD PATH" of the cgroup that holds PID's cpu
# controller: a v1 hierarchy with "cpu" among its controllers (hybrid), else
# the v2 one (cpu.max).
cpu_limit() {
	local rel mnt
	rel=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' "/proc/$1/cgroup")
	if [ -n "$rel" ]; then
		mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ {print $2; exit}' /proc/mounts)
		echo "$(cat "$mnt$rel/cpu.cfs_quota_us") $(cat "$mnt$rel/cpu.cfs_period_us") $mnt$rel"
	else
		rel=$(awk -F: '$1 == "0" {print $3}' "/proc/$1/cgroup")
		mnt=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
		echo "$(cat "$mnt$rel/cpu.max") $mnt$rel"
	fi
}
# cgroups_of ID: the cgroup directories named ID (a call id) under any
# hierarchy's warden/
cgroups_of() { ls -d /sys/fs/cgroup/*/warden/"$1" 2>/dev/null; }

for tier in 1 2; do
	# timeout: every process killed, status timeout, exit 124
	M=$(manifest to$tier $tier "timeout_ms: 700")
	t0=$(date +%s%N)
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" sleep 30 2>/dev/null); rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	expect_eq "t$tier/timeout-exit-124" "$rc" 124
	expect_eq "t$tier/timeout-status" "$(printf '%s' "$out" | jget 'd["status"]')" timeout
	[ "$ms" -lt 10000 ] && pass "t$tier/timeout-prompt (${ms} ms)" || fail "t$tier/timeout-prompt" "${ms} ms"

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
	# the same cap on stderr, on its own (stdout stays empty)
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" errflood 10000000 2>/dev/null)
	expect_eq "t$tier/stderr-capped" "$(printf '%s' "$out" | jget 'len(d["stderr"])')" 4096
	expect_eq "t$tier/stderr-only-E" "$(printf '%s' "$out" | jget 'd["stderr"].strip("E")')" ""
	expect_eq "t$tier/stderr-stdout-empty" "$(printf '%s' "$out" | jget 'len(d["stdout"])')" 0
	expect_eq "t$tier/stderr-truncated" "$(printf '%s' "$out" | jget 'd["truncated"]')" True
	expect_eq "t$tier/stderr-exit-0" "$(printf '%s' "$out" | jget 'd["exit_code"]')" 0

	# cpus: 0.5 -> CFS quota 50000 per 100000 us period on the call's own
	# cgroup, read on the host while the call runs: the cpu controller's
	# hierarchy (v1 on a hybrid node, cpu.max on v2) from /proc/PID/cgroup
	M=$(manifest cpu$tier $tier "timeout_ms: 15000" "cpus: 0.5")
	tag=cpu-t$tier-$$
	"$WARDEN" exec --policy "$M" --json -- "$P" sleep 4 "$tag" >"$T/cpu$tier.json" 2>/dev/null &
	wpid=$!
	pid=
	for i in $(seq 100); do
		pid=$(pgrep -f "^$P sleep 4 $tag" | head -1)
		[ -n "$pid" ] && break
		sleep 0.05
	done
	if [ -z "$pid" ]; then
		fail "t$tier/cpus-quota" "the call's process never showed up"
	else
		got=$(cpu_limit "$pid")
		expect_eq "t$tier/cpus-quota" "${got% *}" "50000 100000"
		cgname=${got##*/}
	fi
	wait "$wpid"
	expect_eq "t$tier/cpus-call-ok" "$(jget 'd["status"]' <"$T/cpu$tier.json")" ok
	[ -n "$pid" ] && expect_eq "t$tier/cpus-cgroup-is-the-calls" "$cgname" "$(jget 'd["call_id"]' <"$T/cpu$tier.json")"

	# audit mode: what enforce denies is recorded as audited and allowed
	M=$(manifest au$tier $tier "mode: audit")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" keyctl 2>/dev/null)
	expect_match "t$tier/audit-syscall-recorded" "$out" '"verdict": "audited"'
	expect_match "t$tier/audit-syscall-allowed" "$out" 'keyctl: (succeeded|refused: (Required key|No such|Key))'
	M=$(manifest en$tier $tier "mode: enforce")
	out=$("$WARDEN" exec --policy "$M" --json -- "$P" keyctl 2>/dev/null)
	expect_match "t$tier/enforce-syscall-denied" "$out" 'keyctl: refused: Operation not permitted'
done


mkdir -p "$T/out"; chown 65534:65534 "$T/out"

# A daemonised grandchild (setsid, stdio closed) does not outlive its call,
# whether the call ends on its own or by timeout_ms. It sleeps 5 s, then
# writes a marker into a host directory the manifest lets it write; the call
# returns long before. Judged on the host: right after the call, no process
# with its argv (unique per case) and no cgroup of the call; after the 5 s,
# no marker.
# Control first: unconfined, as the tools' uid, the helper does write it.
setpriv --reuid=65534 --regid=65534 --clear-groups "$P" daemonize "$T/out/control" 1 >/dev/null 2>&1
for i in $(seq 40); do [ -f "$T/out/control" ] && break; sleep 0.1; done
[ -f "$T/out/control" ] && pass "daemonise-control-writes-marker" || fail "daemonise-control-writes-marker" "the helper never wrote its marker unconfined: the checks below could not fail"
dz_cases=()
for tier in 1 2; do
	for how in exit timeout; do
		c=dz-$how-t$tier
		M=$(manifest $c $tier "timeout_ms: $([ $how = timeout ] && echo 1000 || echo 20000)" \
			"filesystem: {read: [\"$T/probe\"], write: [\"$T/out\"], exec: [\"$T/probe\"]}")
		sed -i '/^filesystem: {read: \["[^"]*"\], write: \[\]/d' "$M"
		rm -f "$T/out/$c"
		if [ $how = exit ]; then
			act=(daemonize "$T/out/$c" 5)
		else
			act=(daemonize-hold "$T/out/$c" 5 60)
		fi
		echo $(( $(date +%s%N) / 1000000 + 5000 )) >"$T/$c.due"
		out=$("$WARDEN" exec --policy "$M" --json -- "$P" "${act[@]}" 2>/dev/null); rc=$?
		left=$(pgrep -f "^$P ${act[0]} $T/out/$c ")
		if [ $how = exit ]; then
			expect_eq "t$tier/daemonised-call-returned" "$rc:$(printf '%s' "$out" | jget 'd["stdout"].strip()')" "0:daemonized"
		else
			expect_eq "t$tier/daemonised-timeout-124" "$rc" 124
		fi
		[ -z "$left" ] && pass "t$tier/daemonised-$how-no-process-left" || fail "t$tier/daemonised-$how-no-process-left" "pids $(echo $left) still run"
		id=$(printf '%s' "$out" | jget 'd.get("call_id", "")')
		if [ -z "$id" ]; then
			fail "t$tier/daemonised-$how-cgroup-removed" "no call_id in the result"
		else
			cg=$(cgroups_of "$id")
			[ -z "$cg" ] && pass "t$tier/daemonised-$how-cgroup-removed" || fail "t$tier/daemonised-$how-cgroup-removed" "$cg"
		fi
		[ -n "$left" ] && kill $left 2>/dev/null
		dz_cases+=("$c")
	done
done
# after the last grandchild's 5 s (and a margin): no marker anywhere
due=$(cat "$T/${dz_cases[-1]}.due")
now=$(( $(date +%s%N) / 1000000 ))
[ "$now" -lt $((due + 1500)) ] && sleep "$(awk "BEGIN{print ($due + 1500 - $now) / 1000}")"
for c in "${dz_cases[@]}"; do
	[ -e "$T/out/$c" ] && fail "${c##*-}/${c%-t?}-no-marker" "the grandchild wrote $T/out/$c after its call ended" || pass "${c##*-}/${c%-t?}-no-marker"
done

# each constraint the other way: what the manifest allows works
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
left=$(comm -13 <(printf '%s\n' "$cg_before") <(cg_leaves) | sed '/^$/d' | head -3)
[ -z "$left" ] && pass "cgroups-removed" || fail "cgroups-removed" "$left"
# (spare-<k>: an empty directory kept for the next call, sandbox.c)
left=$(ls "$T/rt/calls" 2>/dev/null | grep -v '^spare-[0-9]$' | head -3)
[ -z "$left" ] && pass "call-dirs-removed" || fail "call-dirs-removed" "$left"

# CMD as the caller means it: a relative path from the caller's cwd, a bare
# name through the caller's PATH; what cannot be found, or is not under
# filesystem.exec, is said so
M=$(manifest rel 1)
out=$(cd "$T" && "$WARDEN" exec --policy "$M" --json -- ./probe getpriority 2>&1)
expect_match "exec-relative-path-from-cwd" "$out" 'getpriority: succeeded'
mkdir -p "$T/sub"
out=$(cd "$T/sub" && "$WARDEN" exec --policy "$M" --json -- ../probe getpriority 2>&1)
expect_match "exec-dotdot-path-from-cwd" "$out" 'getpriority: succeeded'
out=$(cd / && PATH=/nonexistent:$T:/usr/bin "$WARDEN" exec --policy "$M" --json -- probe getpriority 2>&1)
expect_match "exec-bare-name-through-path" "$out" 'getpriority: succeeded'
out=$(cd / && "$WARDEN" exec --policy "$M" -- ./probe getpriority 2>&1); rc=$?
expect_eq "exec-relative-missing-125" "$rc" 125
expect_match "exec-relative-missing-says-where" "$out" "command './probe' \(/\./probe\): No such file"
out=$(PATH=/nonexistent "$WARDEN" exec --policy "$M" -- probe getpriority 2>&1); rc=$?
expect_eq "exec-bare-missing-125" "$rc" 125
expect_match "exec-bare-missing-names-path" "$out" "command 'probe' not found in PATH \(/nonexistent\)"
out=$(PATH=/usr/bin:/bin "$WARDEN" exec --policy "$M" -- true 2>&1); rc=$?
expect_eq "exec-outside-fs-exec-refused" "$rc" 125
expect_match "exec-outside-fs-exec-says-what-to-list" "$out" "'true' is /usr/bin/true, which the manifest's filesystem.exec does not cover.*list \"/usr/bin/true\""

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
