#!/usr/bin/env bash
# Dropout at inference (opset 13, training_mode absent), as exporters write it: Swin-T emits a mask output on every
# block that nothing reads, and that used to stop the compile. Models made here with onnx.helper:
#  - unused:  x -> MatMul -> Dropout(ratio 0.1) -> (y, mask unread) -> Relu: compiles, y equals numpy's relu(x @ W);
#  - output:  the mask is a graph output: every element true (written as 1.0 by tern run), y equals x exactly,
#             for a shape with more elements than one tile (10000: full rows and a remainder);
#  - read:    the mask is read (Cast to float, multiplied into x): the product equals x;
#  - training_mode given as a constant true: an error naming the node and the rule.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_dropout.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(3)
N, vi = helper.make_node, helper.make_tensor_value_info
def save(name, nodes, ins, outs, inits=()):
    m = helper.make_model(helper.make_graph(nodes, name, ins, outs, list(inits)),
                          opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{d}/{name}.onnx")
W = rng.standard_normal((32, 16)).astype(np.float32)
ratio = nh.from_array(np.array(0.1, np.float32), "ratio")
save("unused", [N("MatMul", ["x", "W"], ["h"]), N("Dropout", ["h", "ratio"], ["hd", "hmask"]),
                N("Relu", ["hd"], ["y"])],
     [vi("x", TP.FLOAT, [4, 32])], [vi("y", TP.FLOAT, [4, 16])], [nh.from_array(W, "W"), ratio])
save("output", [N("Dropout", ["x"], ["y", "mask"])], [vi("x", TP.FLOAT, [2, 5000])],
     [vi("y", TP.FLOAT, [2, 5000]), vi("mask", TP.BOOL, [2, 5000])])
save("read", [N("Dropout", ["x", "ratio"], ["xd", "mask"]), N("Cast", ["mask"], ["mf"], to=TP.FLOAT),
              N("Mul", ["xd", "mf"], ["y"])],
     [vi("x", TP.FLOAT, [3, 40])], [vi("y", TP.FLOAT, [3, 40])], [ratio])
save("training", [N("Dropout", ["x", "ratio", "tm"], ["y"])], [vi("x", TP.FLOAT, [3, 40])],
     [vi("y", TP.FLOAT, [3, 40])], [ratio, nh.from_array(np.array(True), "tm")])
x = rng.standard_normal((4, 32)).astype(np.float32)
np.save(f"{d}/x_unused.npy", x)
np.save(f"{d}/y_unused.npy", np.maximum(x.astype(np.float64) @ W, 0))
np.save(f"{d}/x_output.npy", rng.standard_normal((2, 5000)).astype(np.float32))
np.save(f"{d}/x_read.npy", rng.standard_normal((3, 40)).astype(np.float32))
PY

expect 0 "$TERN" compile "$tmp/unused.onnx" -o "$tmp/unused.tern" --dtype fp32
expect 0 "$TERN" run "$tmp/unused.tern" --input "x=$tmp/x_unused.npy" --output-dir "$tmp/o1"
$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); r=np.load(sys.argv[2]); e=np.abs(a-r).max()/np.abs(r).max(); assert e<1e-5, e" \
    "$tmp/o1/y.npy" "$tmp/y_unused.npy" && ok || bad "unused mask: y differs from numpy"

expect 0 "$TERN" run "$tmp/output.onnx" --input "x=$tmp/x_output.npy" --output-dir "$tmp/o2"
contains "$tmp/out" "output mask: uint8 [2, 5000] mean 1 std 0 min 1 max 1"
$PY -c "
import numpy as np, sys
x, y, m = (np.load(sys.argv[1] + f) for f in ('/x_output.npy', '/o2/y.npy', '/o2/mask.npy'))
assert m.shape == (2, 5000) and (m == 1).all(), m
assert np.array_equal(x, y)" "$tmp" && ok || bad "mask output: not all true, or y is not x"

expect 0 "$TERN" run "$tmp/read.onnx" --input "x=$tmp/x_read.npy" --output-dir "$tmp/o3"
$PY -c "import numpy as np,sys; assert np.array_equal(np.load(sys.argv[1]), np.load(sys.argv[2]))" \
    "$tmp/x_read.npy" "$tmp/o3/y.npy" && ok || bad "x * mask differs from x"

expect 1 "$TERN" compile "$tmp/training.onnx" -o "$tmp/t.tern"
contains "$tmp/err" "(Dropout #0): Dropout in training mode (ratio 0.1): a random mask is not built"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
