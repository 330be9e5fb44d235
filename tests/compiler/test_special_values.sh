#!/usr/bin/env bash
# IEEE special values (+-0, +-inf, NaN of both signs, the smallest and largest fp32 subnormals, the smallest normal,
# the largest finite values and ordinary values) through every elementwise op and activation tern supports, on
# the simulated device (`tern run dev.onnx --dtype fp32`, every node lowered) and in the host evaluator
# (`tern run host.onnx`: the same nodes on constant inputs, all folded by the evaluator, which the test checks),
# compared with numpy expressions of the ONNX definitions: bit for bit for exact ops (NaN as NaN-ness, the sign
# of zero checked), ULP and absolute tolerances for transcendental ones, as scripts/gen_special_values.py states
# per op. The checker is also shown a corrupted output (-0 for +0) and must reject it.
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_special_values.sh path/to/tern}
py=/usr/bin/python3
gen=scripts/gen_special_values.py
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass+1)); }
bad() { echo "NOT OK: $*"; fail=$((fail+1)); }

$py "$gen" gen "$tmp" || { echo "NOT OK: cannot make the models"; exit 1; }

if "$tern" run "$tmp/dev.onnx" --dtype fp32 --input x="$tmp/x.npy" --input a="$tmp/a.npy" --input b="$tmp/b.npy" \
    --output-dir "$tmp/dev" >"$tmp/dev.log" 2>&1; then ok; else bad "device run failed: $(tail -3 "$tmp/dev.log")"; fi
if "$tern" compile "$tmp/host.onnx" --dtype fp32 -o "$tmp/host.tern" >"$tmp/host.log" 2>&1 &&
    grep -q "(0 after optimisation)" "$tmp/host.log"; then ok
else bad "host model not folded entirely by the evaluator: $(tail -2 "$tmp/host.log")"; fi
if "$tern" run "$tmp/host.tern" --output-dir "$tmp/host" >>"$tmp/host.log" 2>&1; then ok
else bad "host run failed: $(tail -3 "$tmp/host.log")"; fi

if $py "$gen" check "$tmp"; then ok; else bad "special values differ from the ONNX definitions (lines above)"; fi

# the checker can fail: Neg(0) written as +0 instead of -0 must be caught
mkdir -p "$tmp/corrupt/dev" && cp "$tmp/expect.npz" "$tmp/corrupt/" && cp "$tmp"/dev/*.npy "$tmp/corrupt/dev/" &&
    cp -r "$tmp/host" "$tmp/corrupt/host"
$py - "$tmp/corrupt/dev/neg.npy" <<'PY'
import sys, numpy as np
y = np.load(sys.argv[1]); y[0] = np.float32(0.0); np.save(sys.argv[1], y)
PY
if out=$($py "$gen" check "$tmp/corrupt" 2>&1); then bad "checker accepted Neg(0) = +0"
elif grep -q "NOT OK dev neg" <<<"$out"; then ok
else bad "checker failed for another reason: $out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
