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


class RMSNorm(nn.Module):
    """LLaMA's and T5's norm: x / sqrt(mean(x^2) + eps) * weight (no mean subtracted, no bias)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w, self.eps = nn.Parameter(1 + 0.1 * torch.randn(d)), eps

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def repeat_kv(x, n):
    """GQA: each of the KV heads serves n query heads (HF's repeat_kv: expand a new axis, then merge it)."""
    b, kv, s, d = x.shape
    return x if n == 1 else x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


class LlamaBlock(nn.Module):
    """A LLaMA-style decoder block as HF's modeling_llama writes it: RMSNorm, q/k/v projections without bias,
    rotary embeddings from cos/sin tables, grouped-query heads (repeat_kv), a causal mask (additive, the float32
    minimum above the diagonal, or masked_fill with -inf: where=True), softmax in float32, o-projection, a SwiGLU
    MLP. rope=False leaves the rotary embeddings out (Q and K straight from their projections)."""

    def __init__(self, d, heads, kv_heads, ffn, seq, where=False, rope=True):
        super().__init__()
        self.h, self.kv, self.dh, self.where, self.rope = heads, kv_heads, d // heads, where, rope
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, heads * self.dh, bias=False)
        self.k = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.v = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.o = nn.Linear(heads * self.dh, d, bias=False)
        self.gate, self.up, self.down = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False), \
            nn.Linear(ffn, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2).float() / self.dh))
        emb = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((emb, emb), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.full((seq, seq), torch.finfo(torch.float32).min).triu(1)[None, None])
        self.register_buffer("keep", torch.tril(torch.ones(seq, seq)).bool())

    def forward(self, x):
        b, s, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, s, self.h, self.dh).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv, self.dh).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv, self.dh).transpose(1, 2)
        cos, sin = self.cos[:s][None, None], self.sin[:s][None, None]
        if self.rope:
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
        if self.where:
            att = att.masked_fill(~self.keep[:s, :s], float("-inf"))
        else:
            att = att + self.mask[:, :, :s, :s]
        att = torch.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.o(y)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab, d, heads, kv_heads, ffn, layers, seq, where=False, rope=True):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, kv_heads, ffn, seq, where, rope) for _ in range(layers)])
        self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


class T5Block(nn.Module):
    """A T5-style encoder block as HF's modeling_t5 writes it: RMS layer norm, q/k/v/o without bias and with an
    inner size heads*d_kv of its own, scores without scaling plus the relative position bias, softmax in float32,
    a ReLU feed-forward."""

    def __init__(self, d, heads, dkv, ffn):
        super().__init__()
        self.h, self.dkv = heads, dkv
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v = (nn.Linear(d, heads * dkv, bias=False) for _ in range(3))
        self.o = nn.Linear(heads * dkv, d, bias=False)
        self.wi, self.wo = nn.Linear(d, ffn, bias=False), nn.Linear(ffn, d, bias=False)

    def forward(self, x, bias):
        b = x.shape[0]
        h = self.n1(x)
        q, k, v = (p(h).view(b, -1, self.h, self.dkv).transpose(1, 2) for p in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(3, 2))
        scores += bias
        w = F.softmax(scores.float(), dim=-1).type_as(scores)
        y = torch.matmul(w, v).transpose(1, 2).contiguous().view(b, -1, self.h * self.dkv)
        x = x + self.o(y)
        return x + self.wo(F.relu(self.wi(self.n2(x))))


class T5Encoder(nn.Module):
    """T5's encoder: the bias of bucketed relative positions (bidirectional, 32 buckets, max distance 128; one
    learned value per bucket and head) computed once and added to every block's scores."""

    def __init__(self, vocab, d, heads, dkv, ffn, layers, buckets=32, max_dist=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rel = nn.Embedding(buckets, heads)
        self.buckets, self.max_dist = buckets, max_dist
        self.blocks = nn.ModuleList([T5Block(d, heads, dkv, ffn) for _ in range(layers)])
        self.norm = RMSNorm(d)

    def bucket(self, rel):
        n = self.buckets // 2
        ret = (rel > 0).to(torch.long) * n
        rel = torch.abs(rel)
        exact = n // 2
        large = exact + (torch.log(rel.float() / exact) / math.log(self.max_dist / exact) * (n - exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, n - 1))
        return ret + torch.where(rel < exact, rel, large)

    def forward(self, ids):
        s = ids.shape[1]
        pos = torch.arange(s)
        bias = self.rel(self.bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1).unsqueeze(0)
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, bias)
        return self.norm(x)


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
        # LLaMA-style decoders (RMSNorm, rotary, 4 query heads sharing 2 KV heads, causal mask: additive, or
        # masked_fill for _where, SwiGLU) and a T5-style encoder (relative position bias, no scaling)
        "llama_tiny": (lambda: Llama(256, 128, 4, 2, 256, 2, 48), lambda: torch.randint(0, 256, (1, 48)),
                       "input_ids"),
        "llama_where": (lambda: Llama(256, 128, 4, 2, 256, 1, 40, where=True), lambda: torch.randint(0, 256, (2, 40)),
                        "input_ids"),
        # without rotary: Q and K come straight from the projections (the heads of a batch element load as a group)
        "llama_norope": (lambda: Llama(256, 128, 4, 2, 256, 1, 40, where=True, rope=False),
                         lambda: torch.randint(0, 256, (2, 40)), "input_ids"),
        "t5_tiny": (lambda: T5Encoder(256, 96, 4, 32, 192, 2), lambda: torch.randint(0, 256, (1, 48)), "input_ids"),
        # bench sizes: sequence 128, batch 1
        "llama_small": (lambda: Llama(4096, 512, 8, 2, 1376, 4, 128), lambda: torch.randint(0, 4096, (1, 128)),
                        "input_ids"),
        "t5_small": (lambda: T5Encoder(4096, 512, 8, 64, 2048, 4), lambda: torch.randint(0, 4096, (1, 128)),
                     "input_ids"),
        "linear_bigk": (lambda: BigK(), lambda: torch.randn(3, 12000), "x"),
        "resnet_tiny": (lambda: ResNet([8, 16], [1, 1], 10), lambda: torch.randn(1, 3, 32, 32), "image"),
        "resnet18": (lambda: ResNet([64, 128, 256, 512], [2, 2, 2, 2], 1000), lambda: torch.randn(1, 3, 224, 224),
                     "image"),
        # torchvision's ResNet-50 (bottleneck blocks 3-4-6-3), its layer configuration with seeded random weights
        # (no download: weights=None); needs Debian's python3-torchvision, imported only when this model is made
        "resnet50": (lambda: _torchvision("resnet50"), lambda: torch.randn(1, 3, 224, 224), "image"),
        # opt-in CNNs for `bench_models NAME` (not in its default set): depthwise convolutions (MobileNetV2: Relu6 as
        # Clip; EfficientNet-B0: SiLU and squeeze-excitation), dense connectivity (DenseNet-121), plain 3 x 3 stacks
        # (VGG-11); torchvision's layer configurations with seeded random weights, as resnet50
        "mobilenet_v2": (lambda: _torchvision("mobilenet_v2"), lambda: torch.randn(1, 3, 224, 224), "image"),
        "efficientnet_b0": (lambda: _torchvision("efficientnet_b0"), lambda: torch.randn(1, 3, 224, 224), "image"),
        "densenet121": (lambda: _torchvision("densenet121"), lambda: torch.randn(1, 3, 224, 224), "image"),
        "vgg11": (lambda: _torchvision("vgg11"), lambda: torch.randn(1, 3, 224, 224), "image"),
    }


def _torchvision(name):
    import torchvision
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None)


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
