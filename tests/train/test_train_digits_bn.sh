#!/bin/bash
# BatchNormalization in training mode, a strided depthwise Conv and padded pooling, end to end on the digits data:
# a small CNN (Conv 3x3 + BatchNorm + ReLU, depthwise Conv 3x3 stride 2 + BatchNorm + ReLU, AveragePool 3 stride 1
# pad 1 without the pads in its count, MaxPool 3 stride 2 pad 1, Linear) exported by PyTorch in training mode,
# trained 100 SGD steps (momentum, Nesterov, weight decay, clipping) by tern and by PyTorch fp32: the loss of every
# step within 1e-4 relative, the gradient norm within 1e-3, the running statistics tern wrote into the trained
# ONNX within 1e-4 of PyTorch's (momentum, unbiased variance), the trained model's BatchNormalization in inference
# mode, run by `tern run` with the test accuracy within 1 point of PyTorch's and the logits PyTorch's module gives
# with the trained initializers. (SGD rather than Adam: Adam's normalised step turns the last-bit differences of
# near-zero gradient components into whole steps, and the two runs drift apart by 1e-4 within ~100 steps.)
# Then --accumulate 2 (12 steps of 2 x 16 rows: every micro-batch's own batch statistics and momentum update, as
# PyTorch's model.train() over the micro-batches): losses and running statistics within 1e-5 of PyTorch's. Then the
# refusals: BatchNormalization with tensor parallelism (--layout tp=2; data parallelism is test_train_dp_bn.sh's),
# a Conv kernel 65 wide (the flip's limit is 64), each naming the node and what is missing.
set -u
TERN=${1:?usage: test_train_digits_bn.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

d="$tmp/bn"
mkdir -p "$d"
if ! "$PY" "$here/digits_ref.py" "$d" 100 32 sgd 0.05 cnn-bn >"$d/ref.txt" 2>&1; then
    bad "the PyTorch reference failed: $(tail -3 "$d/ref.txt")"
    echo "$pass passed, $fail failed"
    exit 1
fi
expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer sgd --lr 0.05 --momentum 0.9 \
    --nesterov --weight-decay 1e-4 --steps 100 --batch 32 --clip-norm 1 --precision fp32 --json -o "$d/trained.onnx"
cp "$tmp/out" "$d/tern.json"
expect 0 "$TERN" run "$d/trained.onnx" --dtype fp32 --input pixels="$d/x_test.npy" --output-dir "$d/out"
if "$PY" - "$d" "$here" <<'EOF'; then ok; else bad "tern's BatchNorm CNN run differs from PyTorch's (above)"; fi
import json, sys
import numpy as np, onnx, torch
from onnx import numpy_helper
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from digits_models import build
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/tern.json"))
a = np.array(ref["losses"]); b = np.array([s["loss"] for s in got["steps"]])
ga = np.array(ref["grad_norms"]); gb = np.array([s["grad_norm"] for s in got["steps"]])
fail = []
if len(b) != 100:
    fail.append(f"{len(b)} steps")
    b = np.resize(b, 100); gb = np.resize(gb, 100)
rel, grel = np.abs(a - b) / np.abs(a), np.abs(ga - gb) / np.abs(ga)
if not rel.max() <= 1e-4:
    fail.append(f"loss of step {rel.argmax() + 1}: tern {b[rel.argmax()]:.9g}, PyTorch {a[rel.argmax()]:.9g}")
if not grel.max() <= 1e-3:
    fail.append(f"grad norm of step {grel.argmax() + 1}: tern {gb[grel.argmax()]:.9g}, PyTorch {ga[grel.argmax()]:.9g}")
m = onnx.load(f"{d}/trained.onnx")
inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
worst = 0.0
for k, v in ref["bn_stats"].items():
    v = np.array(v, dtype=np.float64)
    e = float(np.abs(inits[k].reshape(-1) - v).max() / np.abs(v).max())
    worst = max(worst, e)
    if not e <= 1e-4:
        fail.append(f"running statistic {k}: {e:.3g} relative to PyTorch's")
if len(ref["bn_stats"]) != 4:
    fail.append(f"{len(ref['bn_stats'])} running statistics in the reference, expected 4")
bns = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
if len(bns) != 2 or any(len(n.output) != 1 or any(x.name == "training_mode" and x.i for x in n.attribute) for n in bns):
    fail.append("the trained model's BatchNormalization is not in inference mode")
logits = np.load(f"{d}/out/logits.npy")
acc = float((logits.argmax(1) == np.load(f"{d}/y_test.npy")).mean())
if abs(acc - ref["test_accuracy"]) > 0.01:
    fail.append(f"test accuracy tern {acc:.4f}, PyTorch {ref['test_accuracy']:.4f}")
mod = build("cnn-bn")
missing, unexpected = mod.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in inits.items()}, strict=False)
if unexpected or [k for k in missing if not k.endswith("num_batches_tracked")]:
    fail.append(f"initializers do not match the module: missing {missing}, unexpected {unexpected}")
