#!/usr/bin/env bash
# A uid whose record names a write path that is gone (moved or removed:
# what it held cannot be found) is never reused. The first acquire that
# finds it so kills its processes and marks the record (uidpool.c
# REC_LOST); later ones refuse it without walking /proc again (on the
# build before, every acquire crossing it read /proc/<pid>/status of
# every process on the node: uid-lost/no-proc-walk fails there).
. tests/lib.sh
set -u
[ "$(id -u)" -eq 0 ] || { skip exec-uid-lost "needs root"; finish; }
command -v strace >/dev/null || { skip exec-uid-lost "strace missing (scripts/deps.sh installs it)"; finish; }
T=$(mktemp -d /tmp/warden-uidlost.XXXXXX)
chmod 711 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
LOST=2000003900
export WARDEN_UID_RANGE=$LOST-$((LOST + 1))
cleanup() {
	remove_calls "$T/rt"
	rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/m.yaml" <<'EOF'
name: uidlost
tier: 1
timeout_ms: 20000
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc"], exec: ["/usr/bin/true"]}
EOF
mkdir -m 700 "$T/uids" "$T/gone"
di=$(stat -c '%d %i' "$T/gone")
rmdir "$T/gone"
printf 'call 0123456789abcdef\npath %x %x 0 0 %s\n' ${di% *} ${di#* } "$T/gone" >"$T/uids/$LOST"
chmod 600 "$T/uids/$LOST"
uids=""
for i in $(seq 10); do
	out=$("$WARDEN" exec --json --policy "$T/m.yaml" -- /usr/bin/true 2>/dev/null)
	uids="$uids $(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_as_uid"])' 2>/dev/null)"
	grep -qx lost "$T/uids/$LOST" && break
done
grep -qx lost "$T/uids/$LOST" && pass uid-lost/marked || fail uid-lost/marked "$(tr '\n' '|' <"$T/uids/$LOST")"
walks=0
for i in $(seq 6); do
	out=$(strace -f -qq -e trace=openat -o "$T/st" "$WARDEN" exec --json --policy "$T/m.yaml" -- /usr/bin/true 2>/dev/null)
	uids="$uids $(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_as_uid"])' 2>/dev/null)"
	walks=$((walks + $(grep -Ec '"/proc/[0-9]+/status"|[0-9]+/status"' "$T/st")))
done
expect_eq uid-lost/no-proc-walk "$walks" 0
expect_eq uid-lost/never-taken "$(echo $uids | tr ' ' '\n' | sort -u | tr '\n' ' ')" "$((LOST + 1)) "
finish
