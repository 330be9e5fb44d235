#!/bin/bash
# Bad input to `tern train`: each is an error (exit 1, or 2 for usage) whose message names the tensor, the
# expected and the given value - data of the wrong dtype or shape, labels out of range or of the wrong count, a
# loss output that is not a scalar, an op on the path to the loss with no gradient rule (named with its node),
# a run that diverges (the step and the first non-finite tensor, a loss or an updated weight). Also: ignore_index rows count for nothing,
# --timing-only predicts a step time, --shuffle is reproducible.
set -u
TERN=${1:?usage: test_train_errors.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'EOF' || { echo "NOT OK: generating the models failed" >&2; exit 1; }
import sys
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
r = np.random.default_rng(7)
def save(name, nodes, inits, out_shape, in_shape=("batch", 8)):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, f"{d}/{name}.onnx")
w = (r.standard_normal((8, 4)) * 0.3).astype(np.float32)
b = np.zeros(4, np.float32)
save("lin", [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["logits"])],
     {"w": w, "b": b}, ["batch", 4])
save("sin", [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"), helper.make_node("Sin", ["h"], ["s"], name="wave"),
             helper.make_node("Add", ["s", "b"], ["logits"])], {"w": w, "b": b}, ["batch", 4])
np.save(f"{d}/x.npy", r.standard_normal((20, 8)).astype(np.float32))
np.save(f"{d}/x63.npy", r.standard_normal((20, 7)).astype(np.float32))
np.save(f"{d}/xi.npy", np.ones((20, 8), np.int64))
xn = r.standard_normal((20, 8)).astype(np.float32); xn[0, 3] = np.nan
np.save(f"{d}/xnan.npy", xn)
y = r.integers(0, 4, 20).astype(np.int64)
np.save(f"{d}/y.npy", y)
yb = y.copy(); yb[5] = 4
np.save(f"{d}/ybad.npy", yb)
np.save(f"{d}/y19.npy", y[:19])
yi = y.copy(); yi[:] = -100
np.save(f"{d}/yign.npy", yi)
np.save(f"{d}/yf.npy", r.standard_normal((20, 4)).astype(np.float32))
EOF
T="$TERN train $tmp/lin.onnx --data $tmp/x.npy --labels $tmp/y.npy --steps 3 --batch 4"

expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/xi.npy" --labels "$tmp/y.npy" --steps 1 --batch 4
contains "$tmp/err" "data '$tmp/xi.npy': dtype <i8, the model's input 'x' takes float32 values"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x63.npy" --labels "$tmp/y.npy" --steps 1 --batch 4
contains "$tmp/err" "input 'x': dim 1 is 8 in the model, 7 in the data"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/ybad.npy" --steps 3 --batch 4
contains "$tmp/err" "step 2: labels row 1: class 4 outside [0, 4) (ignore_index -100)"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/y19.npy" --steps 1 --batch 4
contains "$tmp/err" "labels '$tmp/y19.npy': 19 rows, the data has 20"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/yf.npy" --steps 1 --batch 4
contains "$tmp/err" "dtype <f4, cross-entropy expects integer class indices"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --loss-output logits --steps 1 --batch 4
contains "$tmp/err" "the loss 'logits' must be a scalar (one element)"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --loss-output nope --steps 1 --batch 4
contains "$tmp/err" "loss output 'nope' is not an output of the model"
# an op on the path to the loss with no gradient: named, never treated as a constant
expect 1 $TERN train "$tmp/sin.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 4
contains "$tmp/err" 'node "wave" (Sin #1): op Sin has no gradient rule, and its input'
# divergence: the step and the first tensor that went non-finite
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/xnan.npy" --labels "$tmp/y.npy" --steps 2 --batch 4
contains "$tmp/err" "step 1: output 'logits' is not finite (element 0 = nan)"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/yf.npy" --loss mse --optimizer sgd --lr 1000 \
    --steps 40 --batch 4
contains "$tmp/err" "is not finite"
contains "$tmp/err" "tern train: train: step "
# an updated weight that overflows while the loss and the gradients stay finite (a weight decay that multiplies the
# weights by -1e10 a step; cross-entropy's gradient is bounded): found where it lies in HBM, named with its element
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --optimizer adamw --lr 1e6 \
    --weight-decay 1e4 --steps 8 --batch 4
contains "$tmp/err" "'train.new.w' is not finite (element "
contains "$tmp/err" " = inf); loss "
expect 2 $T --optimizer lion
contains "$tmp/err" "--optimizer 'lion': expected sgd, adam, adamw or lamb"
expect 2 $T --label-smoothing 1.5
# every row ignored: loss 0, nothing learnt (inv_count 0), still a clean run
expect 0 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/yign.npy" --steps 2 --batch 4
contains "$tmp/out" "step 2/2: loss 0,"
# timing only: a predicted step time, no values
expect 0 $T --timing-only
contains "$tmp/out" "step 3/3: predicted step"
# shuffle: the same seed gives the same losses, another seed other ones
expect 0 $T --shuffle 5 --json
cp "$tmp/out" "$tmp/s5a"
expect 0 $T --shuffle 5 --json
if cmp -s "$tmp/out" "$tmp/s5a"; then ok; else bad "--shuffle 5 twice gave different runs"; fi
expect 0 $T --shuffle 6 --json
if ! cmp -s "$tmp/out" "$tmp/s5a"; then ok; else bad "--shuffle 6 gave the run of --shuffle 5"; fi
# a step too large for the machine's HBM (a what-if trainium1 with 1 MiB): refused with the bytes
"$PY" -c "
import json, sys
m = json.load(open(sys.argv[1])); m['name'] = 'tiny-hbm'
m['chip']['hbm']['capacity'] = {'value': 1, 'unit': 'MiB', 'source': 'what-if'}
json.dump(m, open(sys.argv[2], 'w'))" "$here/../../data/machines/trainium1.json" "$tmp/tiny.json"
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((16384, 8), np.float32)); np.save(sys.argv[2], np.zeros(16384, np.int64))" \
    "$tmp/xbig.npy" "$tmp/ybig.npy"
expect 1 $TERN train "$tmp/lin.onnx" --data "$tmp/xbig.npy" --labels "$tmp/ybig.npy" --steps 1 --batch 16384 \
    --machine "$tmp/tiny.json"
contains "$tmp/err" "do not fit in HBM"
# --data NAME=FILE names the model's input
expect 1 $TERN train "$tmp/lin.onnx" --data "pixels=$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 4
contains "$tmp/err" "data for 'pixels': the model '$tmp/lin.onnx' has no such input (its data inputs: 'x')"
expect 0 $TERN train "$tmp/lin.onnx" --data "x=$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 4
# mse on float targets
expect 0 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --labels "$tmp/yf.npy" --loss mse --steps 2 --batch 4
contains "$tmp/out" "step 2/2: loss"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
