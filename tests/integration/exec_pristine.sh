#!/usr/bin/env bash
# A pristine node works in any order: in a private mount namespace with a
# fresh, empty tmpfs over /run (no /run/warden at all), a tier-3 call
# comes first (it makes the runtime dir and its private runsc root), then
# a tier-1 call and a tier-2 call must still work as the unprivileged
# uid. Judged outside the sandbox: each call's status and output, and the
# modes of the directories warden made. The first call's own dir modes
# used to leak into every parent (wd_mkdir_p): /run/warden 0700 and every
# later tier-1 call failed with "chdir: Permission denied".
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { skip pristine "needs root"; finish; }
command -v unshare >/dev/null || { skip pristine "unshare (util-linux) missing"; finish; }

T=$(mktemp -d /tmp/warden-pristine.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
cat >"$T/t1.yaml" <<'EOF'
name: pristine1
description: tier 1 after tier 3
tier: 1
exec: ["/usr/bin/dash", "-c"]
timeout_ms: 10000
memory_mb: 64
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin"]}
EOF
sed 's/^tier: 1/tier: 2/; s/pristine1/pristine2/' "$T/t1.yaml" >"$T/t2.yaml"
cat >"$T/t3.yaml" <<'EOF'
name: pristine3
description: tier 3 first
tier: 3
exec: ["/usr/bin/dash", "-c"]
timeout_ms: 30000
memory_mb: 128
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin"]}
EOF

# Everything below runs in the private namespace; its results come back
# in files under $T (outside the new /run).
cat >"$T/inner.sh" <<EOF
set -u
mount -t tmpfs -o mode=0755 pristine /run || exit 3
unset WARDEN_RUNTIME_DIR # the default one, /run/warden, made fresh
umask 077   # a strict umask must not leak into the dirs warden makes
if command -v runsc >/dev/null; then
	"$WARDEN" exec --policy "$T/t3.yaml" --json -- /usr/bin/dash -c 'echo t3ok' >"$T/r3" 2>"$T/e3"
	echo \$? >"$T/rc3"
else
	echo none >"$T/rc3"
fi
"$WARDEN" exec --policy "$T/t1.yaml" --json -- /usr/bin/dash -c 'cd "\$HOME" && echo t1ok >f && cat f' >"$T/r1" 2>"$T/e1"
echo \$? >"$T/rc1"
"$WARDEN" exec --policy "$T/t2.yaml" --json -- /usr/bin/dash -c 'echo t2ok' >"$T/r2" 2>"$T/e2"
echo \$? >"$T/rc2"
stat -c '%n %a' /run/warden /run/warden/* >"$T/modes" 2>&1
EOF
unshare -m --propagation private bash "$T/inner.sh"
rc=$?
[ "$rc" = 3 ] && { skip pristine "cannot mount a tmpfs over /run in a private namespace"; finish; }

if [ "$(cat "$T/rc3")" = none ]; then
	skip pristine/tier3-first "runsc not installed: the tier-1 call still comes first on a fresh /run"
else
	expect_match pristine/tier3-first "$(cat "$T/r3" "$T/e3")" '"stdout": "t3ok'
fi
expect_match pristine/tier1-after "$(cat "$T/r1" "$T/e1")" '"stdout": "t1ok'
expect_eq pristine/tier1-after-exit "$(cat "$T/rc1")" 0
expect_match pristine/tier2-after "$(cat "$T/r2" "$T/e2")" '"stdout": "t2ok'
# the runtime dir must be traversable by a call's uid, whoever made it
m=$(awk '$1 == "/run/warden" {print $2}' "$T/modes")
expect_match pristine/runtime-dir-traversable "$m" '^7[0-7]1$|^7[0-7]5$'
finish
