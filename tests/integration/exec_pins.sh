#!/usr/bin/env bash
# The pinned egress programs of a one-shot `warden exec`
# (enforce/egress_pin.c). Runs in a private mount namespace on a fresh,
# empty bpffs at /sys/fs/bpf (a pristine node: the first call makes the
# pins), so the node's own pins are never touched; pins made here go with
# the namespace (and are removed by path at the end all the same).
# Judged from outside the sandbox: a loopback listener's accept count, the
# pins on bpffs, and strace of the bpf() commands a call makes.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { skip pins "needs root"; finish; }
for c in unshare strace bpftool python3; do
	command -v $c >/dev/null || { skip pins "$c missing (scripts/deps.sh installs it)"; finish; }
done
if [ -z "${WD_PINS_INNER:-}" ]; then
	WD_PINS_INNER=1 exec unshare -m --propagation private bash "$0" "$@"
fi
mount -t bpf bpf /sys/fs/bpf || { skip pins "cannot mount a bpffs in a private mount namespace"; finish; }
PIN=/sys/fs/bpf/warden
T=$(mktemp -d /run/warden-pins.XXXXXX); chmod 755 "$T"
cleanup() {
	[ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null
	rm -rf "$PIN" "$T"
	umount /sys/fs/bpf 2>/dev/null
}
trap cleanup EXIT
export WARDEN_RUNTIME_DIR=$T/rt
cp "$HELPERS/probe" "$T/probe"; chmod 755 "$T/probe"
python3 - "$T" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(64)
open(sys.argv[1] + "/port", "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept(); open(sys.argv[1] + "/hits", "a").write("x\n"); c.close()
PY
LPID=$!
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
hits() { [ -f "$T/hits" ] && wc -l <"$T/hits" || echo 0; }
# port 9 allowed; the listener's port is not
cat >"$T/m.yaml" <<EOF2
name: pins
description: pinned egress
tier: 1
exec: ["$T/probe"]
timeout_ms: 10000
memory_mb: 64
network: {allow: ["127.0.0.1:9"]}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], exec: ["$T/probe"]}
EOF2
# call NAME: a denied connect under strace; "rc=N loads=N hits+=N"
call() {
	local h0 rc
	h0=$(hits)
	strace -f -qq -o "$T/st" -e trace=bpf "$WARDEN" exec --policy "$T/m.yaml" -- "$T/probe" connect4 127.0.0.1 "$PORT" >"$T/out" 2>&1
	rc=$?
	# egress programs loaded (libbpf's own feature probes load socket
	# filters: not counted)
	echo "rc=$rc loads=$(grep -c 'BPF_PROG_LOAD, {prog_type=BPF_PROG_TYPE_CGROUP_SOCK_ADDR' "$T/st") hits+=$(($(hits) - h0))"
}
hashdir() { find "$PIN" -mindepth 1 -maxdepth 1 -type d -name '[0-9a-f]*' | head -1; }

# a pristine node: the first call loads and pins, the connect is denied
r=$(call)
expect_match pins/first-call-loads "$r" '^rc=[1-9][0-9]* loads=[1-9][0-9]* hits\+=0$'
expect_match pins/first-call-denial-reported "$(cat "$T/out")" 'denied bpf: connect.*127\.0\.0\.1'
H=$(hashdir)
expect_match pins/pinned-by-hash "$H" "^$PIN/[0-9a-f]{16}\$"
expect_eq pins/pin-dir-root-0700 "$(stat -c '%u %a' "$PIN" "$H" | tr '\n' ' ')" "0 700 0 700 "
[ -e "$H/wd_version" ] && [ -e "$H/wd_connect4" ] && [ -e "$H/wd_policy" ] && pass pins/pins-present ||
	fail pins/pins-present "$(ls "$H")"
