# Shell test helpers: source from tests/integration/*.sh.
# Each check prints PASS/FAIL/SKIP lines that tests/run.sh counts.
BUILD=${BUILD:-build}
WARDEN=${WARDEN:-$PWD/$BUILD/warden}
HELPERS=$PWD/$BUILD/tests/helpers
FIX=$PWD/tests/fixtures
_fail=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; _fail=1; }
skip() { echo "SKIP $1: $2"; }
# check NAME CMD...: pass if the command succeeds
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2' want '$3'"; fi; }
# expect_match NAME TEXT REGEX
expect_match() { if printf '%s' "$2" | grep -Eq -- "$3"; then pass "$1"; else fail "$1" "'$(printf '%s' "$2" | head -c 300)' !~ /$3/"; fi; }
finish() { exit $_fail; }
