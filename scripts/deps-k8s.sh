#!/usr/bin/env bash
# Debian's kubectl and the Kubernetes API schema of its release, for
# tests/integration/k8s_manifests.sh (scripts/k8s-daemonset.yaml checked
# against the API schema by `kubectl apply --dry-run=client --validate`).
# Run by scripts/deps.sh after its packages (golang-go and
# golang-k8s-kube-openapi-dev build the test's API endpoint). Idempotent;
# quiet when everything is there. Everything lands in $WARDEN_K8S_DIR
# (default /var/cache/warden-deps/k8s):
#   bin/kubectl    Debian's kubernetes-client kubectl
#   swagger.json   api/openapi-spec/swagger.json of Debian's `kubernetes`
#                  source package at kubernetes-client's version: the API
#                  schema that release's kube-apiserver serves
#   version        that version
#
# kubectl: kubernetes-client is installed as usual where /usr/bin/kubectl
# does not exist. Where it does (another package's kubectl, e.g. a cloud
# SDK's, or one installed by hand), installing would fail -- both packages
# ship /usr/bin/kubectl and dpkg refuses to overwrite another package's
# file -- and replacing the machine's kubectl is not this script's to do:
# the package is then unpacked under $WARDEN_K8S_DIR instead (apt-get
# download checks it against the signed archive as an install does).
#
# The schema: Debian builds only kubectl from the kubernetes source in
# bookworm (no kube-apiserver package), but the source carries the API's
# OpenAPI document. It is fetched with `apt-get source --download-only`
# through a private source list (deb-src of the machine's own Debian
# archives) and private lists, leaving the machine's apt configuration as
# it is; only swagger.json is kept (no Debian patch touches it).
set -euo pipefail

D=${WARDEN_K8S_DIR:-/var/cache/warden-deps/k8s}
have=""
if dpkg-query -W -f='${Status}' kubernetes-client 2>/dev/null | grep -q "install ok installed"; then
	have=$(dpkg-query -W -f='${Version}' kubernetes-client)
fi
[ -n "$have" ] && [ "$(readlink "$D/bin/kubectl" 2>/dev/null)" = /usr/bin/kubectl ] &&
	[ -s "$D/swagger.json" ] && [ "$(cat "$D/version" 2>/dev/null)" = "$have" ] && exit 0
if [ -z "$have" ] && [ -x "$D/kubernetes-client/usr/bin/kubectl" ] && [ -s "$D/swagger.json" ] &&
	[ "$(cat "$D/version" 2>/dev/null)" = "$(cat "$D/kubernetes-client.version" 2>/dev/null)" ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/deps-k8s.sh: Debian's kubectl or the API schema missing in $D; run as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
mkdir -p "$D/bin"
tmp=$(mktemp -d "$D/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -z "$have" ] && [ ! -e /usr/bin/kubectl ]; then
	echo "scripts/deps-k8s.sh: installing kubernetes-client"
	apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
	have=$(dpkg-query -W -f='${Version}' kubernetes-client)
fi
# the schema comes from the source package of the kubectl in use: its
# source version (a binNMU's binary version has a +bN of its own)
if [ -n "$have" ]; then
	ver=$have
	srcver=$(dpkg-query -W -f='${source:Version}' kubernetes-client)
	ln -sfn /usr/bin/kubectl "$D/bin/kubectl"
else
	owner=$(dpkg-query -S /usr/bin/kubectl 2>/dev/null | cut -d: -f1 || true)
	echo "scripts/deps-k8s.sh: /usr/bin/kubectl belongs to ${owner:-no package}: unpacking Debian's kubernetes-client under $D"
	(cd "$tmp" && apt-get -o APT::Sandbox::User=root download -qq kubernetes-client >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null &&
			apt-get -o APT::Sandbox::User=root download -qq kubernetes-client >/dev/null; })
	deb=$(ls "$tmp"/kubernetes-client_*.deb)
	ver=$(dpkg-deb -f "$deb" Version)
	srcver=$(dpkg-deb -f "$deb" Source | sed -n 's/.*(\(.*\)).*/\1/p')
	srcver=${srcver:-$ver}
	rm -rf "$D/kubernetes-client"
	dpkg-deb -x "$deb" "$D/kubernetes-client"
	echo "$ver" >"$D/kubernetes-client.version"
	ln -sfn "$D/kubernetes-client/usr/bin/kubectl" "$D/bin/kubectl"
fi

if [ "$(cat "$D/version" 2>/dev/null)" != "$ver" ] || [ ! -s "$D/swagger.json" ]; then
	echo "scripts/deps-k8s.sh: the Kubernetes API schema of kubernetes $ver (Debian source package)"
	mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
	apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(ORIGIN)' 'Identifier: Packages' |
		awk '$3 == "Debian" { print "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " $1 " " $2 " main" }' |
		sort -u >"$tmp/sources.list"
	[ -s "$tmp/sources.list" ] || { echo "scripts/deps-k8s.sh: no Debian archive in apt's sources" >&2; exit 1; }
	A=(-o APT::Sandbox::User=root -o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=$tmp/none"
		-o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
	apt-get "${A[@]}" update -qq >/dev/null
	(cd "$tmp/src" && apt-get "${A[@]}" source --download-only -qq "kubernetes=$srcver" >/dev/null)
	tar -xzf "$tmp"/src/kubernetes_*.orig.tar.gz -C "$tmp/src" --wildcards '*/api/openapi-spec/swagger.json'
	spec=$(ls "$tmp"/src/*/api/openapi-spec/swagger.json)
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["swagger"] == "2.0" and d["definitions"]' "$spec"
	mv "$spec" "$D/swagger.json"
	echo "$ver" >"$D/version"
fi
