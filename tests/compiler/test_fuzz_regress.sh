#!/usr/bin/env bash
# Crash inputs the consumer fuzzers found (docs/fuzzing.md), kept as regressions: every
# fuzz/corpus/onnx_run/regress_* model goes through `tern run --timing-only` and `tern run` (compile, runtime,
# execute). Each must end with exit 0 or a one-line error and exit 1 -- never a signal or a sanitizer report.
# A Slice whose axes input is wild (opset < 10 model that gives inputs) must be refused by name. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_fuzz_regress.sh path/to/tern}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
for f in "$ROOT"/fuzz/corpus/onnx_run/regress_*; do
    for mode in --timing-only ""; do
        n=$((n + 1))
        "$TERN" run "$f" $mode --output-dir "$tmp" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$rc" -gt 1 ] || grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then
            echo "NOT OK: tern run $(basename "$f") $mode: exit $rc" >&2
            head -c 1500 "$tmp/err" >&2
            fail=1
        fi
    done
done
"$TERN" compile "$ROOT/fuzz/corpus/onnx_run/regress_slice_axes_opset.onnx" -o "$tmp/x.tern" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q 'Slice: axis 4611686018427387904 (rank 3)' "$tmp/err"; then
    echo "NOT OK: the wild Slice axis: exit $rc, '$(head -c 300 "$tmp/err")'" >&2
    fail=1
fi
[ "$n" -ge 4 ] || { echo "NOT OK: only $n regression runs (seeds missing?)" >&2; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: $n runs of the fuzzers' regression inputs, the wild Slice axis refused"
exit "$fail"
