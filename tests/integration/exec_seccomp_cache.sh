#!/usr/bin/env bash
# The per-boot file cache of seccomp programs (enforce/seccomp_cache.c)
# through `warden exec`: the first call builds its filter with libseccomp
# (seen as the export's memfd_create("warden-seccomp")) and keeps it in
# <runtime dir>/seccomp/ (root, 0644); the next call of the same manifest
# reads it and builds nothing, and its syscall line holds as the built
# one did (uname denied by syscalls.deny). A file that is not root's, is
# writable by others, is a symlink, is garbage, has a flipped byte or was
# kept under another boot (its checksum made right) is never used: the
# call builds again and the file is replaced. Nor is a good file in a
# seccomp/ directory that is not root's alone or is a symlink. Another manifest's deny list
# gets a program (and a file) of its own.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/cache_lib/untrusted.sh"
cache_setup seccomp-cache sccache
D=$T/rt/seccomp
for v in deny open; do
	deny='["uname"]'; [ $v = open ] && deny='[]'
	cat >"$T/$v.yaml" <<EOF2
name: sccache-$v
description: seccomp cache
tier: 1
timeout_ms: 30000
memory_mb: 128
network: {allow: []}
syscalls: {deny: $deny}
filesystem: {read: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], write: [], exec: ["/usr/bin/uname"]}
EOF2
done
# call V: a call of manifest V running uname under strace; prints its exit
# code, whether it built the program (1) or took it from the cache (0),
# and whether uname was denied
call() {
	strace -f -qq -o "$T/st" -e trace=memfd_create "$WARDEN" exec --policy "$T/$1.yaml" -- /usr/bin/uname >"$T/out" 2>&1
	local rc=$?
	local d=0
	grep -q 'denied seccomp: syscall uname' "$T/out" && d=1
	echo "rc=$rc built=$(grep -c 'memfd_create("warden-seccomp"' "$T/st") denied=$d"
}
# uname fails when its syscall is refused (exit 1)
expect_eq sccache/first-call-builds "$(call deny)" "rc=1 built=1 denied=1"
F=$(ls "$D"/* 2>/dev/null | head -1)
expect_eq sccache/written-root-0644 "$(stat -c '%u %a %F' "$F" 2>&1)" "0 644 regular file"
expect_eq sccache/second-call-cached-still-denies "$(call deny)" "rc=1 built=0 denied=1"
expect_eq sccache/other-manifest-builds "$(call open)" "rc=0 built=1 denied=0"
expect_eq sccache/other-manifest-cached "$(call open)" "rc=0 built=0 denied=0"
expect_eq sccache/one-file-each "$(ls "$D" | grep -vc tmp)" 2
expect_eq sccache/first-still-cached "$(call deny)" "rc=1 built=0 denied=1"
cp -p "$F" "$T/good"

call_deny() { call deny; }
untrusted_dir sccache "$D" "$F" call_deny rebuilt "rc=1 built=1 denied=1"
expect_eq sccache/dir-restored-cached "$(call deny)" "rc=1 built=0 denied=1"
untrusted_cache sccache "$F" call_deny rebuilt "rc=1 built=1 denied=1"
cmp -s "$F" "$T/good" && pass sccache/garbage-rewritten || fail sccache/garbage-rewritten "$(head -c 20 "$F" | od -c | head -2)"
# a byte of the program flipped (the checksum): rebuilt
size=$(stat -c %s "$F")
printf '\x01' | dd of="$F" bs=1 seek=$((size - 5)) conv=notrunc status=none
# a hard link holds the corrupt file's inode: its number cannot be reused
# (ext4 hands freed numbers out again), so a new number proves a new file
# renamed over it, and the held file unchanged proves no write in place
ln "$F" "$T/held"
ino=$(stat -c %i "$F") sum=$(cksum <"$F")
expect_eq sccache/corrupt-rebuilt "$(call deny)" "rc=1 built=1 denied=1"
[ "$(stat -c %i "$F")" != "$ino" ] && [ "$(cksum <"$T/held")" = "$sum" ] &&
	pass sccache/rewritten-by-rename || fail sccache/rewritten-by-rename "inode $ino -> $(stat -c %i "$F")"
rm -f "$T/held"
# kept under another boot, the checksum made right: a file of this format
# that a root process could have written, but not for this boot
python3 - "$F" <<'EOF2'
import struct, sys, zlib
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[24] = ord('0') if b[24] != ord('0') else ord('1')  # boot id's first byte
b[20:24] = b'\0\0\0\0'
b[20:24] = struct.pack('<I', zlib.crc32(bytes(b)) & 0xffffffff)
open(p, 'wb').write(b)
EOF2
expect_eq sccache/other-boot-rebuilt "$(call deny)" "rc=1 built=1 denied=1"
cmp -s "$F" "$T/good" && pass sccache/other-boot-rewritten || fail sccache/other-boot-rewritten "differs from the file this boot wrote"
# a symlink to a good file: not followed, replaced by a file
rm -f "$F"; ln -s "$T/good" "$F"
expect_eq sccache/symlink-rebuilt "$(call deny)" "rc=1 built=1 denied=1"
[ -f "$F" ] && [ ! -L "$F" ] && pass sccache/symlink-replaced || fail sccache/symlink-replaced "$(ls -l "$F")"
expect_eq sccache/cached-again "$(call deny)" "rc=1 built=0 denied=1"
finish
