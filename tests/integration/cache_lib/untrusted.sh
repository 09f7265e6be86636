# untrusted_cache PREFIX FILE FN VERB WANT: a per-boot cache file that is
# not root's, is writable by its group or by others, or is garbage is never
# trusted (enforce/probe_cache.c wd_root_file_read): each is made in turn
# and FN (a call that prints a status line) must print WANT, the line of a
# call that made the cache again (checks PREFIX/<case>-VERB); the file is
# then root's, 0644 again.
untrusted_cache() {
	local pre=$1 f=$2 fn=$3 verb=$4 want=$5
	chown 65534:65534 "$f"
	expect_eq "$pre/not-root-$verb" "$($fn)" "$want"
	expect_eq "$pre/not-root-replaced" "$(stat -c '%u' "$f")" 0
	chmod 0666 "$f"
	expect_eq "$pre/world-writable-$verb" "$($fn)" "$want"
	expect_eq "$pre/world-writable-replaced" "$(stat -c '%a' "$f")" 644
	chown 0:65534 "$f"
	chmod 0664 "$f"
	expect_eq "$pre/group-writable-$verb" "$($fn)" "$want"
	printf 'garbage\n' >"$f"
	expect_eq "$pre/garbage-$verb" "$($fn)" "$want"
}

# cache_setup CHECK NAME: as root with strace, or CHECK is skipped; T a
# fresh directory (removed at exit), the runtime dir (the caches) under it
cache_setup() {
	[ "$(id -u)" = 0 ] || { skip "$1" "needs root"; finish; }
	command -v strace >/dev/null || { skip "$1" "strace missing (scripts/deps.sh installs it)"; finish; }
	T=$(mktemp -d "/tmp/warden-$2.XXXXXX")
	trap 'rm -rf "$T"' EXIT
	chmod 755 "$T"
	export WARDEN_RUNTIME_DIR=$T/rt
}
