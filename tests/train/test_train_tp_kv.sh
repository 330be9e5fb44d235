#!/bin/bash
# Key/value heads replicated when tp exceeds them (docs/training.md, "Tensor and pipeline parallelism", as NxD
# does): tensor rank r holds the one key/value head its H / tp query heads read, a head replicated over tp / KV
# ranks, and those ranks sum the K/V projections' gradients (an all-reduce over that subgroup) so the replicas stay
# the same bytes (each step checks it and fails otherwise). Models: LayerNorm, H query heads sharing KV key/value
# heads (LLaMA's repeat_kv: Unsqueeze, Expand, Reshape), a residual, a mean over the 8 positions, a classifier; the K
# projection without bias (its gradient would be zero in exact arithmetic - softmax ignores a constant per query -
# so AdamW walks it by +-lr on rounding noise alone, in one core's run and a layout's alike), the V projection's
# bias replicated with its weight.
#   - gqa (4 query / 2 K/V heads) on tp=4 and mqa (4 / 1: multi-query) on tp=2 and tp=4 follow one core's losses
#     within 1e-5 relative over 10 AdamW steps (measured 1.0e-7), their trained weights one core's within 1e-5 of
#     each tensor's largest value (measured 2.9e-7);
#   - deep (an input projection, two such blocks, the classifier: 10 linear layers) on tp=4,pp=2, on
#     tp=4,pp=2,dp=2,micro=4 (micro-batches of one row: the Reshape of the repeat merges after a leading axis of 1)
#     and ZeRO-1 on tp=4,dp=2, the same bounds (measured 1.2e-7 and 5.4e-7); TERN_THREADS=1 and 2 give the same bytes;
#     a tp=4,pp=2 checkpoint resumes to the run-through's trained model byte for byte;
#   - --timing-only predicts the functional run's step text (step_ms, predicted_seconds, every layout field,
#     kv_ms the subgroup all-reduce) for gqa tp=4 and deep tp=4,pp=2,dp=2,micro=4;
#   - bad layouts name the rule and the values: tp=8 over 4 query heads, tp=3 over 2 K/V heads (neither a divisor
#     nor a multiple).
# The LLaMA-style decoder of test_train_llama.sh (rotary embeddings, 4 / 2 heads) on tp=4 is checked there.
set -u
TERN=${1:?usage: test_train_tp_kv.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: the test models could not be made" >&2; exit 1; }
import sys
import numpy as np
import torch
nn = torch.nn
d = sys.argv[1]
class Attn(nn.Module):
    def __init__(s, E, H, KV):
        super().__init__()
        s.H, s.KV, s.D = H, KV, E // H
        s.q, s.o = nn.Linear(E, E), nn.Linear(E, E)
        s.k, s.v = nn.Linear(E, KV * s.D, bias=False), nn.Linear(E, KV * s.D)
        s.ln = nn.LayerNorm(E)
    def forward(s, x):
        B, S, E = x.shape
        D, n = s.D, s.H // s.KV
        h = s.ln(x)
        q = s.q(h).reshape(B, S, s.H, D).transpose(1, 2)
        rep = lambda t: t.reshape(B, S, s.KV, D).transpose(1, 2)[:, :, None].expand(B, s.KV, n, S, D).reshape(
            B, s.H, S, D)
        k, v = rep(s.k(h)), rep(s.v(h))
        a = ((q @ k.transpose(-1, -2)) * D ** -0.5).softmax(-1)
        return x + s.o((a @ v).transpose(1, 2).reshape(B, S, E))
class Net(nn.Module):
    def __init__(s, E, H, KV, blocks, inp):
        super().__init__()
        s.inp = nn.Linear(32, E) if inp else None
        s.blocks = nn.ModuleList([Attn(E, H, KV) for _ in range(blocks)])
        s.head = nn.Linear(E, 10)
    def forward(s, x):
        h = s.inp(x) if s.inp is not None else x
        for b in s.blocks:
            h = b(h)
        return s.head(h.mean(1))
for name, E, H, KV, nb, inp in (("gqa", 32, 4, 2, 1, False), ("mqa", 32, 4, 1, 1, False),
                                 ("deep", 32, 4, 2, 2, True), ("h6kv2", 48, 6, 2, 1, True)):
    torch.manual_seed(0)
    torch.onnx.export(Net(E, H, KV, nb, inp), torch.randn(1, 8, 32), f"{d}/{name}.onnx", input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save(f"{d}/x.npy", rng.standard_normal((64, 8, 32)).astype(np.float32))
np.save(f"{d}/y.npy", rng.integers(0, 10, 64).astype(np.int64))
PYEOF

M=trn1.32xlarge
run() { # run NAME MODEL [ARGS...]: 10 steps at batch 8, --json kept in $tmp/NAME.json, the model in NAME.onnx
    local name=$1 model=$2
    shift 2
    expect 0 "$TERN" train "$tmp/$model.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --steps 10 \
        --lr 1e-3 --precision fp32 --json -o "$tmp/$name.onnx" "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
run gqa_one gqa
run gqa_tp4 gqa --machine $M --layout tp=4
run mqa_one mqa
run mqa_tp2 mqa --machine $M --layout tp=2
run mqa_tp4 mqa --machine $M --layout tp=4
run deep_one deep
run deep_tp4pp2 deep --machine $M --layout tp=4,pp=2
run deep_tp4pp2dp2 deep --machine $M --layout tp=4,pp=2,dp=2,micro=4
run deep_zero deep --machine $M --layout tp=4,dp=2 --zero 1
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "a layout with replicated K/V heads differs from one core (above)"; fi
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
W = lambda n: {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{n}.onnx").graph.initializer}
fail = False
for ref, runs in (("gqa_one", ["gqa_tp4"]), ("mqa_one", ["mqa_tp2", "mqa_tp4"]),
                  ("deep_one", ["deep_tp4pp2", "deep_tp4pp2dp2", "deep_zero"])):
    r, w1 = [s["loss"] for s in json.load(open(f"{d}/{ref}.json"))["steps"]], W(ref)
    for n in runs:
        j = json.load(open(f"{d}/{n}.json"))
        t, w = [s["loss"] for s in j["steps"]], W(n)
        rel = max(abs(a - b) / abs(a) for a, b in zip(r, t)) if len(t) == len(r) == 10 else 1.0
        werr = max(float(np.abs(w1[k] - w[k]).max() / np.abs(w1[k]).max()) for k in w1)
        kv = j["layout"].get("kv_ms", 0)
        good = rel <= 1e-5 and werr <= 1e-5 and kv > 0 and sorted(w) == sorted(w1)
        print(f"{'ok' if good else 'NOT OK'}: {n}: loss {rel:.2e} relative over {len(t)} steps, trained weights "
              f"within {werr:.2e}, K/V gradient all-reduce {kv} ms")
        fail |= not good
sys.exit(1 if fail else 0)
PYEOF
contains "$tmp/deep_tp4pp2.json" '"kv_ms":'
# the text names the subgroup all-reduce
expect 0 "$TERN" train "$tmp/gqa.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --steps 1 --precision fp32 \
    --machine $M --layout tp=4
contains "$tmp/out" "replicated K/V heads' gradients 0.0580 ms"

# determinism: the host's thread count changes no byte
for n in 1 2; do
    TERN_THREADS=$n expect 0 "$TERN" train "$tmp/deep.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 \
        --steps 3 --lr 1e-3 --precision fp32 --json --machine $M --layout tp=4,pp=2,dp=2,micro=4 -o "$tmp/th$n.onnx"
    cp "$tmp/out" "$tmp/th$n.json"
done
if cmp -s "$tmp/th1.onnx" "$tmp/th2.onnx" && cmp -s "$tmp/th1.json" "$tmp/th2.json"; then ok; else
    bad "TERN_THREADS=1 and 2 train different bytes"; fi

# a checkpoint resumes bit for bit (the replicated blocks gathered once, scattered to every replica)
A=("$tmp/deep.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --lr 1e-3 --precision fp32 --machine $M
   --layout tp=4,pp=2)
expect 0 "$TERN" train "${A[@]}" --steps 6 -o "$tmp/full.onnx"
expect 0 "$TERN" train "${A[@]}" --steps 3 --checkpoint "$tmp/ck" --every 3
expect 0 "$TERN" train "${A[@]}" --steps 6 --resume "$tmp/ck" -o "$tmp/resumed.onnx"
if cmp -s "$tmp/full.onnx" "$tmp/resumed.onnx"; then ok; else bad "tp=4,pp=2 resumed at step 3 differs from the run through"; fi

# --timing-only: the same predicted step text as the functional run
tpair() { # tpair NAME MODEL LAYOUT
    local c=("$tmp/$2.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --steps 2 --lr 1e-3 --precision fp32
             --json --machine $M --layout "$3")
    expect 0 "$TERN" train "${c[@]}"
    cp "$tmp/out" "$tmp/$1.f.json"
    expect 0 "$TERN" train "${c[@]}" --timing-only
    cp "$tmp/out" "$tmp/$1.t.json"
}
tpair t_gqa gqa tp=4
tpair t_deep deep tp=4,pp=2,dp=2,micro=4
if "$PY" - "$tmp" t_gqa t_deep <<'PYEOF'; then ok; else bad "timing-only predicts another step than the functional run (above)"; fi
import re, sys
d = sys.argv[1]
fail = False
for n in sys.argv[2:]:
    f, t = (open(f"{d}/{n}.{k}.json").read() for k in ("f", "t"))
    pick = lambda s: (re.findall(r'"step_ms":[^,]+', s), re.search(r'"predicted_seconds":[^,]+', s).group(0),
                      re.search(r'"layout":\{[^}]*\}', s).group(0))
    a, b = pick(f), pick(t)
    good = a == b and len(a[0]) == 2 and '"kv_ms":' in a[2]
    print(f"{'ok' if good else 'NOT OK'}: {n}: {a[1]} vs {b[1]}, {a[2]} | {b[2]}")
    fail |= not good
sys.exit(1 if fail else 0)
PYEOF

# bad layouts: tp over the query heads, tp neither a divisor nor a multiple of the K/V heads
expect 1 "$TERN" train "$tmp/gqa.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --steps 1 --precision fp32 \
    --machine $M --layout tp=8
contains "$tmp/err" "tp=8 does not divide the 4 heads of node \"/blocks.0/Reshape\""
contains "$tmp/err" "tp may exceed only key/value heads"
expect 1 "$TERN" train "$tmp/h6kv2.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 8 --steps 1 --precision fp32 \
    --machine $M --layout tp=3
contains "$tmp/err" "tp=3 does not divide the 2 heads of node \"/blocks.0/Reshape_1\""
contains "$tmp/err" "nor is it a multiple of them"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
