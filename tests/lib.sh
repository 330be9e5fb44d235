# Shared helpers of the shell tests (sourced, after `set -u`): counters, a temporary directory removed on exit,
# and the two checks most tests make. A test ends by printing "$pass passed, $fail failed" and exiting non-zero
# when anything failed.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "NOT OK: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() { # expect CODE CMD...: stdout/stderr kept in $tmp/out, $tmp/err
    local want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want; stderr: $(head -c 300 "$tmp/err")"; fi
}
contains() { # contains FILE TEXT
    if grep -qF -- "$2" "$1"; then ok; else bad "$(basename "$1") lacks '$2': $(head -c 400 "$1")"; fi
}
