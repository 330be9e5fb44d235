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
close_to_ref() { # close_to_ref LABEL REF.npy GOT.npy [MAXERR]: an output against its reference (PyTorch's, numpy's):
    # same shape, cosine similarity >= 0.9999 and, when MAXERR is given, max |diff| <= MAXERR; prints the figures
    /usr/bin/python3 - "$@" <<'PY'
import sys, numpy as np
label, ref, got = sys.argv[1:4]
maxerr = float(sys.argv[4]) if len(sys.argv) > 4 else None
ref = np.load(ref).astype(np.float64)
got = np.load(got).astype(np.float64)
if got.shape != ref.shape:
    print(f"NOT OK: {label}: shape {got.shape}, reference {ref.shape}"); sys.exit(1)
cos = float((got * ref).sum() / (np.linalg.norm(got) * np.linalg.norm(ref)))
err = float(np.abs(got - ref).max())
good = cos >= 0.9999 and (maxerr is None or err <= maxerr)
print(f"{'ok' if good else 'NOT OK'}: {label} {list(ref.shape)}: cosine {cos:.7f}, max |diff| {err:.3g}")
sys.exit(0 if good else 1)
PY
}
