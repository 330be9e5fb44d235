#!/bin/bash
# Tensor and pipeline parallelism at small scale (docs/training.md, "Tensor and pipeline parallelism"): the same
# model trained on one core and on layouts of 2 to 8 simulated trn1.32xlarge NeuronCores gives the same loss
# curve. An MLP of two Megatron pairs (Linear 64->128, ReLU, Linear 128->64, Tanh, Linear 64->128, ReLU,
# Linear 128->10) on tp=2, pp=2, tp=2,dp=2, tp=2,pp=2 and tp=2,pp=2,dp=2 with 4 micro-batches, 12 AdamW steps each;
# the GPT-style model of test_train_gpt.sh (each block's attention split by heads - fused QKV column-parallel in
# its q, k, v groups, the output projection row-parallel - and its MLP split) on tp=2, tp=4 (one head per rank),
# pp=2 and tp=2,pp=2 with clipping, 8 steps (pp: the tied embedding in the first and last stage, its gradients
# summed between them). Tolerance: 1e-5 relative per step in fp32. The layouts compute the same sums in other orders: a
# row-parallel layer's K is two partial sums added by the all-reduce, micro-batches and data replicas add their
# gradients in turn, the global norm is summed per shard; each reordering moves a value by about an ulp (6e-8
# relative), and a dozen optimizer steps carry that to ~3e-7 (measured), well inside 1e-5, while a wrong shard,
# a missing all-reduce or a lost micro-batch moves the loss by 1e-3 or more. The trained ONNX of tp=2,pp=2 holds
# the reassembled weights (within 1e-5 of one core's). Then the errors: a tp that does not divide a pair's width or the
# heads, a pp that does not divide the linear layers, a layout larger than the machine, a model with no pair, no cut.
# Also: a layout's checkpoint resumes bit for bit, ZeRO-1 trains the same bytes (with clipping too, and with the
# GPT's embedding tied across stages), MSE with SGD momentum matches;
# a LLaMA-style model's SwiGLU MLPs (gate and up column-parallel side by side) and grouped-query attention on tp=2
# follow one core's losses.
set -u
TERN=${1:?usage: test_train_tp_pp.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: the test models could not be made" >&2; exit 1; }
import sys
import numpy as np
import torch
d = sys.argv[1]
torch.manual_seed(0)
nn = torch.nn
mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 128), nn.ReLU(),
                    nn.Linear(128, 10))
