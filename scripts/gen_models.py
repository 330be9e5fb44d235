#!/usr/bin/python3
"""Test and demo models for tern's compiler, exported from PyTorch (Debian's python3-torch) with random weights:
no downloads. Each model is written as NAME.onnx with a sample input NAME.in.npy and PyTorch's fp32 output
NAME.out.npy next to it.

    /usr/bin/python3 scripts/gen_models.py OUTDIR [NAME ...]

NAMEs: mlp, mlp_batch (the MLP with a symbolic batch), gpt2_tiny (the demo transformer), gpt2_small, gpt2_124m,
bert_tiny, bert_tiny_b4 (batch 4), bert_base, bert_large, attn_add, attn_where, linear_bigk, resnet_tiny, resnet18,
resnet50 (torchvision).
Without NAMEs: the quick ones the tests use (see main).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
OPSET = 14


class Block(nn.Module):
    """A GPT-2 / BERT style transformer block (pre-LN for GPT-2, post-LN for BERT)."""

    def __init__(self, d, heads, causal, seq, post_ln=False):
        super().__init__()
        self.h, self.dh, self.causal, self.post_ln = heads, d // heads, causal, post_ln
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).bool())

    def attn(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(b, s, self.h, self.dh).transpose(1, 2)
        k = k.reshape(b, s, self.h, self.dh).transpose(1, 2)
        v = v.reshape(b, s, self.h, self.dh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        if self.causal:
            att = att.masked_fill(~self.mask[:s, :s], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(y)

    def mlp(self, x):
        return self.out(F.gelu(self.fc(x), approximate="tanh" if self.causal else "none"))

    def forward(self, x):
        if self.post_ln:
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.mlp(x))
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads, True, seq) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()


class BERT(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList([Block(d, heads, False, seq, post_ln=True) for _ in range(layers)])
        self.pool = nn.Linear(d, d)

    def forward(self, ids):
        x = self.ln(self.wte(ids) + self.wpe(torch.arange(ids.shape[1])))
        for b in self.blocks:
            x = b(x)
        return torch.tanh(self.pool(x))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(256, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return torch.softmax(self.l3(F.relu(self.l2(F.relu(self.l1(x))))), dim=-1)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, widths, blocks, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], widths[0]
        for i, (w, n) in enumerate(zip(widths, blocks)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class AttnAdd(nn.Module):
    """Bare attention, scaled by a multiplication, with an additive mask given at run time; 200 queries (two tiles
    of 128 partitions) and 600 keys (two PSUM banks of scores, five key blocks)."""

    def forward(self, q, k, v, mask):
        att = (q @ k.transpose(-2, -1)) * 0.125 + mask
        return torch.softmax(att, dim=-1) @ v


class AttnWhere(nn.Module):
    """Bare attention with torch.where(keep, scores, fill): a Where whose fill is on the false side, and a keep
    pattern that differs per head."""

    def __init__(self, heads, s):
        super().__init__()
        self.register_buffer("keep", torch.rand(heads, s, s) > 0.3)

    def forward(self, q, k, v):
        att = (q @ k.transpose(-2, -1)) / 8.0
        att = torch.where(self.keep, att, torch.tensor(-1e9))
        return torch.softmax(att, dim=-1) @ v


class BigK(nn.Module):
    """A linear layer whose contraction (12000) is too long for the fused linear kernel's SBUF row tile (the
    compiler's HBM route), with a residual add after the activation."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(12000, 40)

    def forward(self, x):
        return F.relu(self.l(x)) + x[:, :40]