# the next call only attaches: no program loaded, still denied
r=$(call)
expect_eq pins/second-call-attaches-only "$r" "rc=$(echo "$r" | sed 's/rc=\([0-9]*\).*/\1/') loads=0 hits+=0"
expect_match pins/second-call-denied "$r" '^rc=[1-9]'
expect_match pins/second-call-denial-reported "$(cat "$T/out")" 'denied bpf: connect.*127\.0\.0\.1'
# the pins are taken by name under the judged directory's fd
# (BPF_F_PATH_FD, 6.5+), never by a path walked again
if [ "$(uname -r | awk -F. '{print $1 * 1000 + $2}')" -ge 6005 ]; then
	expect_eq pins/gets-relative-to-dir "$(grep -c 'BPF_OBJ_GET, {pathname="/' "$T/st") $(grep -c 'BPF_OBJ_GET, {pathname="wd_connect4"' "$T/st")" "0 1"
fi
# no name in its network.allow: the programs only DNS redirection
# attaches are not even opened (wd_egress_pins_no_names); a call that
# names a host opens them (egress_names.sh runs such calls)
expect_eq pins/no-names-no-dns-programs "$(grep -c 'wd_recvmsg4\|wd_recvmsg6\|wd_getpeername4\|wd_getpeername6' "$T/st")" 0
# the keep-warm links (egress_keep.c): pinned beside the programs, attached
# to the v2 warden/keep-warm (a sibling of the call leaves, no process in
# it), one per type the calls use, and they stay between calls (the
# kernel's static keys stay on)
V2=/sys/fs/cgroup/unified
[ -d "$V2" ] || V2=/sys/fs/cgroup
keep_links() { # links of warden/keep-warm whose program is a pinned keep one
	local cg ids
	cg=$(stat -c %i "$V2/warden/keep-warm" 2>/dev/null) || { echo 0; return; }
	ids=$(for f in "$H"/wd_keep_*; do bpftool -j prog show pinned "$f" 2>/dev/null; done |
		python3 -c 'import json,sys; [print(json.loads(l)["id"]) for l in sys.stdin if l.strip()]' | tr '\n' ' ')
	bpftool -j link show | python3 -c '
import json, sys
cg, ids = int(sys.argv[1]), set(int(x) for x in sys.argv[2].split())
print(sum(1 for l in json.load(sys.stdin) if l.get("type") == "cgroup" and l.get("cgroup_id") == cg and l.get("prog_id") in ids))' "$cg" "$ids"
}
nkeep=$(ls "$H" | grep -c '^wd_keep_')
nlink=$(ls "$H" | grep -c '^link_wd_keep_')
expect_eq pins/keep-links-pinned "$nlink" "$nkeep"
expect_eq pins/keep-links-attached "$(keep_links)" "$nkeep"
# ... and no call runs them: the programs in effect on a running call's
# leaf for its connects are its own wd_connect4 alone (on the leaves'
# parent, the allow-all one ran for every connect of every call too)
"$WARDEN" exec --policy "$T/m.yaml" -- "$T/probe" sleep 2 >/dev/null 2>&1 &
WPID=$!
leaf=
for i in $(seq 50); do
	for p in $(pgrep -P "$WPID" 2>/dev/null) $(pgrep -f "^$T/probe sleep 2" 2>/dev/null); do
		c=$(sed -n 's/^0:://p' "/proc/$p/cgroup" 2>/dev/null)
		case "$c" in /warden/*) leaf=$V2$c; break 2 ;; esac
	done
	sleep 0.1
done
if [ -n "$leaf" ]; then
	eff=$(bpftool -j cgroup show "$leaf" effective 2>/dev/null | python3 -c '
import json, sys
print(" ".join(sorted(p.get("name", "?") for p in json.load(sys.stdin) if p.get("attach_type") in ("connect4", "cgroup_inet4_connect"))))')
	expect_eq pins/keep-programs-not-on-calls "$eff" "wd_connect4"
else
	fail pins/keep-programs-not-on-calls "no running call's leaf found"
fi
wait "$WPID" 2>/dev/null
# keep-warm links attached change no verdict: the connect of the call
# just made was denied with them attached (second-call-denied),
# and so is a unix socket outside the write paths
r=$("$WARDEN" exec --policy "$T/m.yaml" -- "$T/probe" unix-connect "$T/nosock" 2>&1; echo "rc=$?")
expect_match pins/keep-links-unix-still-denied "$r" 'denied bpf: connect_unix'
# a missing link pin is made again; one that is not a link of our keep
# program (here: a program pinned in its place) is replaced, never trusted
rm -f "$H/link_wd_keep_connect4"
bpftool prog pin pinned "$H/wd_connect4" "$H/link_wd_keep_connect6" 2>/dev/null ||
	{ rm -f "$H/link_wd_keep_connect6"; bpftool prog pin pinned "$H/wd_connect4" "$H/link_wd_keep_connect6"; }
r=$(call)
expect_match pins/keep-links-remade-denied "$r" '^rc=[1-9][0-9]* loads=0 hits\+=0$'
expect_eq pins/keep-links-remade "$(keep_links)" "$nkeep"
[ "$(bpftool -j link show pinned "$H/link_wd_keep_connect6" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("type"))' 2>/dev/null)" = cgroup ] &&
	pass pins/keep-link-impostor-replaced || fail pins/keep-link-impostor-replaced "$(bpftool link show pinned "$H/link_wd_keep_connect6" 2>&1)"
# a keep program's own pin swapped for another program (here the denying
# wd_connect4: linked anywhere, it is a program of ours taken for another)
# and its link gone: a call checks keep links against the ids
# wd_version recorded and opens a keep program only to link it, so the
# impostor is refused there, never linked; the call runs on its own
# programs. (The old build opened and checked every keep pin each call.)
pid_of() { bpftool -j prog show pinned "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
cid=$(pid_of "$H/wd_connect4")
rm -f "$H/wd_keep_connect4" "$H/link_wd_keep_connect4"
bpftool prog pin pinned "$H/wd_connect4" "$H/wd_keep_connect4"
r=$(call)
expect_match pins/keep-program-impostor-call-denied "$r" '^rc=[1-9][0-9]* loads=0 hits\+=0$'
# (calls attach wd_connect4 itself without a link: any link of it is one
# made of the impostor; warden/keep-warm may be gone, kept by no link now)
n=$(bpftool -j link show | python3 -c '
import json, sys
pid = int(sys.argv[1])
print(sum(1 for l in json.load(sys.stdin) if l.get("prog_id") == pid))' "$cid")
expect_eq pins/keep-program-impostor-never-linked "$n" 0
[ ! -e "$H/link_wd_keep_connect4" ] && pass pins/keep-program-impostor-no-link-pin ||
	fail pins/keep-program-impostor-no-link-pin "$(bpftool link show pinned "$H/link_wd_keep_connect4" 2>&1)"

# no map entries left behind by finished calls
n=$(bpftool -j map dump pinned "$H/wd_policy" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq pins/no-policy-entries-left "$n" 0
# the call's ring slot is free again (the ring itself stays in its slot
# for the next call: wd_call_rings)
for m in wd_ring_slot wd_ring_owner; do
	n=$(bpftool -j map dump pinned "$H/$m" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
	expect_eq "pins/no-$m-entries-left" "$n" 0
done

# an older build's pins (another hash): never used, removed, ours made anew
mkdir -m 0700 "$PIN/0123456789abcdef"
bpftool map create "$PIN/0123456789abcdef/wd_policy" type hash key 8 value 24 entries 4 name wd_policy
rm -rf "$H"
r=$(call)
expect_match pins/older-build-replaced-loads "$r" 'loads=[1-9][0-9]* hits\+=0$'
[ ! -e "$PIN/0123456789abcdef" ] && pass pins/older-build-removed || fail pins/older-build-removed "$(ls "$PIN")"
[ "$(hashdir)" = "$H" ] && pass pins/ours-made || fail pins/ours-made "$(ls "$PIN")"
# the removed pins' keep links went with them: one set attached, not two
expect_eq pins/keep-links-removed-with-pins "$(keep_links)" "$nkeep"

# our hash, a tampered version record: stale, replaced, never used
id0=$(bpftool -j map show pinned "$H/wd_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
vsz=$(bpftool -j map show pinned "$H/wd_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_value"])')
rm -f "$H/wd_version"
bpftool map create "$H/wd_version" type array key 4 value "$vsz" entries 1 name wd_version
r=$(call)
expect_match pins/tampered-version-replaced "$r" 'loads=[1-9][0-9]* hits\+=0$'
id1=$(bpftool -j map show pinned "$H/wd_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
[ -n "$id1" ] && [ "$id1" != "$id0" ] && pass pins/tampered-version-rewritten || fail pins/tampered-version-rewritten "id $id0 -> $id1"

# wd_version made again, frozen, with the real ids and tags but the bytes
# at OFFSET replaced by HEX (space-separated bytes): what an older build of
# the same object, or a tampered record, would leave
rewrite_version() {
	local vsz val
	vsz=$(bpftool -j map show pinned "$H/wd_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_value"])')
	val=$(bpftool -j map dump pinned "$H/wd_version" | python3 -c '
import json, sys
v = [int(x, 16) for x in json.load(sys.stdin)[0]["value"]]
off = int(sys.argv[1]); new = [int(x, 16) for x in sys.argv[2].split()]
v[off:off + len(new)] = new
print(" ".join("%02x" % b for b in v))' "$1" "$2")
	rm -f "$H/wd_version"
	bpftool map create "$H/wd_version" type array key 4 value "$vsz" entries 1 name wd_version &&
		bpftool map update pinned "$H/wd_version" key 0 0 0 0 value hex $val &&
		bpftool map freeze pinned "$H/wd_version"
}
# an older build's record in our hash's place: every id and tag right, one
# byte of the object hash differs: another build's, replaced, never used
H=$(hashdir)
if rewrite_version 0 "$(bpftool -j map dump pinned "$H/wd_version" | python3 -c 'import json,sys; print("%02x" % (int(json.load(sys.stdin)[0]["value"][0], 16) ^ 0xff))')"; then
	r=$(call)
	expect_match pins/older-hash-record-replaced "$r" '^rc=[1-9][0-9]* loads=[1-9][0-9]* hits\+=0$'
	expect_match pins/older-hash-record-denial-reported "$(cat "$T/out")" 'denied bpf: connect.*127\.0\.0\.1'
else
	fail pins/older-hash-record-replaced "could not rewrite wd_version with bpftool"
fi
# a record saying the unix programs were not loaded, on a kernel that has
# their hook (a load that failed once, pinned for the boot): stale,
# replaced, so unix sockets are judged again
kv=$(uname -r | awk -F. '{print $1 * 1000 + $2}')
if [ "$kv" -ge 6007 ]; then
	H=$(hashdir)
	rewrite_version 32 "00 00 00 00"
	r=$(call)
	expect_match pins/no-unix-record-replaced "$r" '^rc=[1-9][0-9]* loads=[1-9][0-9]* hits\+=0$'
	u=$(bpftool -j map dump pinned "$(hashdir)/wd_version" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)[0]["value"][32], 16))')
	expect_eq pins/no-unix-record-remade-with-unix "$u" 1
else
	skip pins/no-unix-record-replaced "kernel $(uname -r) has no cgroup/connect_unix (6.7+)"
fi

# our hash, the connect4 program swapped for an allow-all one of the same
# type (the keep-warm program): used, it would let the connect through
rm -f "$H/wd_connect4"
bpftool prog pin pinned "$H/wd_keep_connect4" "$H/wd_connect4"
r=$(call)
expect_match pins/swapped-program-never-used "$r" '^rc=[1-9][0-9]* .*hits\+=0$'
expect_match pins/swapped-program-replaced "$r" 'loads=[1-9][0-9]*'

# our hash, wd_policy swapped for a map of the same type and shape (made by
# root, not by this build's load): the call's entries would go where its
# programs never look (every connect denied as a policy miss, its denials
# unrecorded); judged by the id the version record holds: replaced
H=$(hashdir)
pshape=$(bpftool -j map show pinned "$H/wd_policy" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["type"], m["bytes_key"], m["bytes_value"], m["max_entries"])')
set -- $pshape
rm -f "$H/wd_policy"
bpftool map create "$H/wd_policy" type "$1" key "$2" value "$3" entries "$4" name wd_policy
sid=$(bpftool -j map show pinned "$H/wd_policy" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
r=$(call)
expect_match pins/same-shape-map-replaced "$r" 'loads=[1-9][0-9]* hits\+=0$'
nid=$(bpftool -j map show pinned "$H/wd_policy" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
[ -n "$nid" ] && [ "$nid" != "$sid" ] && pass pins/same-shape-map-not-kept || fail pins/same-shape-map-not-kept "id $sid -> $nid"
expect_match pins/same-shape-map-denial-reported "$(cat "$T/out")" 'denied bpf: connect.*127\.0\.0\.1'

# our hash, wd_connect4 swapped for wd_connect4 of another load of the
# same object (same tag, another program with other maps): replaced
H=$(hashdir)
O=/sys/fs/bpf/wd-other-$$ # this namespace's own bpffs
bpftool prog loadall "$BUILD/bpf/egress.bpf.o" "$O" 2>/dev/null
if [ -e "$O/wd_connect4" ]; then
	rm -f "$H/wd_connect4"
	bpftool prog pin pinned "$O/wd_connect4" "$H/wd_connect4"
	r=$(call)
	expect_match pins/other-load-program-replaced "$r" 'loads=[1-9][0-9]* hits\+=0$'
else
	skip pins/other-load-program-replaced "bpftool prog loadall of $BUILD/bpf/egress.bpf.o failed"
fi
rm -rf "$O"

# a pin dir that is not root's, or that others can write: refused
chown 65534 "$PIN"
r=$(call)
expect_match pins/not-root-refused "$r" '^rc=125 loads=0 hits\+=0$'
expect_match pins/not-root-says-why "$(cat "$T/out")" "pin dir '$PIN' is not ours"
chown 0 "$PIN"; chmod 0777 "$PIN"
r=$(call)
expect_match pins/world-writable-refused "$r" '^rc=125 loads=0 hits\+=0$'
chmod 0700 "$PIN"; chmod 0777 "$H"
r=$(call)
expect_match pins/hash-dir-world-writable-refused "$r" '^rc=125 loads=0 hits\+=0$'
chmod 0700 "$H"
r=$(call)
expect_match pins/restored-works "$r" 'loads=0 hits\+=0$'

# two first calls at once: both run, one set of pins, no temp dir left
rm -rf "$PIN"
pids=()
for i in 1 2 3; do
	"$WARDEN" exec --policy "$T/m.yaml" -- "$T/probe" connect4 127.0.0.1 9 >"$T/c$i" 2>&1 &
	pids+=($!)
done
wait "${pids[@]}"
n=$(find "$PIN" -mindepth 1 -maxdepth 1 | wc -l)
expect_eq pins/concurrent-one-set "$n" 1
expect_match pins/concurrent-ours "$(hashdir)" "^$H\$"
bad=$(grep -l 'exec: refused' "$T"/c[123] 2>/dev/null)
[ -z "$bad" ] && pass pins/concurrent-all-ran || fail pins/concurrent-all-ran "$(cat $bad)"

# a caller killed mid-call (-9): once its cgroup is gone, the next call
# removes its entries (they must not stay forever). Only this call's own
# cgroup is touched: its id is its call dir in our runtime dir.
cat >"$T/s.yaml" <<EOF2
name: pins_sleep
description: a call to kill
tier: 1
exec: ["/usr/bin/sleep"]
timeout_ms: 60000
memory_mb: 64
network: {allow: ["127.0.0.1:9"]}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], exec: ["/usr/bin/sleep"]}
EOF2
entries() { bpftool -j map dump pinned "$H/$1" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
"$WARDEN" exec --policy "$T/s.yaml" -- /usr/bin/sleep 30 >/dev/null 2>&1 &
W=$!
for i in $(seq 100); do
	[ "$(entries wd_policy)" = 1 ] && break
	sleep 0.05
done
expect_eq pins/killed-call-has-entry "$(entries wd_policy)" 1
id=$(ls "$T/rt/calls" 2>/dev/null | grep -v "^spare-" | head -1)
kill -9 $W; wait $W 2>/dev/null
if [ -n "$id" ] && [ -d "/sys/fs/cgroup/unified/warden/$id" ]; then
	# what the sandbox's start-up sweep does for a dead caller's call
	echo 1 >"/sys/fs/cgroup/unified/warden/$id/cgroup.kill"
	for i in $(seq 100); do
		[ -s "/sys/fs/cgroup/unified/warden/$id/cgroup.procs" ] || break
		sleep 0.05
	done
	for d in /sys/fs/cgroup/unified/warden/$id /sys/fs/cgroup/*/warden/$id; do
		[ -d "$d" ] && rmdir "$d"
	done
	expect_eq pins/killed-call-entry-still-there "$(entries wd_policy)" 1
	expect_eq pins/killed-call-slot-still-held "$(entries wd_ring_owner)" 1
	"$WARDEN" exec --policy "$T/m.yaml" -- "$T/probe" connect4 127.0.0.1 9 >/dev/null 2>&1
	expect_eq pins/killed-call-entries-swept "$(entries wd_policy)" 0
	expect_eq pins/killed-call-slot-swept "$(entries wd_ring_slot)" 0
	expect_eq pins/killed-call-slot-freed "$(entries wd_ring_owner)" 0
else
	fail pins/killed-call-cgroup "no call dir/cgroup found (id '$id')"
fi
finish
