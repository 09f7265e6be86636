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
export WARDEN_UID_RANGE=$A-$((A + 1))
uids=""
for i in $(seq 20); do
	out=$("$WARDEN" exec --json --policy "$T/m.yaml" -- /usr/bin/true 2>/dev/null)
	uids="$uids $(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_as_uid"])' 2>/dev/null)"
	[ "$(stat -c %u:%g "$T/w/left")" = 1000:1000 ] && break
done
expect_eq uid-lost-others/settled "$(stat -c %u:%g "$T/w/left")" 1000:1000
expect_eq uid-lost-others/still-lost "$(head -1 "$T/uids/$A")" lost
grep -q " $T/gone\$" "$T/uids/$A" && ! grep -q " $T/w\$" "$T/uids/$A" && pass uid-lost-others/record-keeps-lost-path ||
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
chattr +i "$T/w1"
wait $p
expect_eq uid-release/granted "$had" "$B"
expect_eq uid-release/others-revoked "$(acl_users "$T/w2")" ""
chattr -i "$T/w1"
finish