def models():
    return {
        "mlp": (lambda: MLP(), lambda: torch.randn(8, 256), "x"),
        # the same MLP with a symbolic batch (dynamic axis 0): what `--cores N` splits
        "mlp_batch": (lambda: MLP(), lambda: torch.randn(8, 256), "x"),
        "gpt2_tiny": (lambda: GPT(256, 64, 4, 2, 32), lambda: torch.randint(0, 256, (1, 32)), "input_ids"),
        "gpt2_small": (lambda: GPT(1024, 256, 4, 4, 128), lambda: torch.randint(0, 1024, (1, 128)), "input_ids"),
        "gpt2_124m": (lambda: GPT(50257, 768, 12, 12, 128), lambda: torch.randint(0, 50257, (1, 128)), "input_ids"),
        "bert_tiny": (lambda: BERT(512, 64, 4, 2, 32), lambda: torch.randint(0, 512, (1, 32)), "input_ids"),
        # a batch of 4: the fused attention's head groups (one per batch element) rotate through their slots
        "bert_tiny_b4": (lambda: BERT(512, 64, 4, 2, 32), lambda: torch.randint(0, 512, (4, 32)), "input_ids"),
        "bert_base": (lambda: BERT(30522, 768, 12, 12, 128), lambda: torch.randint(0, 30522, (1, 128)), "input_ids"),
        "bert_large": (lambda: BERT(30522, 1024, 16, 24, 128), lambda: torch.randint(0, 30522, (1, 128)), "input_ids"),
        "attn_add": (lambda: AttnAdd(),
                     lambda: (torch.randn(1, 2, 200, 64), torch.randn(1, 2, 600, 64), torch.randn(1, 2, 600, 96),
                              torch.where(torch.rand(1, 1, 200, 600) > 0.2, 0.0, -10000.0)),
                     ("q", "k", "v", "mask")),
        "attn_where": (lambda: AttnWhere(3, 48),
                       lambda: (torch.randn(2, 3, 48, 32), torch.randn(2, 3, 48, 32), torch.randn(2, 3, 48, 32)),
                       ("q", "k", "v")),
        "linear_bigk": (lambda: BigK(), lambda: torch.randn(3, 12000), "x"),
        "resnet_tiny": (lambda: ResNet([8, 16], [1, 1], 10), lambda: torch.randn(1, 3, 32, 32), "image"),
        "resnet18": (lambda: ResNet([64, 128, 256, 512], [2, 2, 2, 2], 1000), lambda: torch.randn(1, 3, 224, 224),
                     "image"),
        # torchvision's ResNet-50 (bottleneck blocks 3-4-6-3), its layer configuration with seeded random weights
        # (no download: weights=None); needs Debian's python3-torchvision, imported only when this model is made
        "resnet50": (lambda: _torchvision_resnet50(), lambda: torch.randn(1, 3, 224, 224), "image"),
    }


def _torchvision_resnet50():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None)


def export(name, outdir):
    make, sample, in_name = models()[name]
    m = make().eval()
    x = sample()
    xs, names = (x, list(in_name)) if isinstance(x, tuple) else ((x,), [in_name])
    path = os.path.join(outdir, name + ".onnx")
    with torch.no_grad():
        y = m(*xs)
        dyn = {in_name: {0: "batch"}, "output": {0: "batch"}} if name.endswith("_batch") else None
        torch.onnx.export(m, xs, path, input_names=names, output_names=["output"], opset_version=OPSET,
                          do_constant_folding=True, dynamic_axes=dyn)
    if len(xs) == 1:
        np.save(os.path.join(outdir, name + ".in.npy"), x.numpy())
    else:  # several inputs: NAME.INPUT.npy each
        for t, n in zip(xs, names):
            np.save(os.path.join(outdir, f"{name}.{n}.npy"), t.numpy())
    np.save(os.path.join(outdir, name + ".out.npy"), y.numpy().astype(np.float32))
    return path


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    names = sys.argv[2:] or ["mlp", "mlp_batch", "gpt2_tiny", "bert_tiny", "bert_tiny_b4", "attn_add", "attn_where",
                              "linear_bigk"]
    for n in names:
        if n not in models():
            print(f"gen_models: unknown model '{n}' (known: {', '.join(models())})", file=sys.stderr)
            sys.exit(2)
        print(export(n, outdir))


if __name__ == "__main__":
    main()
