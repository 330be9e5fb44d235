#!/bin/bash
# Training's fused attention backward (src/train/grad_attention.c): the small GPT of test_train_gpt.sh (2 layers
# of causal attention, a Where mask) trained 20 AdamW steps in fp32 with each attention block differentiated by
# one tern.AttentionGrad:
#   - both blocks take the fused backward (tern train --json: attention_fused 2, attention_unfused 0), the step
#     graph has fewer nodes and a shorter predicted step than with --no-fused-attention, which reports 0 fused;
#   - the loss of every step within 1e-5 relative of PyTorch fp32's (measured 2.7e-7: the kernel's fp32 path
#     sums in another order than the node-by-node gradients, nothing else differs);
#   - one step's gradient of every weight within 1e-5 of the node-by-node path's (max |diff| over the weight's
#     max |value|);
#   - an attention whose additive mask is a trained weight (a learned bias), and one with Dropout on P, fall
#     back to the node-by-node gradients and say why.
set -u
TERN=${1:?usage: test_train_attention_fused.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

if ! "$PY" "$here/gpt_ref.py" "$tmp" 20 2 1e-3 >"$tmp/ref.txt" 2>&1; then
    echo "NOT OK: the PyTorch reference failed: $(tail -3 "$tmp/ref.txt")" >&2
    exit 1
fi
args=("$tmp/gpt.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 2 --lr 1e-3 --clip-norm 1 --precision fp32 --json)
expect 0 "$TERN" train "${args[@]}" --steps 20
cp "$tmp/out" "$tmp/fused20.json"
mkdir -p "$tmp/gf" "$tmp/gu"
expect 0 "$TERN" train "${args[@]}" --steps 1 --dump-grads "$tmp/gf"
cp "$tmp/out" "$tmp/fused1.json"
expect 0 "$TERN" train "${args[@]}" --steps 1 --dump-grads "$tmp/gu" --no-fused-attention
cp "$tmp/out" "$tmp/unfused1.json"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "the fused attention backward differs (above)"; fi
import glob, json, os, sys
import numpy as np
d = sys.argv[1]
ref = np.array(json.load(open(f"{d}/ref.json"))["losses"])
f20, f1, u1 = (json.load(open(f"{d}/{n}.json")) for n in ("fused20", "fused1", "unfused1"))
fail = []
if (f20["attention_fused"], f20["attention_unfused"]) != (2, 0):
    fail.append(f"fused run: attention_fused {f20['attention_fused']}, unfused {f20['attention_unfused']}, want 2, 0")
if (u1["attention_fused"], u1["attention_unfused"]) != (0, 0):
    fail.append(f"--no-fused-attention: attention_fused {u1['attention_fused']}, want 0")
if not f1["graph_nodes"] < u1["graph_nodes"]:
    fail.append(f"step graph nodes fused {f1['graph_nodes']} not below unfused {u1['graph_nodes']}")
tf, tu = f1["steps"][0]["step_ms"], u1["steps"][0]["step_ms"]
if not tf < tu:
    fail.append(f"predicted step fused {tf} ms not below unfused {tu} ms")
b = np.array([s["loss"] for s in f20["steps"]])
rel = np.abs(ref - b) / np.abs(ref)
if len(b) != 20 or not rel.max() <= 1e-5:
    fail.append(f"loss curve: max rel {rel.max():.3g} against PyTorch (bound 1e-5)")
worst, names = 0.0, sorted(os.path.basename(p) for p in glob.glob(f"{d}/gu/*.npy"))
if len(names) < 20:
    fail.append(f"only {len(names)} gradients dumped")
for n in names:
    gu, gf = np.load(f"{d}/gu/{n}").astype(np.float64), np.load(f"{d}/gf/{n}").astype(np.float64)
    e = np.abs(gf - gu).max() / max(np.abs(gu).max(), 1e-30)
    worst = max(worst, e)
    if not e <= 1e-5:
        fail.append(f"gradient {n}: max |fused - unfused| / max |unfused| = {e:.3g} (bound 1e-5)")
print(f"attention fused: 2 blocks, loss max rel {rel.max():.2e} vs PyTorch, gradients within {worst:.2e} of "
      f"node-by-node, nodes {f1['graph_nodes']} vs {u1['graph_nodes']}, step {tf:.3f} vs {tu:.3f} ms")
for m in fail:
    print("NOT OK:", m)
sys.exit(1 if fail else 0)
PYEOF

# a learned additive bias on the scores: the mask is a trained weight, so the block goes node by node
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "could not build the learned-bias attention model"; fi
import sys
import numpy as np
import torch
d = sys.argv[1]
torch.manual_seed(0)
class BiasAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(16, 16) for _ in range(4))
        self.bias = torch.nn.Parameter(torch.randn(8, 8) * 0.1)
    def forward(self, x):
        att = self.q(x) @ self.k(x).transpose(-2, -1) / 4.0 + self.bias
        return self.o(att.softmax(-1) @ self.v(x)).mean(1)
class DropoutAttention(torch.nn.Module):  # Dropout on P (exported in training mode): not the fused pattern
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(16, 16) for _ in range(4))
        self.drop = torch.nn.Dropout(0.1)
    def forward(self, x):
        att = self.q(x) @ self.k(x).transpose(-2, -1) / 4.0
        return self.o(self.drop(att.softmax(-1)) @ self.v(x)).mean(1)
torch.onnx.export(BiasAttention(), torch.zeros(2, 8, 16), f"{d}/bias.onnx", input_names=["x"], output_names=["y"],
                  opset_version=14, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
torch.onnx.export(DropoutAttention(), torch.zeros(2, 8, 16), f"{d}/drop.onnx", input_names=["x"],
                  output_names=["y"], opset_version=14, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
rng = np.random.default_rng(0)
np.save(f"{d}/bx.npy", rng.standard_normal((8, 8, 16)).astype(np.float32))
np.save(f"{d}/by.npy", rng.standard_normal((8, 16)).astype(np.float32))
PYEOF
expect 0 "$TERN" train "$tmp/bias.onnx" --data "$tmp/bx.npy" --labels "$tmp/by.npy" --loss mse --batch 2 --steps 2
contains "$tmp/out" "attention: 0 blocks with the fused backward (tern.AttentionGrad), 1 node by node"
contains "$tmp/out" "the mask depends on a trained weight (a learned bias"
expect 0 "$TERN" train "$tmp/drop.onnx" --data "$tmp/bx.npy" --labels "$tmp/by.npy" --loss mse --batch 2 --steps 2
contains "$tmp/out" "attention: 0 blocks with the fused backward (tern.AttentionGrad), 1 node by node"
contains "$tmp/out" "not the fused pattern Q Kt [scale] [mask] Softmax P V (Dropout on P"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
