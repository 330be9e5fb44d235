#!/usr/bin/env bash
# `tern compile --explain`: per node of the optimised graph, the lowering rule that fired (from the compiler
# family files' rule arrays, src/compiler/rules.c), the rules passed over with their reasons, or why none applied.
# Models made here with onnx.helper: Pad -> Conv -> Reshape -> MatMul -> Softmax, a Softmax over axis 0 (the
# last-axis rule declines, the general one fires), a Gemm with alpha 2 (the fused linear rule declines), and a
# Mish, which no rule lowers (compile fails; the explain row says why). Gets build/tern as $1.
set -u
tern=${1:?usage: test_compile_explain.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"

/usr/bin/python3 - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
F = TensorProto.FLOAT
rng = np.random.default_rng(3)
def arr(name, a):
    return numpy_helper.from_array(np.asarray(a), name)
vi = helper.make_tensor_value_info
def save(name, nodes, ins, outs, inits, check=True):
    g = helper.make_graph(nodes, name, ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if check:  # Mish is an opset-18 op, beyond this onnx's (1.12) checker; tern reads its row all the same
        onnx.checker.check_model(m)
    onnx.save(m, f"{d}/{name}.onnx")
save("mix",
     [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad0"),
      helper.make_node("Conv", ["xp", "cw"], ["c"], name="conv0"),
      helper.make_node("Reshape", ["c", "shape"], ["r"], name="reshape0"),
      helper.make_node("MatMul", ["r", "mw"], ["m"], name="matmul0"),
      helper.make_node("Softmax", ["m"], ["y"], axis=-1, name="softmax_last"),
      helper.make_node("Softmax", ["m"], ["z"], axis=0, name="softmax_first"),
      helper.make_node("Gemm", ["r", "gw"], ["g"], alpha=2.0, name="gemm_alpha")],
     [vi("x", F, [1, 2, 6, 6])], [vi("y", F, [4, 5]), vi("z", F, [4, 5]), vi("g", F, [4, 3])],
     [arr("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
      arr("cw", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
      arr("shape", np.array([4, 36], np.int64)),
      arr("mw", rng.standard_normal((36, 5)).astype(np.float32)),
      arr("gw", rng.standard_normal((36, 3)).astype(np.float32))])
save("mish", [helper.make_node("Relu", ["x"], ["h"], name="relu0"),
              helper.make_node("Mish", ["h"], ["y"], name="mish0")],
     [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [], check=False)
save("pool_idx", [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], name="pool_idx")],
     [vi("x", F, [1, 1, 4, 4])], [vi("y", F, [1, 1, 3, 3]), vi("i", TensorProto.INT64, [1, 1, 3, 3])], [])
PY

expect 0 "$tern" compile "$tmp/mix.onnx" -o "$tmp/mix.tern" --explain
row() { grep -E "^[0-9]+ +$1 " "$tmp/out" || echo "(no row for $1)"; }
for want in "pad0 +Pad +pad.copy \(lower_layout.c\)" "conv0 +Conv +conv \(lower_cnn.c\)" \
            "reshape0 +Reshape +view.alias \(lower_layout.c\)" "matmul0 +MatMul +matmul.linear \(lower_linear.c\)" \
            "softmax_last +Softmax +softmax.row \(lower_axis.c\)$" \
            "softmax_first +Softmax +axis.general \(lower_axis.c\) +\[passed over: softmax.row: the axis is not the last one\]" \
            "gemm_alpha +Gemm +gemm.general \(lower_linear.c\) +\[passed over: matmul.linear: transA, alpha or beta is not the default\]"; do
    name=${want%% *}
    if row "$name" | grep -qE -- "$want"; then ok; else bad "explain row for $name: $(row "$name"), expected /$want/"; fi
done
# the summary line still follows, and the executable is the same as without --explain
contains "$tmp/out" "instructions per core"
expect 0 "$tern" compile "$tmp/mix.onnx" -o "$tmp/mix2.tern"
if cmp -s "$tmp/mix.tern" "$tmp/mix2.tern"; then ok; else bad "--explain changed the executable"; fi
if grep -q "^node " "$tmp/out"; then bad "explain header without --explain"; else ok; fi

# no rule for Mish: the compile fails, and the explain row names why
expect 1 "$tern" compile "$tmp/mish.onnx" -o "$tmp/mish.tern" --explain
if row relu0 | grep -qE "relu0 +Relu +unary.act \(lower_elementwise.c\)"; then ok; else bad "relu row: $(row relu0)"; fi
if row mish0 | grep -qE "mish0 +Mish +none: .*op Mish is not supported on the device yet"; then ok; else
    bad "mish row: $(row mish0)"; fi
contains "$tmp/err" "Mish is not supported"
# a rule that fires and then refuses the node: the row names the rule and its reason
expect 1 "$tern" compile "$tmp/pool_idx.onnx" -o "$tmp/pool_idx.tern" --explain
if row pool_idx | grep -qE "pool_idx +MaxPool +pool.window \(lower_cnn.c\) failed: .*Indices output"; then ok; else
    bad "pool_idx row: $(row pool_idx)"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