mod.eval()
with torch.no_grad():
    tl = mod(torch.from_numpy(np.load(f"{d}/x_test.npy"))).numpy()
if not np.abs(tl - logits).max() <= 1e-4 * max(1.0, float(np.abs(tl).max())):
    fail.append(f"PyTorch with the trained initializers differs from tern run by {np.abs(tl - logits).max():.3g}")
print(f"digits BatchNorm CNN: max loss rel {rel.max():.2e}, max grad-norm rel {grel.max():.2e}, loss {a[0]:.5f} -> "
      f"{b[-1]:.5f}, running statistics within {worst:.2e}, test accuracy tern {acc * 100:.2f}% PyTorch "
      f"{ref['test_accuracy'] * 100:.2f}%, predicted step {got['steps'][-1]['step_ms']:.4f} ms")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
EOF
# --accumulate 2: each micro-batch normalises with its own batch statistics and updates the running statistics
# (two momentum updates per step), as PyTorch's model.train() over two micro-batches of 16 rows
a="$tmp/bn_acc"
mkdir -p "$a"
if ! "$PY" "$here/digits_ref.py" "$a" 12 16 sgd 0.05 cnn-bn,accum:2 >"$a/ref.txt" 2>&1; then
    bad "the PyTorch --accumulate reference failed: $(tail -3 "$a/ref.txt")"
else
    expect 0 "$TERN" train "$a/mlp.onnx" --data "$a/x.npy" --labels "$a/y.npy" --optimizer sgd --lr 0.05 \
        --momentum 0.9 --nesterov --weight-decay 1e-4 --steps 12 --batch 16 --accumulate 2 --clip-norm 1 \
        --precision fp32 --json -o "$a/acc.onnx"
    cp "$tmp/out" "$a/acc.json"
    if "$PY" "$here/bn_compare.py" "$a" acc "digits BatchNorm CNN, --accumulate 2"; then ok; else
        bad "tern's accumulated BatchNorm steps differ from PyTorch's (above)"; fi
fi
# refusals name the node and what is missing; nothing is treated as a constant
expect 1 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer sgd --lr 0.05 --steps 1 \
    --batch 32 --machine trn1.32xlarge --layout tp=2
contains "$tmp/err" "/2/BatchNormalization"
contains "$tmp/err" "tensor or pipeline parallelism (--layout)"
"$PY" - "$d/conv_k65.onnx" <<'EOF' || bad "building the 65-wide Conv model failed"
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
w = numpy_helper.from_array(np.ones((2, 1, 65), np.float32), "w")
r = numpy_helper.from_array(np.ones((1, 2, 2), np.float32), "r")
x = numpy_helper.from_array(np.ones((1, 1, 66), np.float32), "x")
nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[65]), helper.make_node("Mul", ["y", "r"], ["yr"]),
         helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
g = helper.make_graph(nodes, "c3", [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [x, w, r])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
save(m, sys.argv[1])
EOF
expect 1 "$TERN" train "$d/conv_k65.onnx" --loss-output loss --optimizer sgd --lr 0.1 --steps 1
contains "$tmp/err" "kernel of 65 along axis 2 (at most 64)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
