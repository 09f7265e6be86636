#!/usr/bin/env bash
# A lost uid (uidpool.c REC_LOST: a write path of a dead call's is gone,
# the uid is never reused) does not stop the cleanup of its other write
# paths: every acquire that walks over it settles those again until they
# are done (on the build before, a record marked lost was refused at once
# and its other paths were never retried: uid-lost-others/settled fails
# there). `warden status` counts the lost uids and says the operator's fix
# (uids{} in --json, a "Per-call uids" section in text; absent before).
# And a release whose revoke fails on one write path still revokes the
# call's ACL entry on the others (before, the first failure skipped them
# all: uid-release/others-revoked fails there).
. tests/lib.sh
set -u
[ "$(id -u)" -eq 0 ] || { skip exec-uid-lost-others "needs root"; finish; }
command -v chattr >/dev/null || { skip exec-uid-lost-others "chattr missing (e2fsprogs)"; finish; }
T=$(mktemp -d /tmp/warden-uidothers.XXXXXX)
chmod 711 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
A=2000003920
cleanup() {
	chattr -i "$T/w1" 2>/dev/null
	remove_calls "$T/rt"
	rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/m.yaml" <<'EOF2'
name: uidothers
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc"], exec: ["/usr/bin/true"]}
EOF2
mkdir -m 700 "$T/uids" "$T/gone" "$T/w"
di=$(stat -c '%d %i' "$T/gone")
rmdir "$T/gone"
wi=$(stat -c '%d %i' "$T/w")
touch "$T/w/left"
chown $A:$A "$T/w/left"
# as the build before left it: the first recover found $T/gone gone, could
# not settle $T/w (say, a file it could not re-own then), appended "lost"
printf 'call 0123456789abcdef\npath %x %x 0 0 %s\npath %x %x 1000 1000 %s\nlost\n' \
	${di% *} ${di#* } "$T/gone" ${wi% *} ${wi#* } "$T/w" >"$T/uids/$A"
chmod 600 "$T/uids/$A"
# last tried two minutes ago: a lost uid's paths are retried at most once
# a minute (uidpool.c LOST_RETRY_S)
touch -d '2 minutes ago' "$T/uids/$A"
export WARDEN_UID_RANGE=$A-$((A + 1))
uids=""
for i in $(seq 20); do
	out=$("$WARDEN" exec --json --policy "$T/m.yaml" -- /usr/bin/true 2>/dev/null)
	uids="$uids $(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_as_uid"])' 2>/dev/null)"
	[ "$(stat -c %u:%g "$T/w/left")" = 1000:1000 ] && break
done
expect_eq uid-lost-others/settled "$(stat -c %u:%g "$T/w/left")" 1000:1000
expect_eq uid-lost-others/still-lost "$(head -1 "$T/uids/$A")" lost
grep -q "^gone .* $T/gone\$" "$T/uids/$A" && ! grep -q " $T/w\$" "$T/uids/$A" && pass uid-lost-others/record-keeps-lost-path ||
	fail uid-lost-others/record-keeps-lost-path "$(tr '\n' '|' <"$T/uids/$A")"
expect_eq uid-lost-others/never-taken "$(echo $uids | tr ' ' '\n' | sort -u | tr '\n' ' ')" "$((A + 1)) "

# status: the count and the fix
js=$("$WARDEN" status --json 2>/dev/null)
expect_eq uid-status/json-lost "$(printf '%s' "$js" | python3 -c 'import json,sys; u=json.load(sys.stdin)["uids"]; print(u["lost"], u["first_lost"], u["dir"])' 2>&1)" "1 $A $T/uids"
expect_match uid-status/json-fix "$(printf '%s' "$js" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uids"]["fix"])' 2>&1)" "rm $T/uids/U"
txt=$("$WARDEN" status 2>/dev/null)
expect_match uid-status/text "$(printf '%s' "$txt" | tr '\n' ' ')" "Per-call uids \\(records in $T/uids\\) +lost: 1 "
js=$(WARDEN_UID_DIR=$T/none "$WARDEN" status --json 2>/dev/null)
expect_eq uid-status/json-none "$(printf '%s' "$js" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uids"]["lost"])' 2>&1)" 0

