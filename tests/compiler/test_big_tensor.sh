#!/usr/bin/env bash
# Tensors over 2^31 elements, timing-only (no values, so a few MB of host memory): bool Not and a uint8 -> bool Cast
# (one flat 1 x 2^31+ view, a single DMA) on [2, 2^30 + 2^19] = 2^31 + 2^20 elements must import, infer, compile
# and run, and predict exactly twice the time of the same model at half the size (a count wrapped to 32 bits would
# predict far less). The .tern round trip keeps the 2,148,532,224-byte I/O records (tern inspect) and the time.
# The limits that stay are errors naming the value: an element count above 2^32, a dim above 2^31.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_big_tensor.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

(cd "$tmp" && $PY - "$tmp" <<'PY') || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, onnx
from onnx import helper, TensorProto as TP
d = sys.argv[1]
V = helper.make_tensor_value_info
N = (1 << 31) + (1 << 20)
def mk(name, node, tin, tout, shape_in, shape_out=None):
    g = helper.make_graph([node], name, [V("x", tin, shape_in)], [V("y", tout, shape_out or shape_in)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/{name}.onnx")
for tag, n in (("big", N), ("half", N // 2)):
    mk(f"not_{tag}", helper.make_node("Not", ["x"], ["y"]), TP.BOOL, TP.BOOL, [2, n // 2])
    mk(f"cast_{tag}", helper.make_node("Cast", ["x"], ["y"], to=TP.BOOL), TP.UINT8, TP.BOOL, [2, n // 2])
mk("over", helper.make_node("Not", ["x"], ["y"]), TP.BOOL, TP.BOOL, [2, 1 << 16, 1 << 16])  # 2^33 elements
mk("flat", helper.make_node("Flatten", ["x"], ["y"], axis=0), TP.BOOL, TP.BOOL, [2, N // 2], [1, N])  # dim > 2^31
PY

predicted() { sed -n 's/^predicted device time on [^:]*: \([0-9.]*\) ms.*/\1/p' "$tmp/out"; }
twice() { # twice BIG HALF WHAT: BIG within 0.1 % of 2 x HALF
    if awk -v b="$1" -v h="$2" 'BEGIN { exit !(h > 0 && b / h > 1.998 && b / h < 2.002) }'; then ok
    else bad "$3: $1 ms at 2^31+2^20 elements, $2 ms at half: not twice"; fi
}
for m in not cast; do
    expect 0 "$TERN" run "$tmp/${m}_big.onnx" --timing-only
    contains "$tmp/out" "input x: uint8 [2, 1074266112] not generated (timing-only)"
    big=$(predicted)
    expect 0 "$TERN" run "$tmp/${m}_half.onnx" --timing-only
    half=$(predicted)
    twice "$big" "$half" "$m"
done

# the executable's records hold the sizes
expect 0 "$TERN" compile "$tmp/not_big.onnx" -o "$tmp/not_big.tern"
expect 0 "$TERN" inspect "$tmp/not_big.tern"
contains "$tmp/out" "[2, 1074266112]       -      2148532224"
expect 0 "$TERN" run "$tmp/not_big.tern" --timing-only
exe=$(predicted)
expect 0 "$TERN" run "$tmp/not_big.onnx" --timing-only
[ "$exe" = "$(predicted)" ] && ok || bad "the .tern predicts $exe ms, the model $(predicted) ms"

# the limits kept
expect 1 "$TERN" run "$tmp/over.onnx" --timing-only
contains "$tmp/err" 'graph input "x": element count overflows the 2^32 limit'
expect 1 "$TERN" run "$tmp/flat.onnx" --timing-only
contains "$tmp/err" 'graph output "y": dim 1 is 2148532224'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
