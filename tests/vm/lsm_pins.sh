#!/usr/bin/env bash
# The pinned BPF LSM object of one-shot `warden exec` calls
# (enforce/lsm_pin.c): loaded by the first call of a boot and build,
# pinned as <pin dir>/lsm_<hash>/, attached from the pins by every later
# call. Runs in the vmtest guest (the only place lsm/ programs load here),
# on a pin dir of its own under /sys/fs/bpf (the node's pins, which other
# tests use, are never touched; everything under it is removed at the end,
# which detaches what it pinned). Judged from outside the sandbox: strace
# of the bpf() commands a call makes, bpftool, and the call's result.
. tests/lib.sh
set -u
for c in strace bpftool python3; do
	command -v $c >/dev/null || { skip lsm-pins "$c missing in the guest (scripts/vmtest.sh copies it from the host)"; finish; }
done
PIN=/sys/fs/bpf/wdlsmpins$$
SAVE=/sys/fs/bpf/wdlsmsave$$
export WARDEN_BPF_PIN_DIR=$PIN
T=$(mktemp -d /run/warden-lsmpins.XXXXXX)
chmod 755 "$T"
cp "$HELPERS/probe" "$T/probe"
chmod 755 "$T/probe"
P=$T/probe
cleanup() {
	[ -n "${VICTIM:-}" ] && kill "$VICTIM" 2>/dev/null
	rm -rf "$PIN" "$SAVE" "$T"
}
trap cleanup EXIT
sleep 600 &
VICTIM=$!
cat >"$T/m.yaml" <<Y
name: vm_lsm_pins
tier: 1
exec: ["$P"]
timeout_ms: 20000
memory_mb: 64
pids: 16
network: {allow: []}
filesystem: {read: ["$P"], write: [], exec: ["$P"]}
output: {max_bytes: 4096}
Y

