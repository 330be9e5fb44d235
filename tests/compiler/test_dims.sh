#!/usr/bin/env bash
# Symbolic dimensions bound by name and from the inputs given: a model made here with onnx.helper declares inputs
# x [batch, seq, 8] and m [batch, seq] (outputs y [batch, seq] and a Shape-driven Reshape z [batch*seq, 16], as
# exporters write them). It must run at batch 2 x sequence 64 with `--dim batch=2 --dim seq=64` (compiled to a
# .tern, then run on .npy inputs) and with `tern run model.onnx --input ...` binding both dims from the .npy shapes;
# the outputs must equal numpy's (float64 reference; fp32 matmuls, so a tight tolerance). `--dim N` keeps its
# meaning (every dim not bound by name), and mixes with NAME=VALUE. Conflicts are errors naming the dim, both
# values and both sources; an unknown name lists the model's symbolic dims; a fixed dim that differs names both
# shapes. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_dims.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: cannot make the model"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(7)
W = rng.standard_normal((8, 16)).astype(np.float32) * 0.5
b = rng.standard_normal(16).astype(np.float32) * 0.1
inits = [nh.from_array(W, "W"), nh.from_array(b, "b"), nh.from_array(np.array([-1], np.int64), "last"),
         nh.from_array(np.array([0], np.int64), "i0"), nh.from_array(np.array([1], np.int64), "i1"),
         nh.from_array(np.array([16], np.int64), "c16")]
N = helper.make_node
nodes = [N("MatMul", ["x", "W"], ["xw"]), N("Add", ["xw", "b"], ["xb"]), N("Relu", ["xb"], ["h"]),
         N("ReduceSum", ["h", "last"], ["r"], keepdims=0), N("Add", ["r", "m"], ["s"]),
         N("Softmax", ["s"], ["y"], axis=-1),
         N("Shape", ["x"], ["sh"]), N("Gather", ["sh", "i0"], ["B"], axis=0), N("Gather", ["sh", "i1"], ["S"], axis=0),
         N("Mul", ["B", "S"], ["BS"]), N("Concat", ["BS", "c16"], ["zshape"], axis=0),
         N("Reshape", ["h", "zshape"], ["z"])]
vi = helper.make_tensor_value_info
g = helper.make_graph(nodes, "dims", [vi("x", TP.FLOAT, ["batch", "seq", 8]), vi("m", TP.FLOAT, ["batch", "seq"])],
                      [vi("y", TP.FLOAT, ["batch", "seq"]), vi("z", TP.FLOAT, [None, 16])], inits)
onnx.checker.check_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/dims.onnx")
x = rng.standard_normal((2, 64, 8)).astype(np.float32)
m = rng.standard_normal((2, 64)).astype(np.float32)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/m.npy", m)
np.save(f"{d}/m32.npy", m[:, :32].copy())
np.save(f"{d}/x_bad.npy", np.zeros((2, 64, 4), np.float32))
h = np.maximum(x.astype(np.float64) @ W + b, 0)
s = h.sum(-1) + m
e = np.exp(s - s.max(-1, keepdims=True))
np.save(f"{d}/y_ref.npy", e / e.sum(-1, keepdims=True))
np.save(f"{d}/z_ref.npy", h.reshape(128, 16))
PY

compare() { # compare DIR: y and z against the float64 reference
    if $PY - "$tmp" "$1" <<'PY'; then ok; else bad "outputs in $1 differ from numpy"; fi
import sys, numpy as np
d, o = sys.argv[1], sys.argv[2]
for n in ("y", "z"):
    got, ref = np.load(f"{o}/{n}.npy"), np.load(f"{d}/{n}_ref.npy")
    assert got.shape == ref.shape, (n, got.shape, ref.shape)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
    assert err < 1e-5, (n, err)
PY
}

