#!/bin/bash
# Interleaved 1F1B (docs/training.md, "Interleaved 1F1B"): --layout pp=P,vpp=V cuts the model into P x V chunks,
# chunk g on stage g mod P, and times Megatron's interleaved schedule (the planner's, src/plan/pipeline.c). The
# values do not depend on the schedule: the two-pair MLP of test_train_tp_pp.sh (4 linear layers) on pp=2,vpp=2
# trains the same model byte for byte as pp=2 and as pp=4 (same losses, same grad norms, same -o; with dp=2 as
# pp=4,dp=2), and one
# core's losses within 1e-5 relative; the GPT-style model on tp=2,pp=2,vpp=2 trains tp=2,pp=4's (below). Timing: a wider MLP (8 linear layers of 1024, 512 rows, 8 micro-batches,
# --timing-only) has a smaller bubble and pipeline span on pp=2,vpp=2 than on pp=2. ZeRO-1 on pp=2,vpp=2,dp=2 trains
# the same bytes as without, its timing-only step the functional one's. Then the refusals: micro not a multiple of
# pp, pp x vpp not dividing the linear layers, vpp without pp.
set -u
TERN=${1:?usage: test_train_vpp.sh TERN_BIN}
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
big = nn.Sequential(*[m for _ in range(7) for m in (nn.Linear(1024, 1024), nn.ReLU())], nn.Linear(1024, 10))
for name, m, k in (("mlp", mlp, 64), ("big", big, 1024)):
    torch.onnx.export(m, torch.randn(1, k), f"{d}/{name}.onnx", input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save(f"{d}/x.npy", rng.standard_normal((96, 64)).astype(np.float32))
np.save(f"{d}/y.npy", rng.integers(0, 10, 96).astype(np.int64))
np.save(f"{d}/bx.npy", rng.standard_normal((512, 1024)).astype(np.float32))
np.save(f"{d}/by.npy", rng.integers(0, 10, 512).astype(np.int64))
PYEOF

M=trn1.32xlarge
run() { # run NAME [ARGS...]: 6 AdamW steps of the MLP, --json in $tmp/NAME.json, the model in $tmp/NAME.onnx
    local name=$1
    shift
    expect 0 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 16 --steps 6 --lr 1e-2 \
        --precision fp32 --machine $M --json -o "$tmp/$name.onnx" "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
run one
run pp2 --layout pp=2,micro=4
run vpp2 --layout pp=2,vpp=2,micro=4
run pp4 --layout pp=4,micro=4
for r in pp2 pp4; do
    if cmp -s "$tmp/vpp2.onnx" "$tmp/$r.onnx"; then ok; else bad "pp=2,vpp=2 trains another model than $r"; fi
done
# two data replicas: one all-reduce per local chunk (chunks 0, 1, then 2, 3), the same bytes as pp=4,dp=2
run vpp2dp2 --layout pp=2,vpp=2,dp=2,micro=4
run pp4dp2 --layout pp=4,dp=2,micro=4
if cmp -s "$tmp/vpp2dp2.onnx" "$tmp/pp4dp2.onnx"; then ok; else bad "pp=2,vpp=2,dp=2 trains another model than pp=4,dp=2"; fi
# the GPT-style model of test_train_gpt.sh with tensor parallelism and its tied embedding (chunks 0 and 3, on stages
# 0 and 1): tp=2,pp=2,vpp=2 trains tp=2,pp=4's model byte for byte (the same chunks; tp=2,pp=2 cuts elsewhere and
# rounds a residual's gradient sum otherwise), one core's losses within 1e-5
mkdir -p "$tmp/gpt"
"$PY" "$here/gpt_ref.py" "$tmp/gpt" 1 2 1e-3 >/dev/null 2>&1 || bad "gpt_ref.py failed"
gpt() {
    local name=$1
    shift
    expect 0 "$TERN" train "$tmp/gpt/gpt.onnx" --data "$tmp/gpt/x.npy" --labels "$tmp/gpt/y.npy" --batch 2 --steps 3 \
        --lr 1e-3 --clip-norm 1 --precision fp32 --machine $M --json -o "$tmp/$name.onnx" "$@"
    cp "$tmp/out" "$tmp/$name.json"
}
gpt gone
gpt gvpp2 --layout tp=2,pp=2,vpp=2,micro=2
gpt gpp4 --layout tp=2,pp=4,micro=2
if cmp -s "$tmp/gvpp2.onnx" "$tmp/gpp4.onnx"; then ok; else bad "GPT tp=2,pp=2,vpp=2 trains another model than tp=2,pp=4"; fi
big() { # big NAME LAYOUT: one timing-only step of the wide MLP
    expect 0 "$TERN" train "$tmp/big.onnx" --data "$tmp/bx.npy" --labels "$tmp/by.npy" --batch 512 --steps 1 \
        --precision fp32 --machine $M --timing-only --json --layout "$2"
    cp "$tmp/out" "$tmp/$1.json"
}
big big1 pp=2,micro=8
big big2 pp=2,vpp=2,micro=8
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "interleaved 1F1B: values or timing (above)"; fi
import json, sys
d = sys.argv[1]
J = {n: json.load(open(f"{d}/{n}.json")) for n in ("one", "pp2", "vpp2", "pp4", "big1", "big2", "gone", "gvpp2",
                                                   "gpp4")}
st = lambda n, k: [s[k] for s in J[n]["steps"]]
fail = False
def check(good, msg):
    global fail
    print(f"{'ok' if good else 'NOT OK'}: {msg}")
    fail |= not good
for r in ("pp2", "pp4"):
    check(st("vpp2", "loss") == st(r, "loss") and st("vpp2", "grad_norm") == st(r, "grad_norm"),
          f"pp=2,vpp=2 losses and norms equal {r}'s bit for bit")
a, b = st("one", "loss"), st("vpp2", "loss")
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
check(len(a) == len(b) == 6 and rel <= 1e-5, f"pp=2,vpp=2 vs one core: max rel {rel:.2e}")
check(st("gvpp2", "loss") == st("gpp4", "loss"), "GPT tp=2,pp=2,vpp=2 losses equal tp=2,pp=4's bit for bit")
a, b = st("gone", "loss"), st("gvpp2", "loss")
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
check(len(a) == len(b) == 3 and rel <= 1e-5 and J["gvpp2"]["layout"]["tied_ms"] > 0,
      f"GPT tp=2,pp=2,vpp=2 vs one core: max rel {rel:.2e}, tied embedding exchanged")
L = J["vpp2"]["layout"]
check(L.get("vpp") == 2 and L["pp"] == 2 and "vpp" not in J["pp2"]["layout"], "--json: layout vpp 2 (absent on pp=2)")
l1, l2 = J["big1"]["layout"], J["big2"]["layout"]
for n, l in (("vpp=1", l1), ("vpp=2", l2)):
    print(f"wide MLP pp=2,micro=8 {n}: pipeline {l['pipeline_ms']:.4f} ms, bubble {l['bubble_ms']:.4f} ms, "
          f"update {l['update_ms']:.4f} ms, step {J['big1' if n == 'vpp=1' else 'big2']['steps'][0]['step_ms']:.4f} ms")
check(0 < l2["bubble_ms"] < l1["bubble_ms"] and l2["pipeline_ms"] < l1["pipeline_ms"],
      "interleaving shrinks the bubble and the pipeline span")
print(f"vpp=2's plain 1F1B of the same chunks: pipeline {l2['pipeline_1f1b_ms']:.4f} ms, bubble {l2['bubble_1f1b_ms']:.4f} ms")
check(l2["bubble_1f1b_ms"] > l2["bubble_ms"] and l2["pipeline_1f1b_ms"] > l2["pipeline_ms"]
      and abs(l2["bubble_1f1b_ms"] - l1["bubble_ms"]) < 0.1 * l1["bubble_ms"] and "pipeline_1f1b_ms" not in l1,
      "--json: vpp=2's own plain-1F1B figures, within 10% of the vpp=1 run's bubble")
sys.exit(1 if fail else 0)
PYEOF

err() { # err PATTERN ARGS...: tern train refuses, naming what
    local pat=$1
    shift
    expect 1 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --machine $M "$@"
    contains "$tmp/err" "$pat"
}
err "vpp=2 (interleaved 1F1B): micro=3 micro-batches must be a multiple of pp=2" --batch 12 --layout pp=2,vpp=2,micro=3
err "pp=2 x vpp=3 = 6 model chunks do not divide the model's 4 linear layers" --batch 16 --layout pp=2,vpp=3
err "vpp=2 (interleaved 1F1B) needs pipeline stages (pp > 1: 1)" --batch 16 --layout vpp=2
# ZeRO-1 under the interleaved schedule: each chunk's optimizer state in blocks over the data replicas, a core
# updating its block of each of its chunks in turn; the same bytes as without ZeRO, and --timing-only predicts the
# functional run's step
run vpp2dp2z --layout pp=2,vpp=2,dp=2,micro=4 --zero 1
if cmp -s "$tmp/vpp2dp2.onnx" "$tmp/vpp2dp2z.onnx"; then ok; else bad "ZeRO-1 on pp=2,vpp=2,dp=2 trains another model"; fi
run vpp2dp2zt --layout pp=2,vpp=2,dp=2,micro=4 --zero 1 --timing-only
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "ZeRO-1 on pp=2,vpp=2,dp=2: timing-only differs from functional (above)"; fi
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/{n}.json")) for n in ("vpp2dp2z", "vpp2dp2zt"))
same = [s["step_ms"] for s in a["steps"]] == [s["step_ms"] for s in b["steps"]] and a["layout"] == b["layout"]
L = a["layout"]
print(f"pp=2,vpp=2,dp=2 ZeRO-1: step {a['steps'][-1]['step_ms']:.4f} ms, update {L['update_ms']:.4f} ms, "
      f"data-parallel collectives {L['dp_comm_ms']:.4f} ms; timing-only the same: {same}")
sys.exit(0 if same and L["zero"] == 1 and L["vpp"] == 2 else 1)
PYEOF
expect 2 "$TERN" train "$tmp/mlp.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --machine $M --layout v=2
contains "$tmp/err" "'v' is not tp=N, pp=N, dp=N, vpp=N, micro=N or sp=0|1"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
