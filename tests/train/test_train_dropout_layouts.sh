#!/bin/bash
# Dropout in training mode under gradient accumulation, data parallelism and tensor/pipeline/sequence-parallel
# layouts (docs/training.md, "Dropout"): every program that computes part of a Dropout's tensor draws that part of
# the mask the one-core run over the step's whole batch draws (dropout.c), so each of them trains the one-core run:
#   - the GPT of gpt_dropout.py (Dropout 0.1 after the embeddings, on the attention probabilities - split by heads
#     under tensor parallelism -, after the projection, on the MLP's hidden columns - split by columns - and after
#     the MLP), batch 8, 6 AdamW steps with clipping, fp32: --accumulate 2 of 4 rows, --cores 2 and 4 (data
#     parallelism), tp=2, tp=4, tp=2,sp=1 (the dropouts between the tensor-parallel regions on each rank's rows),
#     tp=2,pp=2,micro=2, tp=2,pp=2,dp=2,micro=2,sp=1, the interleaved pp=2,vpp=2,micro=2, --recompute: losses within
#     1e-5 relative of one core's (the layouts' tolerance: reduction order; test_train_tp_sp.sh) and trained weights
#     within 2e-4 of each tensor's largest value;
#   - the test can fail: --seed 1 draws other masks and its losses differ from seed 0's by more than 1e-3;
#   - gradient accumulation under layouts (tp=2, tp=2,pp=2,sp=1, tp=2,dp=2 with ZeRO-1; each replica runs A x micro
#     micro-batches) follows the same bound; with ignored labels it follows one core's --accumulate (each micro-step
#     normalised by its own counted rows) within 1e-5, not one core's whole batch (more than 1e-4 away);
#   - the masks are fed, not compiled: timing-only predicts the functional run's step on tp=2,pp=2 with
#     --accumulate 2.
set -u
TERN=${1:?usage: test_train_dropout_layouts.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

"$PY" "$here/gpt_dropout.py" "$tmp" 8 >/dev/null 2>&1 || { echo "NOT OK: gpt_dropout.py failed" >&2; exit 1; }
M=trn1.32xlarge
G=("$tmp/gpt.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --lr 1e-3 --steps 6 --optimizer adamw --clip-norm 1
   --precision fp32 --json)
run() { # run NAME BATCH [ARGS...]: --json in $tmp/NAME.json, the trained model in NAME.onnx
    local name=$1 batch=$2
    shift 2
    expect 0 "$TERN" train "${G[@]}" --batch "$batch" -o "$tmp/$name.onnx" "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
run one 8
run seed1 8 --seed 1
run acc 4 --accumulate 2
run dp2 8 --machine $M --cores 2
run dp4 8 --machine $M --cores 4
run tp2 8 --machine $M --layout tp=2
run tp4 8 --machine $M --layout tp=4
run tp2sp 8 --machine $M --layout tp=2,sp=1
run tp2pp2 8 --machine $M --layout tp=2,pp=2,micro=2
run all 8 --machine $M --layout tp=2,pp=2,dp=2,micro=2,sp=1
run vpp 8 --machine $M --layout pp=2,vpp=2,micro=2
run rc 8 --recompute
run acc_tp2 4 --accumulate 2 --machine $M --layout tp=2
run acc_pp 4 --accumulate 2 --machine $M --layout tp=2,pp=2,micro=2,sp=1
run acc_zero 2 --accumulate 4 --machine $M --layout tp=2,dp=2 --zero 1
# gradient accumulation normalises each micro-step by its own counted rows (PyTorch's (loss / K).backward() per
# micro-batch): with ignored labels (byte 32, spaces, uneven over the groups) a layout's --accumulate follows one
# core's --accumulate, not one core's whole batch
run ig_one 8 --ignore-index 32
run ig_acc 4 --accumulate 2 --ignore-index 32
run ig_acc_pp 4 --accumulate 2 --ignore-index 32 --machine $M --layout tp=2,pp=2,micro=2
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "a run with Dropout differs from one core's (above)"; fi
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
W = lambda n: {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{n}.onnx").graph.initializer}
L = lambda n: [s["loss"] for s in json.load(open(f"{d}/{n}.json"))["steps"]]
def werr(w1, w):
    e = 0.0
    for k, v in w1.items():
        a, b = v.astype(np.float64), w[k].astype(np.float64)
        if "qkv.bias" in k:  # the key third: zero gradient in exact arithmetic (test_train_tp_sp.sh)
            a, b = np.delete(a, np.s_[a.size // 3: 2 * a.size // 3]), np.delete(b, np.s_[b.size // 3: 2 * b.size // 3])
        e = max(e, float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(a))), 1e-30))
    return e
rel = lambda r, t: max(abs(a - b) / abs(a) for a, b in zip(r, t)) if len(r) == len(t) == 6 else 1.0
r, w1, fail = L("one"), W("one"), False
for n in ("acc", "dp2", "dp4", "tp2", "tp4", "tp2sp", "tp2pp2", "all", "vpp", "rc", "acc_tp2", "acc_pp", "acc_zero"):
    t, e = rel(r, L(n)), werr(w1, W(n))
    good = t <= 1e-5 and e <= 2e-4
    fail |= not good
    print(f"{'ok' if good else 'NOT OK'}: {n}: loss {L(n)[0]:.6f} -> {L(n)[-1]:.6f}, max rel vs one core {t:.2e}, "
          f"weights {e:.2e}")
ra, rw = rel(L("ig_acc"), L("ig_acc_pp")), rel(L("ig_one"), L("ig_acc_pp"))
good = ra <= 1e-5 and rw > 1e-4
fail |= not good
print(f"{'ok' if good else 'NOT OK'}: ignored labels: a layout's --accumulate {ra:.2e} from one core's --accumulate, {rw:.2e} "
      f"from one core's whole batch")
s = rel(r, L("seed1"))
fail |= not s > 1e-3
print(f"{'ok' if s > 1e-3 else 'NOT OK'}: seed 1 draws other masks: losses {s:.2e} relative from seed 0's")
sys.exit(1 if fail else 0)
PYEOF
expect 0 "$TERN" train "${G[@]}" --batch 4 --accumulate 2 --steps 2 --machine $M --layout tp=2,pp=2 --json
cp "$tmp/out" "$tmp/f.json"
expect 0 "$TERN" train "${G[@]}" --batch 4 --accumulate 2 --steps 2 --machine $M --layout tp=2,pp=2 --json --timing-only
if "$PY" -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(0 if [s['step_ms'] for s in a['steps']] == [s['step_ms'] for s in b['steps']] else 1)" \
    "$tmp/f.json" "$tmp/out"; then ok; else bad "timing-only predicts another step than the functional run with Dropout"; fi
# refused: a Dropout on key/value heads replicated over tensor ranks (tp=4 over 2 heads: a rank holds block r / 2,
# not block r of 4), naming the node, the parts and the rule
"$PY" - "$tmp" <<'PYEOF' || bad "the GQA model with Dropout could not be made"
import sys
import numpy as np
import torch
nn = torch.nn
class Attn(nn.Module):  # 4 query heads over 2 key/value heads (test_train_mpi.sh's), Dropout on the keys
    def __init__(s, E=32, H=4, KV=2):
        super().__init__()
        s.H, s.KV, s.D = H, KV, E // H
        s.q, s.o, s.head = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, 10)
        s.k, s.v = nn.Linear(E, KV * s.D, bias=False), nn.Linear(E, KV * s.D)
        s.ln, s.drop = nn.LayerNorm(E), nn.Dropout(0.1)
    def forward(s, x):
        B, S, E = x.shape
        D, n = s.D, s.H // s.KV
        h = s.ln(x)
        q = s.q(h).reshape(B, S, s.H, D).transpose(1, 2)
        rep = lambda t: t.reshape(B, S, s.KV, D).transpose(1, 2)[:, :, None].expand(B, s.KV, n, S, D).reshape(
            B, s.H, S, D)
        a = ((q @ rep(s.drop(s.k(h))).transpose(-1, -2)) * D ** -0.5).softmax(-1)
        return s.head((x + s.o((a @ rep(s.v(h))).transpose(1, 2).reshape(B, S, E))).mean(1))
torch.manual_seed(0)
d = sys.argv[1]
torch.onnx.export(Attn(), torch.randn(1, 8, 32), f"{d}/gqa.onnx", input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING)
rng = np.random.default_rng(0)
np.save(f"{d}/gx.npy", rng.standard_normal((16, 8, 32)).astype(np.float32))
np.save(f"{d}/gy.npy", rng.integers(0, 10, 16).astype(np.int64))
PYEOF
expect 0 "$TERN" train "$tmp/gqa.onnx" --data "$tmp/gx.npy" --labels "$tmp/gy.npy" --batch 8 --steps 1 --precision fp32 \
    --machine $M --layout tp=2
expect 1 "$TERN" train "$tmp/gqa.onnx" --data "$tmp/gx.npy" --labels "$tmp/gy.npy" --batch 8 --steps 1 --precision fp32 \
    --machine $M --layout tp=4
contains "$tmp/err" "Dropout in training mode under the layout: a tensor rank's part (8x8x8) is not the whole tensor (8x8x16) split tp=4 ways along one axis"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
