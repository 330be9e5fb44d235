#!/usr/bin/env bash
# Zero-size tensors (a 0 dimension) end to end: small ONNX models made here with onnx.helper are compiled and run
# with `tern run` (and through a saved .tern), and their outputs are checked with numpy:
#  - Slice to an empty range, and an op on the empty result: both lowered to nothing, the outputs [0, 3] written;
#  - Reshape of an empty graph input (allowzero): the input given as an empty .npy, and as a random input;
#  - Split with a zero-size split between two non-empty ones;
#  - Concat with an empty graph input and an empty Slice between non-empty pieces;
#  - an empty output of a model whose batch is split over two cores;
#  - a node that would read an empty tensor to make a non-empty one (ReduceSum, MatMul over K = 0) is refused as
#    unsupported, naming the node, the op and the reason.
# Gets build/tern as $1.
set -u
tern=${1:?usage: test_zero_size.sh path/to/tern}
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass+1)); }
bad() { echo "NOT OK: $*"; fail=$((fail+1)); }

$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
F, I64 = TensorProto.FLOAT, TensorProto.INT64
def const(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)
def save(name, nodes, ins, outs, inits=(), opset=14):
    g = helper.make_graph(nodes, name, ins, outs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{d}/{name}.onnx")
vi = helper.make_tensor_value_info
# Slice rows [2, 2) of x [4, 3] -> [0, 3]; plus one on it (empty too); Relu of x runs on the device.
save("slice_empty",
     [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]),
      helper.make_node("Add", ["y", "one"], ["y1"]),
      helper.make_node("Relu", ["x"], ["r"])],
     [vi("x", F, [4, 3])], [vi("y", F, [0, 3]), vi("y1", F, [0, 3]), vi("r", F, [4, 3])],
     [const("s", [2]), const("e", [2]), const("a", [0]), numpy_helper.from_array(np.array([1], np.float32), "one")])
# Reshape [0, 3, 4] -> [3, 4, 0] (allowzero keeps the 0).
save("reshape_empty", [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
     [vi("x", F, [0, 3, 4])], [vi("y", F, [3, 4, 0])], [const("shape", [3, 4, 0])])
# Split x [5, 2] into [2, 0, 3] rows.
save("split_zero", [helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=0)],
     [vi("x", F, [5, 2])], [vi("a", F, [2, 2]), vi("b", F, [0, 2]), vi("c", F, [3, 2])], [const("split", [2, 0, 3])])
# Concat axis 0 of x [2, 3], an empty input e [0, 3], an empty slice of x and x again -> [4, 3].
save("concat_empty",
     [helper.make_node("Slice", ["x", "s", "e2", "a"], ["xs"]),
      helper.make_node("Concat", ["x", "e", "xs", "x"], ["y"], axis=0)],
     [vi("x", F, [2, 3]), vi("e", F, [0, 3])], [vi("y", F, [4, 3])],
     [const("s", [1]), const("e2", [1]), const("a", [0])])
# A symbolic batch N: y = x[:, 1:1] is [N, 0], z = Relu(x) [N, 3]; run with --dim 4 --cores 2.
save("batch_empty",
     [helper.make_node("Slice", ["x", "s", "e2", "a1"], ["y"]), helper.make_node("Relu", ["x"], ["z"])],
     [vi("x", F, ["N", 3])], [vi("y", F, ["N", 0]), vi("z", F, ["N", 3])],
     [const("s", [1]), const("e2", [1]), const("a1", [1])])
# Reading an empty tensor into a non-empty one: refused.
save("reduce_empty", [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
     [vi("x", F, [3, 0])], [vi("y", F, [3])], [const("axes", [1])], opset=13)
save("matmul_k0", [helper.make_node("MatMul", ["x", "w"], ["y"])],
     [vi("x", F, [3, 0]), vi("w", F, [0, 4])], [vi("y", F, [3, 4])])
rng = np.random.default_rng(7)
np.save(f"{d}/x43.npy", rng.standard_normal((4, 3)).astype(np.float32))
np.save(f"{d}/x034.npy", np.zeros((0, 3, 4), np.float32))
np.save(f"{d}/x52.npy", rng.standard_normal((5, 2)).astype(np.float32))
np.save(f"{d}/x23.npy", rng.standard_normal((2, 3)).astype(np.float32))
np.save(f"{d}/e03.npy", np.zeros((0, 3), np.float32))
PY

# check NAME PYTHON-EXPR: runs the expression with np and the output directory as d; it must be true.
check() {
  if $py -c "import sys, numpy as np; d = sys.argv[1]; sys.exit(0 if ($2) else 1)" "$tmp/$1" 2> "$tmp/pyerr"; then ok
  else bad "$1: $2"; cat "$tmp/pyerr"; fi
}

# Slice to an empty range.
mkdir -p "$tmp/slice"
if "$tern" run "$tmp/slice_empty.onnx" --dtype fp32 --input "x=$tmp/x43.npy" --output-dir "$tmp/slice" > "$tmp/log" 2>&1; then
  ok
  grep -q "^output y: fp32 \[0, 3\] (empty)$" "$tmp/log" && grep -q "^output y1: fp32 \[0, 3\] (empty)$" "$tmp/log" &&
    ok || bad "slice_empty: summary of the empty outputs: $(cat "$tmp/log")"
  cp "$tmp/x43.npy" "$tmp/slice/x.npy"
  check slice "np.load(d + '/y.npy').shape == (0, 3) and np.load(d + '/y1.npy').shape == (0, 3) and np.load(d + '/y.npy').dtype == np.float32"
  check slice "np.array_equal(np.load(d + '/r.npy'), np.maximum(np.load(d + '/x.npy'), 0))"
else
  bad "slice_empty: tern run failed"; cat "$tmp/log"
fi
out=$("$tern" compile "$tmp/slice_empty.onnx" -o "$tmp/slice.tern" 2>&1)
case "$out" in *"2 nodes with only zero-size outputs lowered to nothing"*) ok ;; *) bad "slice_empty compile: $out" ;; esac

