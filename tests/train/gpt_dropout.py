"""Model and data for tests/train/test_train_dropout_layouts.sh: the GPT-style transformer of gpt_ref.py (vocab 256,
width 64, 4 heads, 2 layers, 32 positions, tied embeddings) with Dropout(0.1) where GPT-2 has it - after the
embeddings' sum, on the attention probabilities, after the attention's projection and after the MLP - and one on
the MLP's hidden activations (inside the tensor-parallel pair, split by columns), exported in training mode
(torch.onnx.TrainingMode.TRAINING: each Dropout's training_mode input is true). Data: the byte-level rows of
gpt_ref.py (/usr/share/common-licenses/GPL-3, rows of 32 bytes predicting the next byte).

With a third argument `nopos` the model has no position embedding (the causal attention alone orders the tokens), so
every node between the tensor-parallel regions works position by position (sequence parallelism inside a row).

usage: gpt_dropout.py OUTDIR BATCH [nopos]"""
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

out, batch = sys.argv[1], int(sys.argv[2])
nopos = len(sys.argv) > 3 and sys.argv[3] == "nopos"
torch.manual_seed(0)
S, D, H, L, V, P = 32, 64, 4, 2, 256, 0.1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.d_att, self.d_res1, self.d_hid, self.d_res2 = (nn.Dropout(P) for _ in range(4))
        self.register_buffer("mask", torch.tril(torch.ones(S, S)).bool())

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.reshape(b, s, H, d // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // H)
        att = self.d_att(torch.softmax(att.masked_fill(~self.mask[:s, :s], float("-inf")), dim=-1))
        x = x + self.d_res1(self.proj((att @ v).transpose(1, 2).reshape(b, s, d)))
        return x + self.d_res2(self.out(self.d_hid(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(S, D)
        self.drop = nn.Dropout(P)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.lnf = nn.LayerNorm(D)

    def forward(self, ids):
        x = self.wte(ids)
        x = self.drop(x if nopos else x + self.wpe(torch.arange(ids.shape[1])))
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()


text = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read(), np.uint8).astype(np.int64)
n = (len(text) - 1) // S
np.save(f"{out}/x.npy", text[: n * S].reshape(n, S))
np.save(f"{out}/y.npy", text[1: n * S + 1].reshape(n, S))
model = GPT()
with torch.no_grad():  # as gpt_ref.py: a small start for the tied logits, distinct LayerNorm initializers
    model.wte.weight.mul_(0.1)
    model.wpe.weight.mul_(0.1)
    for name, p in model.named_parameters():
        if "ln" in name:
            p.add_(torch.randn_like(p) * 0.02)
model.train()
torch.onnx.export(model, torch.zeros(batch, S, dtype=torch.int64), f"{out}/gpt.onnx", input_names=["input_ids"],
                  output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                  dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=False)
