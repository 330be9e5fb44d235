"""Reference run for tests/train/test_train_llama.sh: the LLaMA-style decoder of scripts/gen_models.py (RMSNorm,
rotary embeddings from cos/sin buffers, 4 query heads sharing 2 K/V heads, the additive causal mask buffer of the
float32 minimum, SwiGLU: vocab 64, width 32, 2 layers, 16 positions) trained as a language model on a text Debian
ships (/usr/share/common-licenses/GPL-3, bytes mod 64), rows of 16 tokens predicting the next. Exported without
constant folding, so the buffers keep their module names (blocks.N.cos / sin / mask) and reach the graph through
Slice nodes (ends INT64_MAX). Writes the model with its initial weights, the data, and PyTorch fp32's per-step
losses for the same AdamW run as `tern train` (buffers are not parameters: PyTorch leaves them unchanged).

usage: llama_ref.py OUTDIR STEPS BATCH LR"""
import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../../scripts")
from gen_models import Llama  # noqa: E402

out, steps, batch, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
torch.manual_seed(0)
torch.set_num_threads(1)
V, S = 64, 16
text = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read(), np.uint8).astype(np.int64) % V
n = (len(text) - 1) // S
x, y = text[: n * S].reshape(n, S), text[1 : n * S + 1].reshape(n, S)
np.save(f"{out}/x.npy", x)
np.save(f"{out}/y.npy", y)

model = Llama(V, 32, 4, 2, 64, 2, S)
with torch.no_grad():
    model.emb.weight.mul_(0.5)
torch.onnx.export(model, torch.zeros(batch, S, dtype=torch.int64), f"{out}/llama.onnx", input_names=["input_ids"],
                  output_names=["logits"], opset_version=14,
                  dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=False)
buffers = {k: v.numpy().copy() for k, v in model.named_buffers()}
opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, foreach=False)
losses, pos = [], 0
for s in range(steps):
    idx = [(pos + b) % len(x) for b in range(batch)]
    pos = (pos + batch) % len(x)
    opt.zero_grad()
    logits = model(torch.from_numpy(x[idx]))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(y[idx]).reshape(-1))
    loss.backward()
    opt.step()
    losses.append(float(loss))
for k, v in model.named_buffers():  # buffers are not parameters: unchanged by training
    assert np.array_equal(v.numpy(), buffers[k]), k
np.savez(f"{out}/trained_ref.npz", **{k: v.detach().numpy() for k, v in model.named_parameters()})
json.dump({"losses": losses, "buffers": sorted(buffers)}, open(f"{out}/ref.json", "w"))
print(f"pytorch: loss {losses[0]:.5f} -> {losses[-1]:.5f}")
