#!/bin/bash
# Training's fused attention backward with a mask (src/train/grad_attention.c, the mask input M of
# tern.AttentionGrad in src/compiler/lower_attention_bwd.c): a BERT-style model of two attention layers (2 heads
# of 8) trained 6 SGD steps in fp32, in two variants -
#   layer 1, bert.onnx: BERT's padding mask from a data input, (1 - attention_mask[:, None, None, :]) * -10000
#            added to the scaled scores ([B, 1, 1, S], computed from the data, no gradient);
#   layer 1, bert_where.onnx: the same padding as masked_fill(attention_mask == 0, -10000) (a Where);
#   layer 2: a float buffer [S, S] of 0 / -inf (a local window |i - j| <= 2: not the causal triangle), kept
#            constant by the trainer's auto-freeze;
# one sample is all padding (its rows masked whole: uniform probabilities, and under the Where no gradient to
# its scores). Checks, for each variant, that
#   - both blocks take the fused backward (tern train --json: attention_fused 2, attention_unfused 0), and
#     --no-fused-attention reports 0 fused;
#   - the loss of every step within 1e-5 relative of PyTorch fp32's (same weights, rows, SGD);
#   - one step's gradient of every weight within 1e-5 of the node-by-node path's (max |diff| over max |value|, at
#     least 1e-3: the keys' bias has a zero gradient up to rounding, a softmax being invariant to a row shift);
# (A mask that needs a gradient, a learned bias, goes node by node: test_train_attention_fused.sh.)
set -u
TERN=${1:?usage: test_train_attention_mask.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

if ! "$PY" - "$tmp" >"$tmp/ref.txt" 2>&1 <<'PYEOF'; then
import json, sys
import numpy as np
import torch
d = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)
N, S, E, H, B, STEPS, LR = 16, 12, 16, 2, 4, 6, 0.05

class Block(torch.nn.Module):
    def __init__(self, window=False, where=False):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(E, E) for _ in range(4))
        self.ln = torch.nn.LayerNorm(E)
        with torch.no_grad():  # distinct values: torch.onnx.export merges equal initializers into one
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)
        self.where = where
        if window:
            i = torch.arange(S)
            self.register_buffer("window", torch.where((i[:, None] - i[None, :]).abs() <= 2, 0.0, float("-inf")))
        else:
            self.window = None
    def forward(self, x, am):
        b = x.shape[0]
        sp = lambda t: t.view(b, S, H, E // H).transpose(1, 2)
        q, k, v = sp(self.q(x)), sp(self.k(x)), sp(self.v(x))
        s = q @ k.transpose(-2, -1) / 2.8284271247461903
        if self.window is not None:
            s = s + self.window
        elif self.where:
            s = s.masked_fill(am[:, None, None, :] == 0, -10000.0)
        else:
            s = s + (1.0 - am[:, None, None, :]) * -10000.0
        c = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, S, E)
        return self.ln(x + self.o(c))

class Bert(torch.nn.Module):
    def __init__(self, where=False):
        super().__init__()
        self.b1, self.b2 = Block(where=where), Block(window=True)
        self.head = torch.nn.Linear(E, 4)
    def forward(self, x, attention_mask):
        h = self.b2(self.b1(x, attention_mask), attention_mask)
        return self.head(h.mean(1))

