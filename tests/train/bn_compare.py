#!/usr/bin/python3
"""bn_compare.py DIR NAME LABEL: tern's BatchNorm run DIR/NAME.json (losses) and DIR/NAME.onnx (the trained running
statistics) against DIR/ref.json from digits_ref.py (losses within 1e-5 relative per step, the 4 running statistics
within 1e-5 of their largest value); prints the figures, exits 1 on a difference. Shared by test_train_dp_bn.sh and
test_train_digits_bn.sh."""
import json, sys
import numpy as np, onnx
from onnx import numpy_helper
d, n, label = sys.argv[1:4]
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/{n}.json"))
a = np.array(ref["losses"]); b = np.array([s["loss"] for s in got["steps"]])
fail = []
if len(b) != len(a):
    fail.append(f"{len(b)} steps, PyTorch {len(a)}")
    b = np.resize(b, len(a))
rel = np.abs(a - b) / np.abs(a)
if not rel.max() <= 1e-5:
    fail.append(f"loss of step {rel.argmax() + 1}: tern {b[rel.argmax()]:.9g}, PyTorch {a[rel.argmax()]:.9g}")
inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{n}.onnx").graph.initializer}
worst = 0.0
for k, v in ref["bn_stats"].items():
    v = np.array(v, dtype=np.float64)
    e = float(np.abs(inits[k].reshape(-1) - v).max() / np.abs(v).max())
    worst = max(worst, e)
    if not e <= 1e-5:
        fail.append(f"running statistic {k}: {e:.3g} relative to PyTorch's")
if len(ref["bn_stats"]) != 4:
    fail.append(f"{len(ref['bn_stats'])} running statistics in the reference, expected 4")
print(f"{label}: max loss rel {rel.max():.2e} (loss {a[0]:.5f} -> {b[-1]:.5f}), running statistics within {worst:.2e}")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
