#!/usr/bin/env bash
# What the trace store and `warden trace html|diff -o` write is not
# readable by others, whatever the umask and the state directory's mode:
# index.db and its -wal/-shm are 0640 like the segments (the index names
# every run, user, team and hash), also when an older build left them 0644;
# the page (it holds payloads) is a new 0600 file, renamed over -o FILE,
# never written through a symlink or into a non-regular file.
. tests/lib.sh
. tests/integration/daemon_lib/common.sh
[ "$(id -u)" -eq 0 ] || { skip trace-modes "needs root"; finish; }

umask 000
base_policy
chmod 0755 "$T/state"
script once <<'S'
{"step": 0, "tool_calls": [{"name": "echo", "arguments": {"n": "{{task}}"}}]}
{"text": "done"}
S
agent one once '[echo]'
write_gateway
start_daemon || { fail daemon-start "see log"; finish; }
id=$(as_user 1000 "$WARDEN" run --detach one "modes-$$")
wait_until 30 run_done "$id" || fail trace-modes-run "run $id did not finish"
id2=$(as_user 1000 "$WARDEN" run --detach one "modes-2-$$")
wait_until 30 run_done "$id2" || fail trace-modes-run2 "run $id2 did not finish"

mode() { stat -c %a "$1" 2>/dev/null || echo missing; }
tr_dir=$T/state/trace
expect_eq trace-modes-state-dir "$(mode "$T/state")" 755
expect_eq trace-modes-segment "$(mode "$(ls "$tr_dir"/segments/* | head -1)")" 640
for f in index.db index.db-wal index.db-shm; do
	expect_eq "trace-modes-$f" "$(mode "$tr_dir/$f")" 640
done
# a uid of no group of the files' reads none of it
for f in index.db index.db-wal; do
	if as_user 1002 cat "$tr_dir/$f" >/dev/null 2>&1; then fail "trace-modes-$f-other-reads" "read"
	else pass "trace-modes-$f-other-reads"; fi
done

# an index an older build left 0644 is closed down at open
stop_daemon
chmod 0644 "$tr_dir/index.db"
for f in index.db-wal index.db-shm; do [ -e "$tr_dir/$f" ] && chmod 0644 "$tr_dir/$f"; done
start_daemon || { fail daemon-restart "see log"; finish; }
for f in index.db index.db-wal index.db-shm; do
	expect_eq "trace-modes-old-$f" "$(mode "$tr_dir/$f")" 640
done
# a new index, made by the CLI reading the store directly
stop_daemon
rm -f "$tr_dir"/index.db*
"$WARDEN" trace ls --state "$T/state" >/dev/null 2>&1
expect_eq trace-modes-cli-index "$(mode "$tr_dir/index.db")" 640
start_daemon || { fail daemon-restart2 "see log"; finish; }

# the page: 0600, by the CLI reading the store and through wardend
out=$T/out && mkdir -m 0777 "$out"
"$WARDEN" trace html --state "$T/state" "$id" -o "$out/state.html" >/dev/null
expect_eq trace-modes-html-state "$(mode "$out/state.html")" 600
as_user 1000 "$WARDEN" trace html "$id" -o "$out/user.html" >/dev/null
expect_eq trace-modes-html-user "$(mode "$out/user.html") $(stat -c %u "$out/user.html")" "600 1000"
expect_match trace-modes-html-content "$(cat "$out/user.html")" "modes-$$"
# an existing world-readable file is replaced by a 0600 one
printf old >"$out/old.html" && chmod 0644 "$out/old.html"
"$WARDEN" trace html --state "$T/state" "$id" -o "$out/old.html" >/dev/null
expect_eq trace-modes-html-replaced "$(mode "$out/old.html") $(grep -c "modes-$$" "$out/old.html" | sed "s/^[1-9][0-9]*$/page/") $(grep -cx old "$out/old.html")" "600 page 0"
# a symlink at -o is refused; what it points to is untouched
printf keep >"$out/target" && chmod 0644 "$out/target"
ln -s "$out/target" "$out/link.html"
err=$("$WARDEN" trace html --state "$T/state" "$id" -o "$out/link.html" 2>&1); rc=$?
expect_eq trace-modes-html-symlink-exit "$rc" 1
expect_match trace-modes-html-symlink-message "$err" "link.html: not a regular file"
expect_eq trace-modes-html-symlink-target "$(head -c 20 "$out/target") $(mode "$out/target")" "keep 644"
# nothing left behind by a refused or finished write
expect_eq trace-modes-no-temp "$(ls -A "$out" | grep -c '^\.')" 0
# diff -o too
"$WARDEN" trace diff --state "$T/state" "$id" "$id2" --html -o "$out/diff.html" >/dev/null
expect_eq trace-modes-diff "$(mode "$out/diff.html")" 600
finish
