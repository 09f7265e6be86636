#!/usr/bin/env bash
# The per-boot probe cache (enforce/probe_cache.c) through `warden exec`:
# the first call probes and writes <runtime dir>/probe-kernel (root, 0644);
# the next one reads it; a cache that is not root's, is writable by others,
# is a symlink or is garbage, or one in a runtime dir that is not root's
# alone or is a symlink, is never trusted: the call probes again (seen
# as the user-namespace probe's unshare(CLONE_NEWUSER), which a tier-1
# call never makes itself) and the file is replaced. A tier-1 or tier-2
# call never runs runsc: WARDEN_RUNSC names a wrapper that logs every run,
# and strace -f sees every execve (a tier-3 call is the control: it does
# run the wrapper).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/cache_lib/untrusted.sh"
cache_setup probe-cache pcache
C=$T/rt/probe-kernel
for t in 1 2 3; do
	cat >"$T/t$t.yaml" <<EOF2
name: pcache$t
description: probe cache
tier: $t
exec: ["/usr/bin/true"]
timeout_ms: 30000
memory_mb: 128
network: {allow: []}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin/true"]}
EOF2
done
# probes NAME: run a tier-1 call under strace; print how many user
# namespace probes it made (0 = the cache was used)
probes() {
	strace -f -qq -o "$T/st" -e trace=unshare "$WARDEN" exec --policy "$T/t1.yaml" -- /usr/bin/true >"$T/out" 2>&1
	echo "rc=$? n=$(grep -c 'unshare(CLONE_NEWUSER' "$T/st")"
}

expect_eq pcache/first-call-probes "$(probes)" "rc=0 n=1"
expect_eq pcache/written-root-0644 "$(stat -c '%u %a %F' "$C" 2>&1)" "0 644 regular file"
expect_eq pcache/second-call-cached "$(probes)" "rc=0 n=0"

untrusted_dir pcache "$T/rt" "$C" probes reprobed "rc=0 n=1"
expect_eq pcache/dir-restored-cached "$(probes)" "rc=0 n=0"
untrusted_cache pcache "$C" probes reprobed "rc=0 n=1"
[ "$(head -c 7 "$C")" = WDPROBE ] && pass pcache/garbage-rewritten || fail pcache/garbage-rewritten "$(head -c 20 "$C" | od -c | head -2)"
# a byte of the answers flipped (the checksum): re-probed
printf '\x01' | dd of="$C" bs=1 seek=600 conv=notrunc status=none
# a hard link holds the corrupt file's inode: its number cannot be reused,
# so a new number proves a new file renamed over it, and the held file
# unchanged proves nothing was written in place
ln "$C" "$T/held"
ino=$(stat -c %i "$C") sum=$(cksum <"$C")
expect_eq pcache/corrupt-reprobed "$(probes)" "rc=0 n=1"
[ "$(stat -c %i "$C")" != "$ino" ] && [ "$(cksum <"$T/held")" = "$sum" ] &&
	pass pcache/rewritten-by-rename || fail pcache/rewritten-by-rename "inode $ino -> $(stat -c %i "$C")"
rm -f "$T/held"
# a symlink to a good cache: not followed, replaced by a file
cp -p "$C" "$T/good"
rm -f "$C"; ln -s "$T/good" "$C"
expect_eq pcache/symlink-reprobed "$(probes)" "rc=0 n=1"
[ -f "$C" ] && [ ! -L "$C" ] && pass pcache/symlink-replaced || fail pcache/symlink-replaced "$(ls -l "$C")"
expect_eq pcache/cached-again "$(probes)" "rc=0 n=0"

# tiers 1 and 2 never run runsc (not even `runsc --version`)
cat >"$T/runsc" <<EOF2
#!/bin/sh
echo "\$*" >>"$T/runsc.log"
exec /usr/bin/runsc "\$@"
EOF2
chmod 755 "$T/runsc"
export WARDEN_RUNSC=$T/runsc
for t in 1 2; do
	rm -f "$C" "$T/runsc.log"   # a probing call as well as a cached one
	for k in probing cached; do
		strace -f -qq -o "$T/ex" -e trace=execve "$WARDEN" exec --policy "$T/t$t.yaml" -- /usr/bin/true >"$T/out" 2>&1
		rc=$?
		expect_eq "pcache/tier$t-$k-runs" "$rc" 0
		n=$(grep -c 'execve(".*runsc' "$T/ex")
		[ "$n" = 0 ] && [ ! -e "$T/runsc.log" ] && pass "pcache/tier$t-$k-no-runsc" ||
			fail "pcache/tier$t-$k-no-runsc" "$(grep runsc "$T/ex" | head -3; cat "$T/runsc.log" 2>/dev/null)"
	done
done
# A one-shot call loads neither libcurl nor libnftables (cli/curl_lazy.c,
# nft_lazy.c: loaded at their first call, which a call on the node never
# makes), nor libpq (the CLI has no fleet box), nor libcrypto's
# configuration (no hashing on its path: the probe cache is crc32, the BPF
# object's hash comes from the build). Control: a verb that asks wardend
# does load libcurl, and reports the peer that hung up.
strace -f -qq -o "$T/op" -e trace=openat "$WARDEN" exec --policy "$T/t1.yaml" -- /usr/bin/true >"$T/out" 2>&1
rc=$?
expect_eq pcache/exec-no-libcurl "rc=$rc $(grep -c -e 'libcurl' -e 'libnftables' -e 'libpq' "$T/op")" "rc=0 0"
expect_eq pcache/exec-no-openssl-config "$(grep -c 'openssl.cnf' "$T/op")" 0
# nor libcrypto and libsqlite3 themselves (cli/crypto_lazy.c,
# sqlite_lazy.c: the trace verbs load them; trace_cli.sh and the other
# trace tests run those)
expect_eq pcache/exec-no-libcrypto-libsqlite "$(grep -c -e 'libcrypto\.so' -e 'libsqlite3\.so' "$T/op")" 0
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
for _ in range(4):
    c, _ = s.accept(); c.recv(4096); c.close()
' "$T/hangup.sock" & hp=$!
for _ in $(seq 50); do [ -S "$T/hangup.sock" ] && break; sleep 0.05; done
WARDEN_SOCKET=$T/hangup.sock strace -f -qq -o "$T/op2" -e trace=openat "$WARDEN" approvals ls >"$T/out" 2>&1
rc=$?
kill "$hp" 2>/dev/null; wait "$hp" 2>/dev/null
expect_eq pcache/client-loads-libcurl "rc=$rc $(grep -c 'libcurl.so' "$T/op2")" "rc=1 1"
expect_match pcache/client-names-failure "$(cat "$T/out")" "approvals"
if [ -x /usr/bin/runsc ]; then
	"$WARDEN" exec --policy "$T/t3.yaml" -- /usr/bin/true >"$T/out" 2>&1
	rc=$?
	[ -s "$T/runsc.log" ] && pass pcache/tier3-control-runs-runsc ||
		fail pcache/tier3-control-runs-runsc "rc $rc, the wrapper logged nothing: $(tail -3 "$T/out")"
else
	skip pcache/tier3-control-runs-runsc "runsc not installed"
fi
finish
