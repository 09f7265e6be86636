#!/usr/bin/env bash
# Real programs under reasonable manifests: python3, an sh pipeline, curl to
# an allowed loopback HTTP server, gcc compiling in scratch.
. tests/lib.sh
set -u
T=$(mktemp -d /run/warden-test.XXXXXX); chmod 755 "$T"
trap '[ -n "${HPID:-}" ] && kill $HPID 2>/dev/null; rm -rf "$T"' EXIT
SYS='"/usr", "/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"'
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

mk() { # name tier exec-list allow extra
	cat > "$T/$1.yaml" <<Y
name: $1
tier: $2
timeout_ms: 30000
memory_mb: 512
pids: 64
network: {allow: $4}
filesystem: {read: [$SYS ${5:-}], write: [], exec: [$3]}
Y
	echo "$T/$1.yaml"
}

for tier in 1 2; do
	M=$(mk py$tier $tier '"/usr/bin/python3"' '[]')
	out=$(echo 'print(sum([12, 95, 71, 43, 88]) / 5)' | "$WARDEN" exec --policy "$M" --stdin - -- /usr/bin/python3 - 2>/dev/null)
	expect_eq "t$tier/python3-computes" "$out" "61.8"

	M=$(mk sh$tier $tier '"/usr/bin"' '[]')
	out=$("$WARDEN" exec --policy "$M" -- /bin/sh -c 'seq 1 100 | sort -rn | head -3 | tr "\n" " "' 2>/dev/null)
	expect_eq "t$tier/sh-pipeline" "$out" "100 99 98 "

	M=$(mk cc$tier $tier '"/usr/bin", "/usr/lib/gcc", "/usr/libexec"' '[]')
	out=$("$WARDEN" exec --policy "$M" -- /bin/sh -c 'cd $TMPDIR && printf "#include <stdio.h>\nint main(void){printf(\"%%d\\\\n\", 6*7);return 0;}\n" > a.c && gcc -O1 -o a a.c && test -s a && echo built; ./a' 2>&1)
	expect_match "t$tier/gcc-compiles-in-scratch" "$out" "^built"
	# scratch is writable but not executable: a built binary cannot run
	expect_match "t$tier/scratch-not-executable" "$out" "a: Permission denied"
done

# curl to an allowed loopback server; another port is refused in-kernel
mkdir -p "$T/www"; echo "hello from loopback" > "$T/www/index.html"
python3 -m http.server 0 --bind 127.0.0.1 --directory "$T/www" > "$T/http.log" 2>&1 &
HPID=$!
for i in $(seq 50); do PORT=$(grep -o 'port [0-9]*' "$T/http.log" | awk '{print $2}'); [ -n "$PORT" ] && break; sleep 0.1; done
for tier in 1 2; do
	M=$(mk curl$tier $tier '"/usr/bin/curl"' "[\"127.0.0.1:$PORT\"]" ', "/etc/ssl", "/etc/nsswitch.conf", "/etc/hosts"')
	out=$("$WARDEN" exec --policy "$M" -- /usr/bin/curl -s --max-time 5 "http://127.0.0.1:$PORT/index.html" 2>/dev/null)
	expect_eq "t$tier/curl-allowed" "$out" "hello from loopback"
	out=$("$WARDEN" exec --policy "$M" --json -- /usr/bin/curl -s --max-time 5 "http://127.0.0.1:1/" 2>/dev/null)
	expect_match "t$tier/curl-other-port-denied" "$out" '"target": "127.0.0.1:1"'
done

# tier 2 with a minimal manifest: the command named through symlinks
# (/bin/sh -> /usr/bin/sh -> dash) and the ELF interpreter's link chain
cat > "$T/min2.yaml" <<Y
name: min2
tier: 2
exec: ["/bin/sh"]
filesystem: {read: ["/usr/lib/x86_64-linux-gnu", "/etc/ld.so.cache"], exec: ["/usr/bin/dash"]}
Y
out=$("$WARDEN" exec --policy "$T/min2.yaml" -- /bin/sh -c 'echo minimal; ls / 2>&1' 2>/dev/null)
expect_match "t2/symlinked-command-minimal-root" "$out" "^minimal"
finish