# the ACL_USER entries (tag 2) of PATH's access ACL: "uid uid ..."
acl_users() {
	python3 -c '
import os, struct, sys
try:
    a = os.getxattr(sys.argv[1], "system.posix_acl_access")
except OSError:
    a = b""
print(" ".join(str(struct.unpack_from("<HHI", a, o)[2]) for o in range(4, len(a), 8)
               if struct.unpack_from("<HHI", a, o)[0] == 2))' "$1"
}
# a release: one write path's revoke fails (made immutable while the call
# runs), the other's ACL entry must go all the same
B=2000003930
export WARDEN_UID_RANGE=$B-$B
mkdir -m 755 "$T/w1" "$T/w2"
cat >"$T/r.yaml" <<EOF2
name: uidrelease
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc"], write: ["$T/w1", "$T/w2"], exec: ["/usr/bin/sleep"]}
EOF2
"$WARDEN" exec --policy "$T/r.yaml" -- /usr/bin/sleep 2 >/dev/null 2>"$T/rerr" &
p=$!
for i in $(seq 100); do pgrep -u $B -x sleep >/dev/null && break; sleep 0.05; done
had=$(acl_users "$T/w2")
if chattr +i "$T/w1" 2>/dev/null; then
	wait $p
	expect_eq uid-release/granted "$had" "$B"
	# w1's revoke failed (its entry is still there): the test tested it
	expect_eq uid-release/w1-revoke-failed "$(acl_users "$T/w1")" "$B"
	expect_eq uid-release/others-revoked "$(acl_users "$T/w2")" ""
	chattr -i "$T/w1"
else
	wait $p
	skip uid-release/others-revoked "chattr +i refused on $T (no immutable flag on this filesystem)"
fi

# a lost uid's moved path is never opened again: the first walk finds
# another file at it (the dev/ino differ) and keeps it as a gone line;
# later walks open nothing there (anyone may put a symlink or a FIFO
# there). Opens are counted by inotify (IN_OPEN) outside the daemon. On
# the build before, every walk opened it again: uid-gone/not-reopened
# fails there. And a lost uid is walked at most once a minute.
C=2000003940
di=$(stat -c '%d %i' "$T/w2")
dhex=$(printf '%x %x' ${di% *} ${di#* })
: >"$T/decoy"
printf 'lost\npath %s 0 0 %s\n' "$dhex" "$T/decoy" >"$T/uids/$C"
chmod 600 "$T/uids/$C"
touch -d '2 minutes ago' "$T/uids/$C"
# C alone: every acquire walks over it (with C+1 beside it, a walk that
# starts at C+1 takes that and never looks at C); the call itself is then
# refused (no uid), which is not what is tested here
export WARDEN_UID_RANGE=$C-$C
"$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/true >/dev/null 2>&1
expect_eq uid-gone/record-gone-line "$(tr '\n' '|' <"$T/uids/$C")" "lost|gone $dhex 0 0 $T/decoy|"
m1=$(stat -c %Y "$T/uids/$C")
[ "$m1" -ge "$(($(date +%s) - 10))" ] && pass uid-gone/tried-stamped || fail uid-gone/tried-stamped "mtime $m1"
touch -d '2 minutes ago' "$T/uids/$C"
opens() { # IN_OPEN events on $1 while $2... runs
	python3 - "$@" <<'PY'
import ctypes, os, struct, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x20) < 0:
    print("inotify failed"); sys.exit(0)
subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
n = 0
try:
    b = os.read(fd, 65536)
    o = 0
    while o < len(b):
        wd, mask, cookie, ln = struct.unpack_from("iIII", b, o)
        n += 1 if mask & 0x20 else 0
        o += 16 + ln
except BlockingIOError:
    pass
print(n)
PY
}
expect_eq uid-gone/not-reopened "$(opens "$T/decoy" "$WARDEN" exec --policy "$T/m.yaml" -- /usr/bin/true)" 0
finish