#!/usr/bin/env bash
# Install every Debian package warden needs to build, test and demo.
# Idempotent and quiet when everything is already present.
set -euo pipefail

PKGS=(
  build-essential clang llvm libbpf-dev bpftool pkg-config
  libseccomp-dev libyaml-dev libjansson-dev zlib1g-dev
  libssl-dev libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev
  clang-format libclang-rt-14-dev
  libnftables-dev nftables   # tier 3 beyond the node: source NAT (sandbox/t3beyond.c); nft in tests
  runsc bubblewrap iproute2 curl python3 gcc jq strace
  busybox-static qemu-system-x86 cpio
  chromium fonts-dejavu-core   # tests/integration/trace_html.sh renders the run viewer
  prometheus prometheus-alertmanager   # tests/integration/monitoring.sh: real scrape, rules, routing
  libpq-dev postgresql   # wardend --fleet (libpq); tests/integration/fleet_*.sh start a real server
  golang-go golang-k8s-kube-openapi-dev   # tests/k8s/apiserver.go: the API schema served as kube-apiserver does
)
# Debian's kubectl (kubernetes-client) and the API schema of its release,
# once the packages above are in: scripts/deps-k8s.sh says why it is not
# simply one more package here.
k8s() { "$(dirname "$0")/deps-k8s.sh"; }
[ "${WARDEN_DEPS_EXTRA:-}" ] && PKGS+=(${WARDEN_DEPS_EXTRA})

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  k8s
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/deps.sh: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "scripts/deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
k8s