json() { python3 -c "import json,sys; d=json.load(open('$T/out')); print($1)" 2>/dev/null; }
# denials of KIND by the LSM in the last call's result
lsm_denials() { json "sum(1 for e in d['denials'] if e.get('source')=='bpf_lsm' and e.get('kind')=='$1')"; }
# call ARGS...: a call under strace; "rc=N loads=N" (LSM programs loaded)
call() {
	strace -f -qq -o "$T/st" -e trace=bpf "$WARDEN" exec --json --policy "$T/m.yaml" -- "$P" "$@" >"$T/out" 2>"$T/err"
	local rc=$?
	echo "rc=$rc loads=$(grep -c 'BPF_PROG_LOAD, {prog_type=\(BPF_PROG_TYPE_LSM\|0x1d\)' "$T/st")"
}
# judged CG FLAGS OWNER-DELTA: a shell in cgroup CG (outside any call of
# warden's) given a wd_policy entry in the pinned egress map whose LSM
# slots are FLAGS and the pinned owner tag (+ OWNER-DELTA), as a call's
# prepare writes them; prints what the pinned global programs (task_kill,
# file_open) let it do, then the entry and cgroup go
judged() {
	local cg=/sys/fs/cgroup/$1 eg k v owner
	eg=$(find "$PIN" -mindepth 1 -maxdepth 1 -name '[0-9a-f]*' | head -1)
	mkdir "$cg"
	owner=$(bpftool -j map dump pinned "$L/wd_version" | python3 -c '
import json, sys
v = json.load(sys.stdin)[0]["value"]
b = bytes(int(x, 16) for x in v)
print(int.from_bytes(b[32:40], "little"))')
	k=$(python3 -c 'import sys; print(" ".join("%02x" % b for b in int(sys.argv[1]).to_bytes(8, "little")))' "$(stat -c %i "$cg")")
	v=$(python3 -c '
import sys
f, o = int(sys.argv[1]), int(sys.argv[2]) + int(sys.argv[3])
b = bytes(16) + f.to_bytes(8, "little") + (o % (1 << 64)).to_bytes(8, "little") + bytes(24)
print(" ".join("%02x" % x for x in b))' "$2" "$owner" "$3")
	bpftool map update pinned "$eg/wd_policy" key hex $k value hex $v
	bash -c 'echo $$ >"$1/cgroup.procs"
		kill -0 "$2" 2>/dev/null && echo -n kill:ok || echo -n kill:denied
		{ read -r l <"$3"; } 2>/dev/null && echo " open:ok" || echo " open:denied"' x "$cg" "$VICTIM" "$P"
	bpftool map delete pinned "$eg/wd_policy" key hex $k
	rmdir "$cg"
}
lsmdir() { find "$PIN" -mindepth 1 -maxdepth 1 -name 'lsm_*' | head -1; }
id_of() { bpftool -j "$1" show pinned "$2" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null; }
n_entries() { bpftool -j map dump pinned "$1" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null; }
# links (of any pin dir) that exist now, by id
link_exists() { bpftool -j link show | python3 -c 'import json,sys; i=int(sys.argv[1]); print(any(l.get("id")==i for l in json.load(sys.stdin)))' "$1"; }

# a pristine pin dir: the first call loads and pins, a connect is denied
r=$(call connect4 127.0.0.1 9)
if [ "$(json "d['enforcement'].get('bpf_lsm','')" | cut -c1-8)" != enforced ]; then
	skip lsm-pins "BPF LSM not enforced on this kernel ($(uname -r)): $(json "d['enforcement'].get('bpf_lsm','')")"
	finish
fi
expect_match lsm-pins/first-call-loads "$r" '^rc=1 loads=[1-9][0-9]*$'
expect_eq lsm-pins/first-call-connect-denied "$(lsm_denials connect)" 1
L=$(lsmdir)
expect_match lsm-pins/pinned-by-hash "$L" "^$PIN/lsm_[0-9a-f]{16}\$"
expect_eq lsm-pins/dir-root-0700 "$(stat -c '%u %a' "$L")" "0 700"
missing=
for f in wd_version wd_lsm_files wd_socket_create wd_socket_connect link_wd_file_open link_wd_bprm_check \
	link_wd_ptrace link_wd_task_kill link_wd_bpf link_wd_sb_mount link_wd_move_mount link_wd_kmod_request; do
	[ -e "$L/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && pass lsm-pins/pins-present || fail lsm-pins/pins-present "missing:$missing ($(ls "$L"))"
# the global hooks stay attached after the call's process is gone ...
kid=$(id_of link "$L/link_wd_task_kill")
expect_eq lsm-pins/global-link-stays "$(link_exists "${kid:-0}")" True
# ... and judge nothing outside a call: this shell (no call's cgroup)
# signals, opens, mounts and uses bpf() as before
mkdir -p "$T/mnt"
out=$({ kill -0 "$VICTIM" && cat "$P" >/dev/null && mount -t tmpfs none "$T/mnt" && umount "$T/mnt" &&
	bpftool prog show >/dev/null && echo ok; } 2>&1)
expect_eq lsm-pins/outside-calls-untouched "$out" ok

# the pinned global programs, their process gone, judge a cgroup armed
# with their owner tag (WD_LSM_ON = 1, WD_LSM_FILES = 2: a signal out of
# it and an unlisted open are denied) and no other (a call armed by
# another instance: another tag)
expect_eq lsm-pins/global-judges-armed "$(judged wdlsmpins$$ 3 0)" "kill:denied open:denied"
expect_eq lsm-pins/global-other-owner-not-judged "$(judged wdlsmpins$$ 3 1)" "kill:ok open:ok"
expect_eq lsm-pins/global-unarmed-not-judged "$(judged wdlsmpins$$ 0 0)" "kill:ok open:ok"

# the next call loads no LSM program: the pinned ones, still denying (a
# connect: the pinned lsm_cgroup program attached to its cgroup)
r=$(call connect4 127.0.0.1 9)
expect_eq lsm-pins/second-call-loads-none "$r" "rc=1 loads=0"
expect_eq lsm-pins/second-call-connect-denied "$(lsm_denials connect)" 1
r=$(call env)
expect_eq lsm-pins/second-call-runs "$r" "rc=0 loads=0"
# no call's rules left in the pinned map
expect_eq lsm-pins/no-rules-left "$(n_entries "$L/wd_lsm_files")" 0

# a process's own load beside the pinned one (hooks switched off by hand
# load afresh, on the same egress maps): each call is judged by one
# instance, once
r=$(WARDEN_LSM_DISABLE=none call connect4 127.0.0.1 9)
expect_match lsm-pins/own-load-loads "$r" '^rc=1 loads=[1-9][0-9]*$'
expect_eq lsm-pins/own-load-denied-once "$(lsm_denials connect)" 1

# figures: a call on the pins vs a call loading its own (3 each)
tp=0 tf=0
for i in 1 2 3; do
	t0=$EPOCHREALTIME
	"$WARDEN" exec --policy "$T/m.yaml" -- "$P" env >/dev/null 2>&1
	t1=$EPOCHREALTIME
	WARDEN_LSM_DISABLE=none "$WARDEN" exec --policy "$T/m.yaml" -- "$P" env >/dev/null 2>&1
	t2=$EPOCHREALTIME
	tp=$(awk "BEGIN{print $tp + $t1 - $t0}")
	tf=$(awk "BEGIN{print $tf + $t2 - $t1}")
done
fig="lsm-pins call wall time (TCG), mean of 3: pinned $(awk "BEGIN{printf \"%.2f\", $tp/3}")s, own load $(awk "BEGIN{printf \"%.2f\", $tf/3}")s"
echo "# $fig"
[ -w /dev/console ] && echo "@@VM figure $fig" >/dev/console

# another build's LSM pins and a tampered version record of ours: never
# used; both removed, ours made anew (the old links detach)
mkdir -m 0700 "$PIN/lsm_0123456789abcdef"
bpftool map create "$PIN/lsm_0123456789abcdef/wd_lsm_files" type hash key 24 value 4 entries 4 name wd_lsm_files
vid=$(id_of map "$L/wd_version")
vsz=$(bpftool -j map show pinned "$L/wd_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_value"])')
rm -f "$L/wd_version"
bpftool map create "$L/wd_version" type array key 4 value "$vsz" entries 1 name wd_version
r=$(call connect4 127.0.0.1 9)
expect_match lsm-pins/tampered-replaced-loads "$r" '^rc=1 loads=[1-9][0-9]*$'
expect_eq lsm-pins/tampered-replaced-denied "$(lsm_denials connect)" 1
expect_eq lsm-pins/tampered-replaced-global-judges "$(judged wdlsmpins$$ 3 0)" "kill:denied open:denied"
[ ! -e "$PIN/lsm_0123456789abcdef" ] && pass lsm-pins/other-build-removed || fail lsm-pins/other-build-removed "$(ls "$PIN")"
nid=$(id_of map "$L/wd_version")
[ -n "$nid" ] && [ "$nid" != "$vid" ] && pass lsm-pins/version-rewritten || fail lsm-pins/version-rewritten "id $vid -> $nid"
expect_eq lsm-pins/old-links-detached "$(link_exists "${kid:-0}")" False

# a global link swapped for another link of ours (task_kill's pin naming
# the bpf hook's link): stale, replaced
kid=$(id_of link "$L/link_wd_task_kill")
rm -f "$L/link_wd_task_kill"
bpftool link pin id "$(id_of link "$L/link_wd_bpf")" "$L/link_wd_task_kill"
r=$(call connect4 127.0.0.1 9)
expect_match lsm-pins/swapped-link-replaced "$r" '^rc=1 loads=[1-9][0-9]*$'
expect_eq lsm-pins/swapped-link-denied "$(lsm_denials connect)" 1
expect_eq lsm-pins/swapped-link-global-judges "$(judged wdlsmpins$$ 3 0)" "kill:denied open:denied"

# pins loaded on other egress maps (the egress pins replaced while these
# were kept aside): stale, replaced, never used
mv "$L" "$SAVE"
rm -rf "$PIN"/[0-9a-f]*
r=$(call env) # new egress pins, and LSM pins on them
rm -rf "$(lsmdir)"
mv "$SAVE" "$L"
r=$(call connect4 127.0.0.1 9)
expect_match lsm-pins/other-egress-maps-replaced "$r" '^rc=1 loads=[1-9][0-9]*$'
expect_eq lsm-pins/other-egress-maps-denied "$(lsm_denials connect)" 1
expect_eq lsm-pins/other-egress-maps-global-judges "$(judged wdlsmpins$$ 3 0)" "kill:denied open:denied"

# a hash dir others can write: refused (never loaded around, never used)
chmod 0777 "$L"
r=$(call env)
expect_eq lsm-pins/world-writable-refused "$r" "rc=125 loads=0"
expect_match lsm-pins/world-writable-says-why "$(cat "$T/err")" "pin dir '$L' is not ours"
chmod 0700 "$L"
r=$(call connect4 127.0.0.1 9)
expect_eq lsm-pins/restored-works "$r" "rc=1 loads=0"
kill -0 "$VICTIM" && pass lsm-pins/victim-alive || fail lsm-pins/victim-alive "victim died"

# three first calls at once: one creator (the pin dir's flock), one set
# of LSM pins, no temp dir left, every call judged
rm -rf "$L"
pids=()
for i in 1 2 3; do
	"$WARDEN" exec --json --policy "$T/m.yaml" -- "$P" connect4 127.0.0.1 9 >"$T/c$i" 2>"$T/e$i" &
	pids+=($!)
done
wait "${pids[@]}"
expect_eq lsm-pins/concurrent-one-set "$(find "$PIN" -mindepth 1 -maxdepth 1 -name '*lsm_*' | wc -l)" 1
n=0
for i in 1 2 3; do
	cp "$T/c$i" "$T/out"
	[ "$(lsm_denials connect)" = 1 ] && n=$((n + 1))
done
expect_eq lsm-pins/concurrent-all-denied "$n" 3

# figure: what the global programs left attached cost a process outside
# every call (open+close of a file, median of 5 runs of 20000), with this
# pin dir's links and after they went with their pins
opens() { python3 -c '
import os, time
r = []
for _ in range(5):
    t = time.perf_counter()
    for i in range(20000):
        os.close(os.open("/etc/hosts", os.O_RDONLY))
    r.append((time.perf_counter() - t) / 20000 * 1e6)
print("%.2f" % sorted(r)[2])'; }
with=$(opens)
kid=$(id_of link "$L/link_wd_task_kill")
rm -rf "$PIN"
for i in $(seq 25); do # a link is freed once the pin's inode is (RCU)
	[ "$(link_exists "${kid:-0}")" = False ] && break
	sleep 0.2
done
expect_eq lsm-pins/links-go-with-pins "$(link_exists "${kid:-0}")" False
without=$(opens)
fig="lsm-pins open+close outside calls (TCG): ${with} us with one more set of pinned global links, ${without} us without"
echo "# $fig"
[ -w /dev/console ] && echo "@@VM figure $fig" >/dev/console
finish