rng = np.random.default_rng(0)
x = rng.standard_normal((N, S, E)).astype(np.float32)
lens = rng.integers(3, S + 1, N)
lens[5] = 0  # all padding: row 5 of the batch of rows 4..7
am = (np.arange(S)[None, :] < lens[:, None]).astype(np.float32)
y = rng.standard_normal((N, 4)).astype(np.float32)
np.save(f"{d}/x.npy", x); np.save(f"{d}/am.npy", am); np.save(f"{d}/y.npy", y)
ref = {}
for name, where in (("bert", False), ("bert_where", True)):
    torch.manual_seed(0)
    m = Bert(where)
    torch.onnx.export(m, (torch.zeros(B, S, E), torch.ones(B, S)), f"{d}/{name}.onnx",
                      input_names=["x", "attention_mask"], output_names=["y"], opset_version=14,
                      dynamic_axes={"x": {0: "batch"}, "attention_mask": {0: "batch"}, "y": {0: "batch"}})
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    losses, pos = [], 0
    for step in range(STEPS):
        idx = [(pos + j) % N for j in range(B)]
        pos = (pos + B) % N
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(torch.from_numpy(x[idx]), torch.from_numpy(am[idx])),
                                            torch.from_numpy(y[idx]))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    ref[name] = losses
json.dump(ref, open(f"{d}/ref.json", "w"))
PYEOF
    echo "NOT OK: the PyTorch reference failed: $(tail -3 "$tmp/ref.txt")" >&2
    exit 1
fi
for model in bert bert_where; do
    args=("$tmp/$model.onnx" --data "x=$tmp/x.npy" --data "attention_mask=$tmp/am.npy" --labels "$tmp/y.npy"
          --loss mse --optimizer sgd --lr 0.05 --weight-decay 0 --batch 4 --precision fp32 --json)
    rm -rf "$tmp/gf" "$tmp/gu"
    mkdir -p "$tmp/gf" "$tmp/gu"
    expect 0 "$TERN" train "${args[@]}" --steps 6
    cp "$tmp/out" "$tmp/fused6.json"
    expect 0 "$TERN" train "${args[@]}" --steps 1 --dump-grads "$tmp/gf"
    expect 0 "$TERN" train "${args[@]}" --steps 1 --dump-grads "$tmp/gu" --no-fused-attention
    cp "$tmp/out" "$tmp/unfused1.json"
    if "$PY" - "$tmp" "$model" <<'PYEOF'; then ok; else bad "$model: the masked fused attention backward differs (above)"; fi
import glob, json, os, sys
import numpy as np
d, model = sys.argv[1], sys.argv[2]
ref = np.array(json.load(open(f"{d}/ref.json"))[model])
f6, u1 = (json.load(open(f"{d}/{n}.json")) for n in ("fused6", "unfused1"))
fail = []
if (f6["attention_fused"], f6["attention_unfused"]) != (2, 0):
    fail.append(f"fused run: attention_fused {f6['attention_fused']}, unfused {f6['attention_unfused']}, want 2, 0")
if (u1["attention_fused"], u1["attention_unfused"]) != (0, 0):
    fail.append(f"--no-fused-attention: attention_fused {u1['attention_fused']}, want 0")
b = np.array([s["loss"] for s in f6["steps"]])
rel = np.abs(ref - b) / np.abs(ref) if len(b) == len(ref) else np.array([np.inf])
if not rel.max() <= 1e-5:
    fail.append(f"loss curve: max rel {rel.max():.3g} against PyTorch (bound 1e-5): {b} vs {ref}")
worst, names = 0.0, sorted(os.path.basename(p) for p in glob.glob(f"{d}/gu/*.npy"))
if len(names) < 20:
    fail.append(f"only {len(names)} gradients dumped")
for n in names:
    gu, gf = np.load(f"{d}/gu/{n}").astype(np.float64), np.load(f"{d}/gf/{n}").astype(np.float64)
    e = np.abs(gf - gu).max() / max(np.abs(gu).max(), 1e-3)  # k's bias: 0 up to rounding (softmax shift)
    worst = max(worst, e)
    if not e <= 1e-5:
        fail.append(f"gradient {n}: max |fused - unfused| / max |unfused| = {e:.3g} (bound 1e-5)")
print(f"{model}: 2 blocks fused, loss max rel {rel.max():.2e} vs PyTorch, gradients within {worst:.2e} "
      f"of node-by-node ({len(names)} tensors)")
for m in fail:
    print("NOT OK:", m)
sys.exit(1 if fail else 0)
PYEOF
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
