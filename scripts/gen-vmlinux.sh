#!/usr/bin/env bash
# Regenerate vmlinux/<arch>/vmlinux.h from the running kernel's BTF.
# CO-RE relocations make one header good for every kernel we load on.
set -euo pipefail
arch=$(uname -m); case "$arch" in x86_64) arch=x86;; aarch64) arch=arm64;; esac
src=${1:-/sys/kernel/btf/vmlinux}
out="$(dirname "$0")/../vmlinux/$arch/vmlinux.h"
mkdir -p "$(dirname "$out")"
bpftool btf dump file "$src" format c > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
