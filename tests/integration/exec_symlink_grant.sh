#!/usr/bin/env bash
# A symlink a tool leaves under its write path never redirects a later
# grant (common/safepath.h). The attack runs INSIDE the sandbox: call 1
# replaces a path another grant names (a nested write path of the same
# manifest; another team's write path under this one's) with a symlink to a
# directory no manifest names; the verdict comes from outside: whether a
# file appeared there, the ACL entries on it, whether call 2 ran, and the
# link's owner after the call (settle gives a tool's links uid 65534,
# never root). A root link in a root-only directory (as /lib -> usr/lib)
# is still followed; one in a directory others may write is not. Tiers 1
# (ACL + Landlock), 2 (bind mounts too) and 3 (runsc's binds; its write
# paths others may write, as tier 3 needs). On the build with the hole,
# call 2 wrote through the link (target/pwned) and got an ACL on target.
. tests/lib.sh
set -u
T=$(mktemp -d /var/tmp/warden-symgrant.XXXXXX)
chmod 755 "$T"
export WARDEN_RUNTIME_DIR=$T/rt WARDEN_UID_DIR=$T/uids
mkdir -m 711 "$T/rt"
trap 'rm -rf "$T"' EXIT
LIBS='"/usr", "/lib", "/lib64", "/etc/ld.so.cache"'

manifest() { # file tier write-list read-extra
	cat >"$1" <<Y
name: symgrant
tier: $2
timeout_ms: 20000
network: {allow: []}
filesystem: {write: [$3], read: [$LIBS$4], exec: ["/usr/bin"]}
Y
}
# pool-uid entries on a file's ACL (a grant that landed there)
acl_pool() { getfacl -cp "$1" 2>/dev/null | grep -c '^user:2[0-9]\{9\}:'; }

for tier in 1 2 3; do
	A=$T/t$tier
	mkdir -p "$A/ws/out" "$A/target" "$A/shared/data" "$A/secret"
	chmod 755 "$A" "$A/ws" "$A/ws/out" "$A/target" "$A/shared" "$A/shared/data"
	chmod 700 "$A/secret"
	# tier 3 gives access by the mode bits (gVisor ignores the ACLs)
	[ $tier = 3 ] && chmod 0777 "$A/ws" "$A/ws/out" "$A/shared" "$A/shared/data"
	echo s3cret >"$A/secret/key"
	chmod 600 "$A/secret/key"

	# -- the same manifest: a write path nested in another --------------
	manifest "$A/nested.yaml" $tier "\"$A/ws\", \"$A/ws/out\"" ""
	"$WARDEN" exec --policy "$A/nested.yaml" -- /bin/sh -c \
		"rmdir $A/ws/out && ln -s $A/target $A/ws/out" >/dev/null 2>&1
	if [ ! -L "$A/ws/out" ]; then
		fail "t$tier/nested-link-planted" "call 1 could not plant its link"
		continue
	fi
	expect_eq "t$tier/tool-link-not-roots" "$(stat -c %u "$A/ws/out")" 65534
	out=$("$WARDEN" exec --policy "$A/nested.yaml" -- /bin/sh -c \
		"touch $A/ws/out/pwned && echo wrote" 2>&1)
	rc=$?
	if [ -e "$A/target/pwned" ]; then
		fail "t$tier/nested-link-not-followed" "call 2 wrote through the link: $out"
	else
		pass "t$tier/nested-link-not-followed"
	fi
	expect_eq "t$tier/nested-no-acl-on-target" "$(acl_pool "$A/target")" 0
	[ $rc -ne 0 ] && pass "t$tier/nested-call-refused" ||
		fail "t$tier/nested-call-refused" "rc 0: $out"
	expect_match "t$tier/nested-refusal-names-link" "$out" "ws/out' is a symlink of uid 65534"

	# -- another team: its write path lies under this team's ------------
	manifest "$A/writer.yaml" $tier "\"$A/shared\"" ""
	manifest "$A/reader.yaml" $tier "\"$A/shared/data\"" ""
	"$WARDEN" exec --policy "$A/writer.yaml" -- /bin/sh -c \
		"rmdir $A/shared/data && ln -s $A/secret $A/shared/data" >/dev/null 2>&1
	out=$("$WARDEN" exec --policy "$A/reader.yaml" -- /bin/sh -c \
		"ls $A/shared/data $A/secret; touch $A/shared/data/planted $A/secret/planted" 2>&1)
	if [ -e "$A/secret/planted" ] || printf '%s' "$out" | grep -q '^key$'; then
		fail "t$tier/other-team-link-not-followed" "the other team's call listed or wrote the secret dir through the link: $out"
	else
		pass "t$tier/other-team-link-not-followed"
	fi
	expect_match "t$tier/other-team-refusal-names-link" "$out" "shared/data' is a symlink of uid 65534"

	# -- root's links: followed in a root-only directory, not in others' --
	mkdir -p "$A/lib-real" "$A/pub"
	chmod 755 "$A/lib-real"
	chmod 1777 "$A/pub"
	echo hello >"$A/lib-real/f"
	chmod 644 "$A/lib-real/f"
	ln -s lib-real "$A/lib"
	ln -s ../lib-real "$A/pub/lib"
	manifest "$A/rootlink.yaml" $tier "\"$A/ws\"" ", \"$A/lib\""
	out=$("$WARDEN" exec --policy "$A/rootlink.yaml" -- /bin/sh -c "cat $A/lib-real/f" 2>&1)
	expect_match "t$tier/root-link-followed" "$out" '^hello'
	manifest "$A/publink.yaml" $tier "\"$A/ws\"" ", \"$A/pub/lib\""
	out=$("$WARDEN" exec --policy "$A/publink.yaml" -- /bin/true 2>&1)
	expect_match "t$tier/link-in-world-writable-dir-refused" "$out" "in a directory its group or others may write"
done
finish
