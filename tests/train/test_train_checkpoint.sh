#!/bin/bash
# Checkpoints of `tern train`: 10 steps, a checkpoint, then --resume for steps 11-20 gives bit for bit the losses
# and the trained ONNX file of 20 steps in one run (AdamW: the step count drives the bias corrections; --shuffle:
# the data position and order are restored). A truncated or corrupted checkpoint and one written for another data
# order are refused with the byte offset or both orders; no temporary file is left behind.
set -u
TERN=${1:?usage: test_train_checkpoint.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: generating the model failed" >&2; exit 1; }
import sys
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
r = np.random.default_rng(3)
inits = {"w1": (r.standard_normal((8, 16)) * 0.3).astype(np.float32), "b1": np.zeros(16, np.float32),
         "w2": (r.standard_normal((16, 4)) * 0.3).astype(np.float32), "b2": np.zeros(4, np.float32)}
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["o"]),
         helper.make_node("Add", ["o", "b2"], ["logits"])]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
                      [numpy_helper.from_array(v, k) for k, v in inits.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, f"{d}/mlp.onnx")
np.save(f"{d}/x.npy", r.standard_normal((37, 8)).astype(np.float32))
np.save(f"{d}/y.npy", r.integers(0, 4, 37).astype(np.int64))
PYEOF
T="$TERN train $tmp/mlp.onnx --data $tmp/x.npy --labels $tmp/y.npy --batch 8 --optimizer adamw --lr 1e-2 --shuffle 3"
expect 0 $T --steps 20 --json -o "$tmp/a.onnx"
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/out" | tail -10 >"$tmp/a_tail"
expect 0 $T --steps 10 --checkpoint "$tmp/ck"
if [ -f "$tmp/ck/checkpoint.tck" ] && [ ! -e "$tmp/ck/checkpoint.tck.tmp" ]; then ok; else bad "no checkpoint, or a temporary file left"; fi
cp "$tmp/ck/checkpoint.tck" "$tmp/good.tck"
expect 0 $T --steps 20 --resume "$tmp/ck" --json -o "$tmp/b.onnx"
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/out" >"$tmp/b_all"
if cmp -s "$tmp/a_tail" "$tmp/b_all"; then ok; else bad "resumed steps differ: $(diff "$tmp/a_tail" "$tmp/b_all" | head -4)"; fi
contains "$tmp/b_all" '"step":11,'
if cmp -s "$tmp/a.onnx" "$tmp/b.onnx"; then ok; else bad "the resumed run's trained model differs from the straight run's"; fi
# another data order
expect 1 $TERN train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --shuffle 4 --steps 20 \
    --resume "$tmp/ck"
contains "$tmp/err" "reading the data in order 4 at row"
contains "$tmp/err" "this run reads order 5"
# a truncated file, a flipped byte
head -c 10 "$tmp/good.tck" >"$tmp/ck/checkpoint.tck"
expect 1 $T --steps 20 --resume "$tmp/ck"
contains "$tmp/err" "truncated at byte 8 (the version needs 4 bytes, 2 left)"
"$PY" -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[100] ^= 1; open(sys.argv[2], 'wb').write(b)" \
    "$tmp/good.tck" "$tmp/ck/checkpoint.tck"
expect 1 $T --steps 20 --resume "$tmp/ck"
contains "$tmp/err" "CRC-32 mismatch"
printf 'NOTACKPT0000000000000000' >"$tmp/ck/checkpoint.tck"
expect 1 $T --steps 20 --resume "$tmp/ck"
contains "$tmp/err" "byte 0: not a tern checkpoint"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
