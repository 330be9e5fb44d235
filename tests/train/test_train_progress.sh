#!/bin/bash
# `tern train --progress`: host progress on stderr for long runs (the GPT-2 124M step takes minutes here): the
# step graph's build time, then after every step the host time elapsed and the time left, estimated from the
# mean step so far; stdout (the step lines, or --json) stays as it was.
set -u
TERN=${1:?usage: test_train_progress.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: generating the model failed" >&2; exit 1; }
import sys
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
rng = np.random.default_rng(3)
nodes = [h.make_node("Gather", ["a", "i"], ["y"], axis=0), h.make_node("Mul", ["y", "R"], ["yr"]),
         h.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
inits = [nh.from_array(rng.standard_normal((50, 8)).astype(np.float32), "a"),
         nh.from_array(rng.integers(0, 50, 20).astype(np.int64), "i"),
         nh.from_array(rng.standard_normal((20, 8)).astype(np.float32), "R")]
g = h.make_graph(nodes, "p", [], [h.make_tensor_value_info("loss", T.FLOAT, [])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, f"{sys.argv[1]}/m.onnx")
PYEOF
expect 0 "$TERN" train "$tmp/m.onnx" --loss-output loss --optimizer sgd --lr 0.01 --steps 4 --progress
contains "$tmp/err" "progress: building and compiling the training step of $tmp/m.onnx"
contains "$tmp/err" "progress: step graph compiled in "
for k in 1 2 3 4; do contains "$tmp/err" "progress: step $k/4, "; done
if grep -q "progress: step 4/4, .* s elapsed (.* s per step), ETA 0.0 s" "$tmp/err"; then ok
else bad "the last progress line has no ETA 0.0 s: $(tail -1 "$tmp/err")"; fi
if grep -q "^progress" "$tmp/out"; then bad "progress lines went to stdout"; else ok; fi
contains "$tmp/out" "step 4/4: loss "
# without --progress: nothing on stderr
expect 0 "$TERN" train "$tmp/m.onnx" --loss-output loss --optimizer sgd --lr 0.01 --steps 2 --json
if [ -s "$tmp/err" ]; then bad "stderr without --progress: $(head -c 200 "$tmp/err")"; else ok; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