# Reshape of an empty input: from an empty .npy, from a compiled .tern, and as a random input.
mkdir -p "$tmp/reshape" "$tmp/reshape2"
if "$tern" run "$tmp/reshape_empty.onnx" --input "x=$tmp/x034.npy" --output-dir "$tmp/reshape" > "$tmp/log" 2>&1 &&
   grep -q "^output y: fp32 \[3, 4, 0\] (empty)$" "$tmp/log"; then
  ok
  check reshape "np.load(d + '/y.npy').shape == (3, 4, 0)"
else
  bad "reshape_empty: tern run"; cat "$tmp/log"
fi
if "$tern" compile "$tmp/reshape_empty.onnx" -o "$tmp/reshape.tern" > "$tmp/log" 2>&1 &&
   "$tern" run "$tmp/reshape.tern" --input "x=$tmp/x034.npy" --output-dir "$tmp/reshape2" > "$tmp/log" 2>&1; then
  ok
  check reshape2 "np.load(d + '/y.npy').shape == (3, 4, 0)"
else
  bad "reshape_empty: the .tern route"; cat "$tmp/log"
fi
if "$tern" run "$tmp/reshape_empty.onnx" > "$tmp/log" 2>&1 && grep -q "^input x: fp32 \[0, 3, 4\] (empty)$" "$tmp/log"; then
  ok; else bad "reshape_empty: a random empty input"; cat "$tmp/log"; fi
# The empty input's shape is still checked.
out=$("$tern" run "$tmp/reshape_empty.onnx" --input "x=$tmp/e03.npy" 2>&1); rc=$?
case "$rc:$out" in 1:*"does not match input 'x'"*) ok ;; *) bad "reshape_empty: wrong-shape empty input: $rc $out" ;; esac

# Split with a zero-size split.
mkdir -p "$tmp/split"
if "$tern" run "$tmp/split_zero.onnx" --input "x=$tmp/x52.npy" --output-dir "$tmp/split" > "$tmp/log" 2>&1; then
  ok
  cp "$tmp/x52.npy" "$tmp/split/x.npy"
  check split "np.array_equal(np.load(d + '/a.npy'), np.load(d + '/x.npy')[:2]) and np.load(d + '/b.npy').shape == (0, 2) and np.array_equal(np.load(d + '/c.npy'), np.load(d + '/x.npy')[2:])"
else
  bad "split_zero: tern run failed"; cat "$tmp/log"
fi

# Concat with empty pieces (an empty graph input and an empty slice).
mkdir -p "$tmp/concat"
if "$tern" run "$tmp/concat_empty.onnx" --input "x=$tmp/x23.npy" --input "e=$tmp/e03.npy" --output-dir "$tmp/concat" \
     > "$tmp/log" 2>&1; then
  ok
  cp "$tmp/x23.npy" "$tmp/concat/x.npy"
  check concat "np.array_equal(np.load(d + '/y.npy'), np.concatenate([np.load(d + '/x.npy')] * 2))"
else
  bad "concat_empty: tern run failed"; cat "$tmp/log"
fi

# An empty output with the batch split over the two cores of a trn1 chip.
mkdir -p "$tmp/batch"
if "$tern" run "$tmp/batch_empty.onnx" --dim 4 --cores 2 --input "x=$tmp/x43.npy" --output-dir "$tmp/batch" \
     > "$tmp/log" 2>&1 && grep -q "^output y: fp32 \[4, 0\] (empty)$" "$tmp/log"; then
  ok
  cp "$tmp/x43.npy" "$tmp/batch/x.npy"
  check batch "np.load(d + '/y.npy').shape == (4, 0) and np.array_equal(np.load(d + '/z.npy'), np.maximum(np.load(d + '/x.npy'), 0))"
else
  bad "batch_empty: --cores 2"; cat "$tmp/log"
fi

# Refused: an op reading an empty tensor to make a non-empty one.
out=$("$tern" compile "$tmp/reduce_empty.onnx" -o "$tmp/r.tern" 2>&1); rc=$?
case "$rc:$out" in
  1:*'(ReduceSum #0): input 0 ('"'x'"') is a zero-size tensor [3, 0] but output '"'y'"' [3] is not'*) ok ;;
  *) bad "reduce_empty: $rc $out" ;; esac
out=$("$tern" compile "$tmp/matmul_k0.onnx" -o "$tmp/m.tern" 2>&1); rc=$?
case "$rc:$out" in 1:*"(MatMul #0): input 0 ('x') is a zero-size tensor [3, 0]"*"supported only for Concat"*) ok ;;
  *) bad "matmul_k0: $rc $out" ;; esac

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