ln = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))
for name, m in (("mlp", mlp), ("ln", ln)):
    torch.onnx.export(m, torch.randn(1, 64), f"{d}/{name}.onnx", input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save(f"{d}/x.npy", rng.standard_normal((96, 64)).astype(np.float32))
np.save(f"{d}/y.npy", rng.integers(0, 10, 96).astype(np.int64))
PYEOF
mkdir -p "$tmp/gpt"
"$PY" "$here/gpt_ref.py" "$tmp/gpt" 1 2 1e-3 >/dev/null 2>&1 || { echo "NOT OK: gpt_ref.py failed" >&2; exit 1; }

M=trn1.32xlarge
mlp() { # mlp NAME [ARGS...]: 12 steps of the MLP, its --json in $tmp/NAME.json
    local name=$1
    shift
    expect 0 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --steps 12 --lr 1e-2 \
        --precision fp32 --machine $M --json "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
mlp one -o "$tmp/one.onnx"
mlp tp2 --layout tp=2
mlp pp2 --layout pp=2
mlp tp2dp2 --layout tp=2,dp=2
mlp tp2pp2 --layout tp=2,pp=2 -o "$tmp/tp2pp2.onnx"
mlp tp2pp2dp2 --layout tp=2,pp=2,dp=2,micro=4
gpt() {
    local name=$1
    shift
    expect 0 "$TERN" train "$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" --batch 2 --steps 8 \
        --lr 1e-3 --clip-norm 1 --precision fp32 --machine $M --json "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
gpt gpt_one
gpt gpt_tp2 --layout tp=2
gpt gpt_tp4 --layout tp=4
gpt gpt_pp2 --layout pp=2
gpt gpt_tp2pp2 --layout tp=2,pp=2
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "a layout's loss curve differs from one core's (above)"; fi
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
def curve(n):
    j = json.load(open(f"{d}/{n}.json"))
    return np.array([s["loss"] for s in j["steps"]]), j
fail = False
for ref, runs, tp_pairs in (("one", ["tp2", "pp2", "tp2dp2", "tp2pp2", "tp2pp2dp2"], 2), ("gpt_one", ["gpt_tp2", "gpt_tp4", "gpt_pp2", "gpt_tp2pp2"], 4)):
    a, _ = curve(ref)
    for r in runs:
        b, j = curve(r)
        lay = j["layout"]
        rel = float(np.max(np.abs(a - b) / np.abs(a))) if len(a) == len(b) else float("inf")
        good = len(b) == len(a) and rel <= 1e-5 and lay["pipeline_ms"] > 0 and (lay["tp"] == 1 or lay["pairs"] == tp_pairs)
        if lay["pp"] > 1:
            good = good and lay["bubble_ms"] > 0 and lay["p2p_ms"] > 0
            if ref == "gpt_one":  # the tied embedding's gradients cross between the first and last stage
                good = good and lay["tied_ms"] > 0
        if lay["dp"] > 1:
            good = good and lay["dp_comm_ms"] > 0
        print(f"{'ok' if good else 'NOT OK'}: {r} (tp={lay['tp']},pp={lay['pp']},dp={lay['dp']},micro={lay['micro']}): "
              f"{len(b)} steps, loss {b[0]:.5f} -> {b[-1]:.5f}, max rel vs one core {rel:.2e}; predicted step "
              f"{j['steps'][-1]['step_ms']:.4f} ms (one core {json.load(open(f'{d}/{ref}.json'))['steps'][-1]['step_ms']:.4f}),"
              f" pipeline {lay['pipeline_ms']:.4f} ms, bubbles {lay['bubble_ms']:.4f} ms")
        fail |= not good
    if a[-1] >= a[0]:
        print(f"NOT OK: {ref} does not learn ({a[0]} -> {a[-1]})")
        fail = True
w1 = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/one.onnx").graph.initializer}
w2 = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/tp2pp2.onnx").graph.initializer}
err = max(float(np.max(np.abs(w1[k] - w2[k]))) for k in w1 if w1[k].size > 1)
print(f"{'ok' if err <= 1e-5 else 'NOT OK'}: trained weights of tp=2,pp=2 against one core's: max |diff| {err:.2e}")
fail |= not err <= 1e-5
sys.exit(1 if fail else 0)
PYEOF

# a checkpoint of a layout resumes bit for bit (the shards gathered into it and scattered back); MSE with SGD
# momentum (the sum scaled by 1 / (replicas x micro-batches)) on tp=2,pp=2,dp=2 follows one core's losses
A=("$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --lr 1e-2 --precision fp32 --machine $M
   --layout tp=2,pp=2)
expect 0 "$TERN" train "${A[@]}" --steps 6 -o "$tmp/full.onnx"
expect 0 "$TERN" train "${A[@]}" --steps 3 --checkpoint "$tmp/ck" --every 3
expect 0 "$TERN" train "${A[@]}" --steps 6 --resume "$tmp/ck" -o "$tmp/resumed.onnx"
if cmp -s "$tmp/full.onnx" "$tmp/resumed.onnx"; then ok; else bad "tp=2,pp=2 resumed at step 3 differs from the run through"; fi
# ZeRO-1 over the data replicas of tp=2,pp=2,dp=2: the same trained model byte for byte as without
Z=("$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --lr 1e-2 --precision fp32 --machine $M
   --layout tp=2,pp=2,dp=2 --steps 6)
expect 0 "$TERN" train "${Z[@]}" -o "$tmp/z0.onnx"
expect 0 "$TERN" train "${Z[@]}" --zero 1 -o "$tmp/z1.onnx"
contains "$tmp/out" "ZeRO-1: optimizer state in blocks over the data replicas"
if cmp -s "$tmp/z0.onnx" "$tmp/z1.onnx"; then ok; else bad "ZeRO-1 on tp=2,pp=2,dp=2 trains another model"; fi
# ZeRO-1 with clipping: the global norm reads every replica's block (a one-element all-reduce over the replicas,
# timed), so the bytes are those of clipping without ZeRO; the clip acts (another model than unclipped); timing-only
# predicts the functional step
expect 0 "$TERN" train "${Z[@]}" --clip-norm 0.05 -o "$tmp/zc0.onnx" --json
cp "$tmp/out" "$tmp/zc0.json"
expect 0 "$TERN" train "${Z[@]}" --clip-norm 0.05 --zero 1 -o "$tmp/zc1.onnx"
contains "$tmp/out" "ZeRO-1 clipping norm's all-reduce"
if cmp -s "$tmp/zc0.onnx" "$tmp/zc1.onnx"; then ok; else bad "ZeRO-1 with clipping on tp=2,pp=2,dp=2 trains another model"; fi
if cmp -s "$tmp/z0.onnx" "$tmp/zc0.onnx"; then bad "clipping at 0.05 did not act"; else ok; fi
expect 0 "$TERN" train "${Z[@]}" --clip-norm 0.05 --zero 1 --json
cp "$tmp/out" "$tmp/zc1.json"
expect 0 "$TERN" train "${Z[@]}" --clip-norm 0.05 --zero 1 --json --timing-only
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "ZeRO-1 with clipping: timing (above)"; fi
import json, sys
d = sys.argv[1]
a, b, c = (json.load(open(f"{d}/{n}")) for n in ("zc1.json", "out", "zc0.json"))
sa, sb = [s["step_ms"] for s in a["steps"]], [s["step_ms"] for s in b["steps"]]
z = a["layout"].get("zero_norm_ms", 0)
good = sa == sb and z > 0 and b["layout"].get("zero_norm_ms") == z and "zero_norm_ms" not in c["layout"]
print(f"{'ok' if good else 'NOT OK'}: ZeRO-1 + clipping: the norm's all-reduce {z} ms, timing-only steps equal {sa == sb}")
sys.exit(0 if good else 1)
PYEOF
# ZeRO-1 with the GPT's embedding tied across the first and last stage (its stage copies' gradients summed after
# the replicas' reduce-scatter, each replica's block of the sum updated), with clipping: the unsharded bytes
GZ=("$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" --batch 8 --steps 4 --lr 1e-3
    --precision fp32 --machine $M --layout tp=2,pp=2,dp=2,micro=2 --clip-norm 1)
expect 0 "$TERN" train "${GZ[@]}" -o "$tmp/gz0.onnx"
contains "$tmp/out" "tied weights"
expect 0 "$TERN" train "${GZ[@]}" --zero 1 -o "$tmp/gz1.onnx"
if cmp -s "$tmp/gz0.onnx" "$tmp/gz1.onnx"; then ok; else bad "ZeRO-1 with tied embeddings trains another model"; fi
"$PY" -c "import numpy as np; np.save('$tmp/t.npy', np.random.default_rng(3).standard_normal((96, 10)).astype(np.float32))"
for L in "" "--layout tp=2,pp=2,dp=2"; do
    expect 0 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/t.npy" --loss mse --optimizer sgd \
        --momentum 0.9 --batch 16 --steps 6 --lr 1e-2 --precision fp32 --machine $M --json $L
    cp "$tmp/out" "$tmp/mse${L:+_l}.json"
done
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "MSE/SGD on tp=2,pp=2,dp=2 differs from one core"; fi
import json, sys
d = sys.argv[1]
a = [s["loss"] for s in json.load(open(f"{d}/mse.json"))["steps"]]
b = [s["loss"] for s in json.load(open(f"{d}/mse_l.json"))["steps"]]
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{'ok' if len(a) == len(b) == 6 and rel <= 1e-5 else 'NOT OK'}: MSE + SGD momentum, tp=2,pp=2,dp=2: max rel {rel:.2e}")
sys.exit(0 if len(a) == len(b) == 6 and rel <= 1e-5 else 1)
PYEOF

err() { # err PATTERN ARGS...: tern train refuses, naming what
    local pat=$1
    shift
    expect 1 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --machine $M "$@"
    contains "$tmp/err" "$pat"
}
err "tp=3 does not divide the 128 columns of node \"/0/Gemm\"" --batch 16 --layout tp=3
err "pp=3 does not divide the model's 4 linear layers" --batch 24 --layout pp=3
err "layout tp=4,pp=2,dp=8 needs 64 NeuronCores; 'trn1.32xlarge' has 32" --batch 16 --layout tp=4,pp=2,dp=8
err "batch 16 does not split over 3 data replicas x 1 micro-batches" --batch 16 --layout tp=2,dp=3
err "micro-batches need pipeline stages" --batch 16 --layout micro=2
err "ZeRO stage 1 in a layout needs stage 1 and data replicas (dp > 1: 1)" --batch 16 --layout tp=2 --zero 1
expect 2 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --machine $M --layout pz=2
contains "$tmp/err" "'pz' is not tp=N, pp=N, dp=N, vpp=N, micro=N or sp=0|1"
expect 1 "$TERN" train "$tmp/ln.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --steps 1 --machine $M \
    --layout tp=2
contains "$tmp/err" "no column/row-parallel linear pair"
contains "$tmp/err" "LayerNormalization"
expect 1 "$TERN" train "$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" --batch 8 --steps 1 \
    --machine $M --layout pp=8
contains "$tmp/err" "no cut for stage 1 after node \"/blocks.0/qkv/MatMul\""
contains "$tmp/err" "2 values cross there ('/blocks.0/qkv/MatMul_output_0', '/Add_output_0')"
expect 1 "$TERN" train "$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" --batch 2 --steps 1 \
    --machine $M --layout tp=8
contains "$tmp/err" "tp=8 does not divide the 4 heads of node \"/blocks.0/Reshape\""
# SwiGLU: a LLaMA-style decoder (scripts/gen_models.py's Llama without rotary embeddings, masked_fill causal mask;
# 4 query / 2 K/V heads in separate projections) - each block's gate and up MatMuls read the same input and are
# column-parallel together (the product of their columns stays on the rank), down row-parallel; each block's
# attention (separate Q/K/V projections, the K/V heads repeated by Unsqueeze/Expand/Reshape) splits its heads:
# 4 pairs on tp=2, 8 AdamW steps, one core's losses within 1e-5 relative
mkdir -p "$tmp/ll"
if "$PY" - "$tmp/ll" "$here/../../scripts" <<'PYEOF'; then ok; else bad "the LLaMA-style model could not be made"; fi
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[2])
from gen_models import Llama
d = sys.argv[1]
torch.manual_seed(0)
m = Llama(64, 32, 4, 2, 64, 2, 16, rope=False, where=True)
torch.onnx.export(m, torch.zeros(4, 16, dtype=torch.int64), f"{d}/ll.onnx", input_names=["input_ids"],
                  output_names=["logits"], opset_version=14,
                  dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=False)
rng = np.random.default_rng(2)
x = rng.integers(0, 64, (32, 17))
np.save(f"{d}/x.npy", x[:, :16].astype(np.int64))
np.save(f"{d}/y.npy", x[:, 1:].astype(np.int64))
PYEOF
ll=("$tmp/ll/ll.onnx" --data "$tmp/ll/x.npy" --labels "$tmp/ll/y.npy" --batch 4 --lr 3e-3 --optimizer adamw
    --precision fp32 --steps 8 --json)
expect 0 "$TERN" train "${ll[@]}"
cp "$tmp/out" "$tmp/ll/one.json"
expect 0 "$TERN" train "${ll[@]}" --machine $M --layout tp=2
cp "$tmp/out" "$tmp/ll/tp2.json"
if "$PY" - "$tmp/ll" <<'PYEOF'; then ok; else bad "SwiGLU tp=2 differs from one core (above)"; fi
import json, sys
import numpy as np
d = sys.argv[1]
one, tp = json.load(open(f"{d}/one.json")), json.load(open(f"{d}/tp2.json"))
a, b = np.array([s["loss"] for s in one["steps"]]), np.array([s["loss"] for s in tp["steps"]])
rel = float(np.max(np.abs(a - b) / np.abs(a))) if len(a) == len(b) == 8 else 1.0
print(f"llama swiglu tp=2: {tp['layout']['pairs']} pairs, loss rel {rel:.2e}")
sys.exit(0 if tp["layout"]["pairs"] == 4 and rel <= 1e-5 else 1)
PYEOF
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
