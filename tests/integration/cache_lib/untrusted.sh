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

# untrusted_dir PREFIX DIR FILE FN VERB WANT: a good cache FILE in its
# directory DIR, but the directory is writable by its group or by others,
# is not root's, or is a symlink to a directory someone else owns that
# holds a forged copy (root's, 0644: only the file would pass) is never
# trusted (wd_root_file_read checks the directory it opens): FN must print
# WANT each time, and nothing is written through the symlink (the forged
# copy is left as it was). DIR is as it was after.
untrusted_dir() {
	local pre=$1 d=$2 f=$3 fn=$4 verb=$5 want=$6
	local mode own
	mode=$(stat -c %a "$d") own=$(stat -c %u:%g "$d")
	chown 0:65534 "$d"
	chmod g+w "$d"
	expect_eq "$pre/dir-group-writable-$verb" "$($fn)" "$want"
	chmod g-w,o+w "$d"
	expect_eq "$pre/dir-world-writable-$verb" "$($fn)" "$want"
	chmod "$mode" "$d"
	chown 65534:65534 "$d"
	expect_eq "$pre/dir-not-root-$verb" "$($fn)" "$want"
	chown "$own" "$d"
	mv "$d" "$d.real"
	mkdir "$T/evil"
	cp -p "$d.real/${f##*/}" "$T/evil/${f##*/}"
	chown 65534:65534 "$T/evil"
	ln -s "$T/evil" "$d"
	expect_eq "$pre/dir-symlink-$verb" "$($fn)" "$want"
	cmp -s "$T/evil/${f##*/}" "$d.real/${f##*/}" && pass "$pre/dir-symlink-not-written" ||
		fail "$pre/dir-symlink-not-written" "$(ls -la "$T/evil")"
	rm -f "$d"
	mv "$d.real" "$d"
	rm -rf "$T/evil"
}
