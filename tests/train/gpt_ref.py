"""Reference run for tests/train/test_train_gpt.sh: the GPT-2-style transformer of scripts/gen_models.py (tied
embeddings, pre-LN blocks, causal attention, tanh GELU: vocab 256, width 64, 4 heads, 2 layers, 32 positions),
trained as a byte-level language model on a text Debian ships (/usr/share/common-licenses/GPL-3), rows of 32
bytes predicting the next byte. Writes the model (ONNX, with its initial weights), the data, and PyTorch fp32's
per-step losses and final perplexity on held-out rows, for the same run as `tern train`.

usage: gpt_ref.py OUTDIR STEPS BATCH LR"""
import json
import math
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../../scripts")
from gen_models import GPT  # noqa: E402

out, steps, batch, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
torch.manual_seed(0)
torch.set_num_threads(1)
S = 32
text = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read(), np.uint8).astype(np.int64)
n = (len(text) - 1) // S
x, y = text[: n * S].reshape(n, S), text[1 : n * S + 1].reshape(n, S)
test = np.arange(n) % 10 == 0  # every tenth row held out
np.save(f"{out}/x.npy", x[~test])
np.save(f"{out}/y.npy", y[~test])
np.save(f"{out}/x_test.npy", x[test])
np.save(f"{out}/y_test.npy", y[test])
xtr, ytr = x[~test], y[~test]

model = GPT(256, 64, 4, 2, S)
with torch.no_grad():  # a smaller start than nn.Embedding's N(0, 1): tied logits of width 64 would be huge
    model.wte.weight.mul_(0.1)
    model.wpe.weight.mul_(0.1)
    # torch.onnx.export merges initializers of equal values: the five LayerNorms' ones and zeros would become one
    # shared (so jointly trained) pair in the ONNX model. Distinct starting values keep them five.
    for name, p in model.named_parameters():
        if "ln" in name:
            p.add_(torch.randn_like(p) * 0.02)
torch.onnx.export(model, torch.zeros(batch, S, dtype=torch.int64), f"{out}/gpt.onnx", input_names=["input_ids"],
                  output_names=["logits"], opset_version=14,
                  dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                  do_constant_folding=False)  # keeps the tied embedding one initializer (folding copies wte^T)
opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, foreach=False)
losses, pos = [], 0
for s in range(steps):
    idx = [(pos + b) % len(xtr) for b in range(batch)]
    pos = (pos + batch) % len(xtr)
    opt.zero_grad()
    logits = model(torch.from_numpy(xtr[idx]))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), torch.from_numpy(ytr[idx]).reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(float(loss))
with torch.no_grad():
    nll = [float(torch.nn.functional.cross_entropy(model(torch.from_numpy(x[test][i : i + 1])).reshape(-1, 256),
                                                   torch.from_numpy(y[test][i])))
           for i in range(int(test.sum()))]
ppl = math.exp(sum(nll) / len(nll))
json.dump({"losses": losses, "test_perplexity": ppl}, open(f"{out}/ref.json", "w"))
print(f"pytorch: loss {losses[0]:.5f} -> {losses[-1]:.5f}, held-out perplexity {ppl:.4f}")
