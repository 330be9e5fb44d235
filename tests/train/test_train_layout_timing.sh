#!/bin/bash
# --timing-only under a tensor/pipeline-parallel layout (docs/training.md, "Tensor and pipeline parallelism"):
# the step time predicted with no values equals the functional layout run's. The two-pair MLP of
# test_train_tp_pp.sh on tp=2, pp=2, tp=2,pp=2 and tp=2,pp=2,dp=2,micro=4 (and ZeRO-1 on tp=2,pp=2,dp=2), the
# GPT-style model of gpt_ref.py (heads and MLPs split, the tied embedding in the first and last stage) on tp=2,pp=2
# and tp=2,pp=2,dp=2,micro=4: every step's step_ms, samples_per_s and mfu, predicted_seconds and every layout field
# (pipeline_ms, bubble_ms, p2p_ms, dp_comm_ms, tied_ms, update_ms, pairs, programs) of the two --json outputs are
# the same text. A timing-only step computes no loss (0 in --json) and leaves the weights as they are (no -o written).
# About 10 s of CPU (the GPT-style programs compile twice per layout): label long.
set -u
TERN=${1:?usage: test_train_layout_timing.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: the test model could not be made" >&2; exit 1; }
import sys
import numpy as np
import torch
d = sys.argv[1]
torch.manual_seed(0)
nn = torch.nn
mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 128), nn.ReLU(),
                    nn.Linear(128, 10))
torch.onnx.export(mlp, torch.randn(1, 64), f"{d}/mlp.onnx", input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save(f"{d}/x.npy", rng.standard_normal((96, 64)).astype(np.float32))
np.save(f"{d}/y.npy", rng.integers(0, 10, 96).astype(np.int64))
PYEOF
mkdir -p "$tmp/gpt"
"$PY" "$here/gpt_ref.py" "$tmp/gpt" 1 8 1e-3 >/dev/null 2>&1 || { echo "NOT OK: gpt_ref.py failed" >&2; exit 1; }

M=trn1.32xlarge
pair() { # pair NAME MODEL_ARGS... -- LAYOUT_ARGS...: the functional and the timing-only run's --json
    local name=$1
    shift
    expect 0 "$TERN" train "$@" --machine $M --precision fp32 --json
    cp "$tmp/out" "$tmp/$name.f.json"
    expect 0 "$TERN" train "$@" --machine $M --precision fp32 --json --timing-only
    cp "$tmp/out" "$tmp/$name.t.json"
}
mlp() { local name=$1; shift; pair "$name" "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 \
    --steps 3 --lr 1e-2 "$@"; }
gpt() { local name=$1; shift; pair "$name" "$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" \
    --steps 2 --lr 1e-3 --clip-norm 1 "$@"; }
mlp mlp_tp2 --layout tp=2
mlp mlp_pp2 --layout pp=2
mlp mlp_tp2pp2 --layout tp=2,pp=2
mlp mlp_tp2pp2dp2 --layout tp=2,pp=2,dp=2,micro=4
mlp mlp_zero --layout tp=2,pp=2,dp=2 --zero 1
gpt gpt_tp2pp2 --batch 4 --layout tp=2,pp=2
gpt gpt_tp2pp2dp2 --batch 8 --layout tp=2,pp=2,dp=2,micro=4
# the timing-only run writes no trained model
expect 0 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --steps 2 --machine $M \
    --layout tp=2,pp=2 --timing-only -o "$tmp/never.onnx"
if [ ! -e "$tmp/never.onnx" ]; then ok; else bad "a timing-only layout run wrote a trained model"; fi
contains "$tmp/out" "layout, last step: pipeline"

if "$PY" - "$tmp" mlp_tp2 mlp_pp2 mlp_tp2pp2 mlp_tp2pp2dp2 mlp_zero gpt_tp2pp2 gpt_tp2pp2dp2 <<'PYEOF'; then ok; else bad "a timing-only layout's predicted times differ from the functional run's (above)"; fi
import json, re, sys
d = sys.argv[1]
fail = False
def fields(text):
    # the raw printed numbers (no float round trip): step times and the layout breakdown
    j = json.loads(text)
    steps = re.findall(r'"step_ms":([^,]+),"samples_per_s":([^,]+),"mfu":([^,]+)', text)
    lay = re.search(r'"layout":\{([^}]*)\}', text).group(1)
    pred = re.search(r'"predicted_seconds":([^,]+)', text).group(1)
    return j, steps, lay, pred
for n in sys.argv[2:]:
    jf, sf, lf, pf = fields(open(f"{d}/{n}.f.json").read())
    jt, st, lt, pt = fields(open(f"{d}/{n}.t.json").read())
    good = sf == st and lf == lt and pf == pt and len(sf) == len(jf["steps"]) and len(sf) > 0
    # the functional run trained (a finite, changing loss); the timing-only run computed none
    good = good and all(s["loss"] > 0 for s in jf["steps"]) and all(s["loss"] == 0 for s in jt["steps"])
    good = good and jf["layout"]["pipeline_ms"] > 0 and jf["layout"]["update_ms"] > 0
    print(f"{'ok' if good else 'NOT OK'}: {n}: step_ms {sf[0][0]} vs {st[0][0]}, predicted_seconds {pf} vs {pt}, "
          f"layout {lf} | {lt}")
    fail |= not good
sys.exit(1 if fail else 0)
PYEOF

# a causal-mask buffer too large for the plan's folding (GPT-2's layout at 1024 positions: a 1024 x 1024 bool
# buffer sliced and cast) still counts as a constant broadcast along the heads: each block's attention is a pair
# (4 pairs on a 2-block model, as at 128 positions), and tp=2 follows one core (2 steps, 1e-5 relative)
if "$PY" - "$tmp" "$here/../../scripts" <<'PYEOF'; then ok; else bad "the 1024-position GPT model could not be made"; fi
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[2])
from gen_models import GPT
d = sys.argv[1]
torch.manual_seed(0)
torch.onnx.export(GPT(256, 64, 4, 2, 1024), torch.zeros(1, 1024, dtype=torch.int64), f"{d}/g1k.onnx",
                  input_names=["input_ids"], output_names=["logits"], opset_version=14, do_constant_folding=False)
x = np.random.default_rng(0).integers(0, 256, (2, 1025))
np.save(f"{d}/g1k_x.npy", x[:, :1024]); np.save(f"{d}/g1k_y.npy", x[:, 1:])
PYEOF
g1k=("$tmp/g1k.onnx" --data "$tmp/g1k_x.npy" --labels "$tmp/g1k_y.npy" --batch 1 --steps 2 --lr 1e-3 --precision fp32
     --json)
expect 0 "$TERN" train "${g1k[@]}"
cp "$tmp/out" "$tmp/g1k_one.json"
expect 0 "$TERN" train "${g1k[@]}" --machine trn1.32xlarge --layout tp=2
cp "$tmp/out" "$tmp/g1k_tp2.json"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "the 1024-position model on tp=2 (above)"; fi
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/g1k_{n}.json")) for n in ("one", "tp2"))
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
rel = max(abs(x - y) / abs(x) for x, y in zip(la, lb)) if len(la) == len(lb) == 2 else 1.0
print(f"gpt 1024 positions tp=2: {b['layout']['pairs']} pairs, loss rel {rel:.2e}")
sys.exit(0 if b["layout"]["pairs"] == 4 and rel <= 1e-5 else 1)
PYEOF

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
