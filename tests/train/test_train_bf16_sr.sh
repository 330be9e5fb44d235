#!/bin/bash
# Pure BF16 training (--precision bf16-sr / bf16-rne): weights and optimizer state live in BF16 on the device and
# each fp32 update is rounded back to BF16 there. The documented example of why stochastic rounding matters: 64
# weights of 1.0, a constant gradient with lr * grad = -1e-3 (under half a BF16 ulp at 1.0, which is 2^-8), 100
# plain SGD steps. In fp32 the weights reach 1.1; under round-to-nearest-even every update vanishes and they stay
# exactly 1.0; under stochastic rounding each step rounds up to 1 + 2^-7 with probability 1e-3 / 2^-7 = 0.128, so
# the expected end value is 1.1 again: the mean over the 64 weights must lie within 0.02 of it (its standard
# deviation is 0.0033). Also: the seeded stream is reproducible (same seed, same bits), depends on the seed, and a
# run resumed from a checkpoint at step 50 gives the straight run's trained model bit for bit.
set -u
TERN=${1:?usage: test_train_bf16_sr.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: generating the model failed" >&2; exit 1; }
import sys
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
w = numpy_helper.from_array(np.ones(64, np.float32), "w")
nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("ReduceSum", ["xw"], ["loss"], keepdims=0)]
g = helper.make_graph(nodes, "lin", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                      [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, f"{d}/lin.onnx")
np.save(f"{d}/x.npy", np.full((1, 64), -1e-3, np.float32))  # d loss / d w = x, so w -= lr x adds 1e-3
PYEOF
T="$TERN train $tmp/lin.onnx --data $tmp/x.npy --batch 1 --loss-output loss --optimizer sgd --lr 1"
expect 0 $T --steps 100 --precision fp32 -o "$tmp/fp32.onnx"
expect 0 $T --steps 100 --precision bf16-rne -o "$tmp/rne.onnx"
expect 0 $T --steps 100 --precision bf16-sr --seed 7 -o "$tmp/sr.onnx"
expect 0 $T --steps 100 --precision bf16-sr --seed 7 -o "$tmp/sr_again.onnx"
expect 0 $T --steps 100 --precision bf16-sr --seed 8 -o "$tmp/sr_seed8.onnx"
expect 0 $T --steps 50 --precision bf16-sr --seed 7 --checkpoint "$tmp/ck"
expect 0 $T --steps 100 --precision bf16-sr --seed 7 --resume "$tmp/ck" -o "$tmp/sr_resumed.onnx"
if cmp -s "$tmp/sr.onnx" "$tmp/sr_again.onnx"; then ok; else bad "two bf16-sr runs with one seed differ"; fi
if cmp -s "$tmp/sr.onnx" "$tmp/sr_resumed.onnx"; then ok; else bad "the resumed bf16-sr run differs from the straight one"; fi
if ! cmp -s "$tmp/sr.onnx" "$tmp/sr_seed8.onnx"; then ok; else bad "seeds 7 and 8 gave the same rounding"; fi
if "$PY" - "$tmp" <<'EOF'; then ok; else bad "the RNE / SR example (above)"; fi
import sys
import numpy as np, onnx
from onnx import numpy_helper
d = sys.argv[1]
def w(name):
    return numpy_helper.to_array(onnx.load(f"{d}/{name}.onnx").graph.initializer[0]).astype(np.float64)
f32, rne, sr = w("fp32"), w("rne"), w("sr")
bits = sr.astype(np.float32).view(np.uint32)
fail = []
if not np.all(np.abs(f32 - 1.1) < 1e-4):
    fail.append(f"fp32 ends at {f32.min()}..{f32.max()}, expected 1.1")
if not np.all(rne == 1.0):
    fail.append(f"RNE moved the weights: {rne.min()}..{rne.max()} (an update of 1e-3 is under half an ulp)")
if not abs(sr.mean() - 1.1) < 0.02 or not sr.min() > 1.0:
    fail.append(f"SR: mean {sr.mean():.5f} (expected 1.1 +- 0.02), min {sr.min()}")
if np.any(bits & 0xFFFF):
    fail.append("SR weights are not BF16 values")
print(f"100 steps of +1e-3 from 1.0: fp32 {f32.mean():.6f}, bf16 RNE {rne.mean():.6f}, bf16 SR mean {sr.mean():.6f} "
      f"(min {sr.min():.6f}, max {sr.max():.6f})")
for m in fail:
    print("  " + m)
sys.exit(1 if fail else 0)
EOF
expect 2 $TERN train "$tmp/lin.onnx" --data "$tmp/x.npy" --batch 1 --loss-output loss --optimizer sgd --lr 1 --steps 1 \
    --precision nonsense
contains "$tmp/err" "expected fp32, bf16, bf16-sr or bf16-rne"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