# --dim NAME=VALUE, compiled ahead of time; the .tern then takes inputs of exactly that shape.
expect 0 "$TERN" compile "$tmp/dims.onnx" -o "$tmp/d.tern" --dtype fp32 --dim batch=2 --dim seq=64
expect 0 "$TERN" run "$tmp/d.tern" --input "x=$tmp/x.npy" --input "m=$tmp/m.npy" --output-dir "$tmp/o1"
contains "$tmp/out" "output y: fp32 [2, 64]"
contains "$tmp/out" "output z: fp32 [128, 16]"
compare "$tmp/o1"
expect 1 "$TERN" run "$tmp/d.tern" --input "m=$tmp/m32.npy"
contains "$tmp/err" "shape [2, 32] does not match input 'm' of shape [2, 64]"

# An ONNX model run on .npy inputs binds batch and seq from their shapes: no --dim needed.
expect 0 "$TERN" run "$tmp/dims.onnx" --dtype fp32 --input "x=$tmp/x.npy" --input "m=$tmp/m.npy" \
    --output-dir "$tmp/o2"
compare "$tmp/o2"
# One input given binds the dims of the other too (m is random, of the bound shape).
expect 0 "$TERN" run "$tmp/dims.onnx" --input "x=$tmp/x.npy"
contains "$tmp/out" "input m: fp32 [2, 64] random"
# Batch split over cores with the dims bound by name.
expect 0 "$TERN" run "$tmp/dims.onnx" --dtype fp32 --cores 2 --input "x=$tmp/x.npy" --input "m=$tmp/m.npy" \
    --output-dir "$tmp/o3"
$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); assert np.abs(a-b).max()<1e-5" \
    "$tmp/o3/y.npy" "$tmp/y_ref.npy" && ok || bad "--cores 2: y differs"

# --dim N binds every symbolic dim not bound by name; the two forms mix.
expect 0 "$TERN" run "$tmp/dims.onnx" --dim 3
contains "$tmp/out" "input x: fp32 [3, 3, 8]"
contains "$tmp/out" "output z: fp32 [9, 16]"
expect 0 "$TERN" run "$tmp/dims.onnx" --dim 5 --dim seq=64
contains "$tmp/out" "input m: fp32 [5, 64]"
contains "$tmp/out" "output z: fp32 [320, 16]"

# Conflicts name the dim, both values and both sources.
expect 1 "$TERN" run "$tmp/dims.onnx" --input "x=$tmp/x.npy" --input "m=$tmp/m32.npy"
contains "$tmp/err" "symbolic dimension 'seq' is 64 from input 'x' ($tmp/x.npy) but 32 from input 'm' ($tmp/m32.npy)"
expect 1 "$TERN" run "$tmp/dims.onnx" --dim seq=32 --input "x=$tmp/x.npy"
contains "$tmp/err" "symbolic dimension 'seq' is 32 from the binding seq=32 but 64 from input 'x' ($tmp/x.npy)"
expect 2 "$TERN" compile "$tmp/dims.onnx" -o "$tmp/e.tern" --dim seq=32 --dim seq=64
contains "$tmp/err" "--dim seq given twice (32 and 64)"
# A name no input declares; a fixed dim that differs; malformed forms.
expect 1 "$TERN" compile "$tmp/dims.onnx" -o "$tmp/e.tern" --dim sequence=64
contains "$tmp/err" "symbolic dimension 'sequence' = 64: no input declares a dimension of that name (the inputs' symbolic dimensions: 'batch', 'seq')"
expect 1 "$TERN" run "$tmp/dims.onnx" --input "x=$tmp/x_bad.npy"
contains "$tmp/err" "$tmp/x_bad.npy: shape [2, 64, 4] does not match input 'x' of shape [batch, seq, 8] (dimension 2 is fixed at 8)"
expect 1 "$TERN" run "$tmp/dims.onnx" --input "x=$tmp/m.npy"
contains "$tmp/err" "$tmp/m.npy: shape [2, 64] does not match input 'x' of shape [batch, seq, 8] (rank 2, the input's is 3)"
expect 2 "$TERN" run "$tmp/dims.onnx" --dim seq=6x4
contains "$tmp/err" "--dim seq= expects an integer in [1, 2147483647], got '6x4'"
expect 2 "$TERN" run "$tmp/dims.onnx" --dim =64
contains "$tmp/err" "no name before '='"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
