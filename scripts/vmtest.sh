#!/usr/bin/env bash
# make vmtest: run the BPF LSM tests (and the other tests listed in
# tests/vm/) inside a stock Debian kernel under qemu.
#
# Why a guest: the build machines' kernel refuses every program that needs a
# BPF trampoline (lsm/, lsm_cgroup/, fentry/ load with EPERM), so the LSM
# hooks can only be proven on a kernel that allows them. Debian's
# linux-image-6.1.0-*-cloud-amd64 has bpf in its LSM list; it is fetched with
# `apt-get download` into $BUILD/vmtest/cache (kept for the next run),
# unpacked with dpkg -x (never installed) and booted with TCG (KVM is not
# usable here) under a hard timeout.
#
# The initramfs holds busybox-static, bash, the project's binaries and test
# binaries. Binaries that are not static get their shared-library closure
# (from ldd) copied alongside: a fully static `warden` is not possible with
# Debian's libcurl.a, which needs libgssapi_krb5/libldap/librtmp archives
# Debian does not ship.
#
# Grading is on the guest's own output: qemu exits 0 even after a kernel
# panic, so this script requires the sentinel line the guest prints after
# its last test and fails on any FAIL line. Output: the guest's PASS/FAIL/SKIP
# lines with names prefixed "vm/".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) VM=$BUILD/vmtest ;; *) VM=$PWD/$BUILD/vmtest ;; esac
CACHE=$VM/cache
TIMEOUT=${VMTEST_TIMEOUT:-$([ -n "${VMTEST_FULL:-}" ] && echo 900 || echo 400)}
MEM=${VMTEST_MEM:-1024}
LSMS=lockdown,capability,landlock,yama,bpf

die() { echo "FAIL vm/setup: $*"; exit 1; }

for tool in qemu-system-x86_64 busybox cpio dpkg apt-get ldd; do
	command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done
BUSYBOX=$(command -v busybox)
# busybox-static: the dynamic busybox would work too, but the static one
# needs nothing else in the guest.
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	{ [ -x /bin/busybox ] && BUSYBOX=/bin/busybox; }

# ---- kernel ------------------------------------------------------------------
mkdir -p "$CACHE"
kdeb=$(ls -1 "$CACHE"/linux-image-6.1.0-*-cloud-amd64_*.deb 2>/dev/null | sort -V | tail -1)
if [ -z "$kdeb" ]; then
	# The metapackage names the current ABI (linux-image-6.1.0-N-cloud-amd64).
	kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		awk '/Depends: linux-image-6\.1\.0-[0-9]+-cloud-amd64$/ {print $2; exit}')
	if [ -z "$kpkg" ]; then
		kpkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' |
			awk '{print $1}' | sort -V | tail -1)
	fi
	[ -n "$kpkg" ] || die "no linux-image-6.1.0-*-cloud-amd64 in the apt sources (bookworm main)"
	(cd "$CACHE" && apt-get download -q "$kpkg" >/dev/null 2>"$VM/apt.log") ||
		die "apt-get download $kpkg failed: $(tail -3 "$VM/apt.log")"
	kdeb=$(ls -1 "$CACHE"/"$kpkg"_*.deb | tail -1)
fi
kdir=$CACHE/$(basename "$kdeb" .deb)
if [ ! -d "$kdir/boot" ]; then
	rm -rf "$kdir.tmp" && dpkg -x "$kdeb" "$kdir.tmp" && mv "$kdir.tmp" "$kdir" ||
		die "dpkg -x $kdeb failed"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -1)
kconfig=$(ls "$kdir"/boot/config-* | head -1)
grep -q '^CONFIG_BPF_LSM=y' "$kconfig" || die "$vmlinuz: CONFIG_BPF_LSM is not set"

# ---- binaries ----------------------------------------------------------------
if [ -z "${VMTEST_NO_BUILD:-}" ]; then
	# -k: a target another part of the tree breaks must not hide the
	# guest tests that do build; the ones that do not are SKIPped in the
	# guest with "not built", and `make test` reports the build failure.
	make -k --no-print-directory BUILD="$BUILD" tests-build >"$VM/build.log" 2>&1 ||
		echo "# vmtest: build incomplete, see $VM/build.log"
fi

# ---- initramfs ---------------------------------------------------------------
root=$VM/root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc,root,w,lib64,usr/bin}

# copy FILE into the guest at the same path, with its shared libraries
add_bin() {
	local f=$1 dest=${2:-$1}
	mkdir -p "$root$(dirname "$dest")"
	cp -L "$f" "$root$dest" || return 1
	ldd "$f" 2>/dev/null | grep -oE '(/[^ ]+)' | while read -r lib; do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}

cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
	[ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
add_bin "$(command -v bash)" /bin/bash || die "no bash"
# python3 (the integration tests' loopback servers): the interpreter, its
# standard library without tests/tk/idle/build config, and the closure of
# its extension modules. ~25 MB; VMTEST_NO_PYTHON=1 leaves it out.
# Debian's python (not a pyenv or venv one found first on PATH).
if [ -z "${VMTEST_NO_PYTHON:-}" ] && [ -x /usr/bin/python3 ]; then
	add_bin /usr/bin/python3
	pylib=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
	mkdir -p "$root$pylib"
	tar -C "$pylib" -cf - --exclude=./test --exclude=./idlelib --exclude=./tkinter \
		--exclude=./ensurepip --exclude=./lib2to3 --exclude=./pydoc_data \
		--exclude='./config-*' --exclude=./site-packages --exclude=./dist-packages . |
		tar -C "$root$pylib" -xf -
	for so in "$pylib"/lib-dynload/*.so; do
		ldd "$so" 2>/dev/null | grep -oE '(/[^ ]+)' | while read -r lib; do
			[ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
		done
	done
fi
# Tools the guest tests may call besides busybox applets: strace and
# bpftool (tests/vm/lsm_pins.sh counts the BPF programs a call loads; it
# skips without them), and any named in VMTEST_EXTRA_BINS.
for t in strace bpftool; do
	command -v "$t" >/dev/null && add_bin "$(command -v "$t")"
done
for t in ${VMTEST_EXTRA_BINS:-}; do add_bin "$(command -v "$t")" || die "no $t"; done

mkdir -p "$root/w/$BUILD" "$root/w/tests"
cp -r tests/. "$root/w/tests/"
# warden-init: tier 2's pid 1, found next to the binaries
for b in "$BUILD"/warden "$BUILD"/wardend "$BUILD"/warden-init; do
	[ -x "$b" ] && add_bin "$b" "/w/$b"
done
for d in tests/unit tests/helpers; do
	for b in "$BUILD/$d"/*; do
		[ -x "$b" ] && [ -f "$b" ] && add_bin "$b" "/w/$b"
	done
done
[ -d policy ] && cp -r policy "$root/w/policy"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
echo "127.0.0.1 localhost" >"$root/etc/hosts"
echo "::1 localhost" >>"$root/etc/hosts"

cat >"$root/init" <<EOF
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
# The initramfs root (rootfs) has no parent mount, so pivot_root (tier-2
# sandboxes) fails on it. Re-root onto a bind mount of it (no copy) first.
if [ -z "\$WD_STAGE2" ]; then
	mkdir -p /newroot && mount --bind / /newroot && cd /newroot &&
		mount --move . / && exec chroot . /bin/env WD_STAGE2=1 /init
	echo "@@VM re-root failed"
fi
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
ln -sf /proc/self/fd /dev/fd; ln -sf fd/0 /dev/stdin; ln -sf fd/1 /dev/stdout; ln -sf fd/2 /dev/stderr
mkdir -p /dev/shm /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t securityfs securityfs /sys/kernel/security
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo 1 >/proc/sys/kernel/printk
ip link set lo up
echo; echo "@@VM kernel \$(uname -r) lsm=\$(cat /sys/kernel/security/lsm)"
cd /w && BUILD=$BUILD bash tests/vm/guest.sh
echo "@@VM-END rc=\$?"
sync
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) >"$VM/initramfs.cpio" ||
	die "cpio failed"

# ---- boot --------------------------------------------------------------------
console=$VM/console.log
t0=$(date +%s.%N)
timeout --kill-after=5 "$TIMEOUT" qemu-system-x86_64 -accel tcg${VMTEST_QEMU_OPTS:+ $VMTEST_QEMU_OPTS} -m "$MEM" -smp 2 \
	-nographic -no-reboot -nodefaults -serial stdio -display none \
	-kernel "$vmlinuz" -initrd "$VM/initramfs.cpio" \
	-append "console=ttyS0 lsm=$LSMS panic=-1 quiet loglevel=3 rdinit=/init${VMTEST_DUMP:+ vmtest.dump}${VMTEST_FULL:+ vmtest.full}" \
	</dev/null >"$console" 2>&1
qrc=$?
secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")

tr -d '\r' <"$console" | sed -n 's/^\(PASS\|FAIL\|SKIP\) /\1 vm\//p'
tr -d '\r' <"$console" | grep -E '^@@VM (kernel|time)' | sed 's/^@@VM /# guest: /'
end=$(tr -d '\r' <"$console" | grep -m1 '^@@VM-END' || true)
if [ -z "$end" ]; then
	if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
		echo "FAIL vm/boot: qemu timed out after ${TIMEOUT}s (console: $console)"
	else
		echo "FAIL vm/boot: guest never printed its end line (qemu rc=$qrc; console: $console)"
	fi
	tr -d '\r' <"$console" | tail -25 | sed 's/^/    /'
	exit 1
fi
echo "# vmtest: ${secs}s in qemu (TCG), console log $console"
if tr -d '\r' <"$console" | grep -q '^FAIL '; then exit 1; fi
exit 0
