#!/bin/bash
# The fused optimizer update (one tern.SGDUpdate / tern.AdamUpdate kernel per weight, docs/training.md "The step
# graph") against the node-by-node update (--no-fused-optimizer): over 6 steps of a small MLP, the losses, gradient
# norms, trained ONNX file and checkpoint (weights and optimizer state) agree bit for bit for SGD, SGD with
# momentum, Nesterov and weight decay, Adam with L2 decay, AdamW, each with and without clipping by global norm,
# LAMB (the AdamUpdate of the direction, the trust ratio, SGDUpdate(p, r, trust lr)) with and without decay and
# clipping, in fp32 and bf16 (fp32 master), pure BF16 with round-to-nearest-even (bf16-rne) for LAMB, AdamW and
# SGD, and under ZeRO-1 over 2 cores (the shard update graph). The fused compile (AdamW, LAMB) holds fewer nodes
# and predicts a shorter step than the unfused one (the intermediates' HBM passes are gone). bf16-sr stays node by
# node in both (its rounding stream follows each engine's instruction count): identical by construction, run once.
# tern.AdamUpdate with lamb = 1 alone, on the device and in the host evaluator, against numpy's fp32 reference.
set -u
TERN=${1:?usage: test_train_fused_optim.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: generating the model failed" >&2; exit 1; }
import sys
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
r = np.random.default_rng(5)
inits = {"w1": (r.standard_normal((8, 160)) * 0.3).astype(np.float32), "b1": np.zeros(160, np.float32),
         "w2": (r.standard_normal((160, 4)) * 0.3).astype(np.float32), "b2": np.zeros(4, np.float32)}
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["o"]),
         helper.make_node("Add", ["o", "b2"], ["logits"])]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
                      [numpy_helper.from_array(v, k) for k, v in inits.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, f"{d}/mlp.onnx")
np.save(f"{d}/x.npy", (r.standard_normal((48, 8)) * 2).astype(np.float32))
np.save(f"{d}/y.npy", r.integers(0, 4, 48).astype(np.int64))
PYEOF
B="$TERN train $tmp/mlp.onnx --data $tmp/x.npy --labels $tmp/y.npy --batch 8 --steps 6 --json"
n=0
compare() { # compare LABEL ARGS...: fused and unfused runs agree bit for bit
    local label=$1
    shift
    n=$((n + 1))
    expect 0 $B "$@" -o "$tmp/f$n.onnx" --checkpoint "$tmp/cf$n"
    grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/out" >"$tmp/f$n.log"
    expect 0 $B "$@" --no-fused-optimizer -o "$tmp/u$n.onnx" --checkpoint "$tmp/cu$n"
    grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/out" >"$tmp/u$n.log"
    if [ "$(wc -l <"$tmp/f$n.log")" -eq 6 ] && cmp -s "$tmp/f$n.log" "$tmp/u$n.log"; then ok; else
        bad "$label: losses differ: $(diff "$tmp/f$n.log" "$tmp/u$n.log" | head -3)"; fi
    if cmp -s "$tmp/f$n.onnx" "$tmp/u$n.onnx"; then ok; else bad "$label: the trained models differ"; fi
    if cmp -s "$tmp/cf$n/checkpoint.tck" "$tmp/cu$n/checkpoint.tck"; then ok; else
        bad "$label: the checkpoints (weights, optimizer state) differ"; fi
}
for clip in "" "--clip-norm 0.5"; do
    compare "sgd $clip" --optimizer sgd --lr 0.1 $clip
    compare "sgd momentum nesterov wd $clip" --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01 $clip
    compare "adam wd $clip" --optimizer adam --lr 1e-2 --weight-decay 0.01 $clip
    compare "adamw $clip" --optimizer adamw --lr 1e-2 --weight-decay 0.05 $clip
