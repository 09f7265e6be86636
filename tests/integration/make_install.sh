#!/usr/bin/env bash
# `make install DESTDIR=... PREFIX=/usr` into a temporary root, twice: the
# binaries, the policy where the installed wardend looks for it by default,
# the shipped copy, doc and systemd unit; a deployer's edited (and added)
# policy survives the second install.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
set -u
tmp=$(mktemp -d /tmp/warden-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
D=$tmp/root

inst() { make --no-print-directory -s BUILD="$BUILD" install DESTDIR="$D" PREFIX=/usr >"$tmp/make$1.log" 2>&1; }

inst 1; rc=$?
expect_eq install-1-exit "$rc" 0
[ "$rc" = 0 ] || { sed 's/^/# /' "$tmp/make1.log" | tail -20; finish; }

for b in warden wardend; do
	[ -x "$D/usr/bin/$b" ] && cmp -s "$D/usr/bin/$b" "$BUILD/$b" &&
		pass "bin-$b" || fail "bin-$b" "$D/usr/bin/$b missing or not the built one"
done
# tier 2's pid 1, where the installed binaries look for it (../libexec/warden)
[ -x "$D/usr/libexec/warden/warden-init" ] && cmp -s "$D/usr/libexec/warden/warden-init" "$BUILD/warden-init" &&
	pass libexec-warden-init || fail libexec-warden-init "$D/usr/libexec/warden/warden-init missing or not the built one"
out=$("$D/usr/bin/warden" --help 2>&1); rc=$?
expect_eq installed-warden-runs "$rc" 0

# where the installed daemon reads its policy when not told
pdir=$("$D/usr/bin/wardend" --help 2>&1 | sed -n 's/.*(default \(\/[^)]*policy\)).*/\1/p' | head -1)
expect_eq wardend-default-policy-dir "$pdir" /etc/warden/policy
[ -n "$pdir" ] || pdir=/etc/warden/policy
if diff -r policy "$D$pdir" >"$tmp/diff" 2>&1; then
	pass "policy-where-wardend-looks"
else
	fail "policy-where-wardend-looks" "$(head -5 "$tmp/diff")"
fi
diff -r policy "$D/usr/share/warden/policy" >/dev/null 2>&1 &&
	pass "policy-shipped-copy" || fail "policy-shipped-copy" "$D/usr/share/warden/policy differs from policy/"
n=$(ls "$D$pdir/tools/"*.yaml 2>/dev/null | wc -l)
[ "$n" -gt 0 ] && pass "policy-has-tools ($n)" || fail "policy-has-tools" "no tools/*.yaml"
# the installed CLI judges the installed policy as the source tree's
"$BUILD/warden" policy check policy >/dev/null 2>&1; want=$?
"$D/usr/bin/warden" policy check "$D$pdir" >/dev/null 2>&1; got=$?
expect_eq installed-policy-checks-as-source "$got" "$want"

[ -s "$D/usr/share/doc/warden/README.md" ] && pass doc-readme || fail doc-readme "no $D/usr/share/doc/warden/README.md"
unit=$D/usr/lib/systemd/system/wardend.service
expect_match unit-execstart "$(cat "$unit" 2>/dev/null)" "^ExecStart=/usr/bin/wardend .*--policy $pdir( |$)"
if grep -q /usr/local "$unit" 2>/dev/null; then fail unit-no-usr-local "$(grep -n /usr/local "$unit")"; else pass unit-no-usr-local; fi

# a deployer edits a shipped file and adds one of their own
f=tools/shell.yaml
printf '# edited by the deployer\n' >>"$D$pdir/$f"
cp "$D$pdir/$f" "$tmp/edited"
printf 'name: mine\ntier: 1\n' >"$D$pdir/tools/mine.yaml"
printf '# edited in the shipped copy\n' >>"$D/usr/share/warden/policy/$f"

inst 2; rc=$?
expect_eq install-2-exit "$rc" 0
cmp -s "$D$pdir/$f" "$tmp/edited" && pass "edited-policy-survives-reinstall" ||
	fail "edited-policy-survives-reinstall" "$D$pdir/$f was replaced"
expect_match reinstall-says-kept "$(cat "$tmp/make2.log")" "keeping $D$pdir/$f \\(differs from the shipped policy/$f\\)"
[ -f "$D$pdir/tools/mine.yaml" ] && pass "added-policy-survives-reinstall" || fail "added-policy-survives-reinstall" "gone"
# the untouched files are still the shipped ones; the shipped copy is reset
diff -r -x shell.yaml -x mine.yaml policy "$D$pdir" >/dev/null 2>&1 &&
	pass "untouched-policy-still-shipped" || fail "untouched-policy-still-shipped" "differs"
diff -r policy "$D/usr/share/warden/policy" >/dev/null 2>&1 &&
	pass "shipped-copy-reset-on-reinstall" || fail "shipped-copy-reset-on-reinstall" "differs from policy/"
for b in warden wardend; do
	cmp -s "$D/usr/bin/$b" "$BUILD/$b" && pass "bin-$b-reinstalled" || fail "bin-$b-reinstalled"
done
finish
