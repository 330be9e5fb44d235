#!/usr/bin/python3
"""attention_block.py OUTDIR ROWS: the small attention block the multi-instance tests share (LayerNorm, 4-head
self-attention with separate q, k, v projections, a residual, a mean over the 8 positions and a 10-way classifier;
width 32, dynamic batch), exported as OUTDIR/m.onnx, with ROWS seeded rows OUTDIR/x.npy [ROWS, 8, 32] and
class labels OUTDIR/y.npy [ROWS]."""
import sys

import numpy as np
import torch

nn = torch.nn


class Block(nn.Module):
    def __init__(s, E=32, H=4):
        super().__init__()
        s.H = H
        s.ln, s.q, s.k, s.v, s.o, s.head = nn.LayerNorm(E), *(nn.Linear(E, E) for _ in range(4)), nn.Linear(E, 10)

    def forward(s, x):
        B, S, E = x.shape
        sp = lambda t: t.reshape(B, S, s.H, E // s.H).transpose(1, 2)
        h = s.ln(x)
        a = ((sp(s.q(h)) @ sp(s.k(h)).transpose(-1, -2)) * (E // s.H) ** -0.5).softmax(-1)
        return s.head((x + s.o((a @ sp(s.v(h))).transpose(1, 2).reshape(B, S, E))).mean(1))


d, rows = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
torch.onnx.export(Block(), torch.randn(1, 8, 32), f"{d}/m.onnx", input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save(f"{d}/x.npy", rng.standard_normal((rows, 8, 32)).astype(np.float32))
np.save(f"{d}/y.npy", rng.integers(0, 10, rows).astype(np.int64))