done
compare "sgd momentum bf16" --optimizer sgd --lr 0.05 --momentum 0.9 --precision bf16
compare "adamw bf16 clip" --optimizer adamw --lr 1e-2 --weight-decay 0.05 --precision bf16 --clip-norm 0.5
compare "adamw zero-1" --optimizer adamw --lr 1e-2 --weight-decay 0.05 --cores 2 --zero 1 --clip-norm 0.5
compare "lamb" --optimizer lamb --lr 1e-2
compare "lamb wd clip" --optimizer lamb --lr 1e-2 --weight-decay 0.01 --clip-norm 0.5
compare "lamb wd bf16" --optimizer lamb --lr 1e-2 --weight-decay 0.01 --precision bf16
compare "lamb wd bf16-rne (pure BF16)" --optimizer lamb --lr 1e-2 --weight-decay 0.01 --precision bf16-rne
compare "adamw bf16-rne (pure BF16) clip" --optimizer adamw --lr 1e-2 --weight-decay 0.05 --precision bf16-rne --clip-norm 0.5
compare "sgd momentum bf16-rne (pure BF16)" --optimizer sgd --lr 0.05 --momentum 0.9 --precision bf16-rne
compare "bf16-sr (node by node in both)" --optimizer adamw --lr 1e-2 --weight-decay 0.05 --precision bf16-sr
# the fused update is what runs: one node per weight instead of a dozen, and a shorter predicted step
nodes_ms() { grep -o '"graph_nodes":[0-9]*' "$tmp/out" | cut -d: -f2; grep -o '"step_ms":[0-9.]*' "$tmp/out" | cut -d: -f2; }
for opt in adamw lamb; do
    expect 0 $B --optimizer $opt --lr 1e-2 --weight-decay 0.01 --steps 1 --timing-only
    nodes_ms >"$tmp/fi"
    expect 0 $B --optimizer $opt --lr 1e-2 --weight-decay 0.01 --steps 1 --timing-only --no-fused-optimizer
    nodes_ms >"$tmp/ui"
    if paste "$tmp/fi" "$tmp/ui" | awk 'NF != 2 || $1 >= $2 { e = 1 } END { exit e + (NR != 2) }'; then ok; else
        bad "$opt: fused (nodes, step ms) $(tr '\n' ' ' <"$tmp/fi") not below unfused $(tr '\n' ' ' <"$tmp/ui")"; fi
done
# the op itself: tern.AdamUpdate with lamb = 1 on the device (inputs) and in the host evaluator (initializers,
# folded at compile time) against numpy's fp32 operations in the step graph's order, byte for byte; and lamb with
# adamw refused by name
"$PY" - "$tmp" <<'PYEOF' || bad "generating the AdamUpdate models failed"
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
r = np.random.default_rng(3)
N = (3, 50)
vals = {"p": r.standard_normal(N).astype(np.float32), "g": r.standard_normal(N).astype(np.float32),
        "m": (r.standard_normal(N) * .1).astype(np.float32), "v": (r.random(N) * .01).astype(np.float32),
        "bc1": np.array([0.19], np.float32), "bc2s": np.array([0.0447], np.float32), "coef": np.array([0.7], np.float32)}
for kind in ("const", "input", "bad"):
    node = helper.make_node("AdamUpdate", ["p", "g", "m", "v", "bc1", "bc2s", "", "coef"], ["r", "m2", "v2"],
                            domain="tern", weight_decay=0.01, beta1=0.9, beta2=0.999,
                            one_minus_beta1=float(np.float32(1 - 0.9)), one_minus_beta2=float(np.float32(1 - 0.999)),
                            eps=1e-6, adamw=int(kind == "bad"), lamb=1)
    const = kind == "const"
    ins = [] if const else [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in vals.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in vals.items()] if const else []
    outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(N)) for k in ("r", "m2", "v2")]
    m = helper.make_model(helper.make_graph([node], "lamb", ins, outs, inits),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("tern", 1)])
    m.ir_version = 8
    onnx.save(m, f"{d}/lamb_{kind}.onnx")
for k, v in vals.items():
    np.save(f"{d}/{k}.npy", v)
PYEOF
mkdir -p "$tmp/oc" "$tmp/oi"
expect 0 "$TERN" run "$tmp/lamb_const.onnx" --output-dir "$tmp/oc"
ins=""
for k in p g m v bc1 bc2s coef; do ins="$ins --input $k=$tmp/$k.npy"; done
expect 0 "$TERN" run "$tmp/lamb_input.onnx" $ins --output-dir "$tmp/oi"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "AdamUpdate lamb = 1 differs from the fp32 reference"; fi
import sys, numpy as np
d = sys.argv[1]
p, g, m, v, bc1, bc2s, coef = (np.load(f"{d}/{k}.npy") for k in ("p", "g", "m", "v", "bc1", "bc2s", "coef"))
f = np.float32
g = g * coef[0]
m2 = m * f(0.9) + g * f(1 - 0.9)
v2 = v * f(0.999) + (g * g) * f(1 - 0.999)
rr = (m2 / bc1[0]) / (np.sqrt(v2) / bc2s[0] + f(1e-6)) + p * f(0.01)
bad = 0
for sub in ("oc", "oi"):  # host evaluator, device
    for k, ref in (("r", rr), ("m2", m2), ("v2", v2)):
        got = np.load(f"{d}/{sub}/{k}.npy")
        if got.dtype != np.float32 or got.tobytes() != ref.astype(np.float32).tobytes():
            print(f"NOT OK: {sub}/{k}: max |diff| {np.abs(got - ref).max():.3g}", file=sys.stderr)
            bad = 1
sys.exit(bad)
PYEOF
expect 1 "$TERN" run "$tmp/lamb_bad.onnx" $ins
contains "$tmp/err" "lamb = 1 takes no adamw attribute"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
