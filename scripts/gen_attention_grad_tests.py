#!/usr/bin/env python3
"""Reference data for tests/compiler/test_attention_grad.c: tern.AttentionGrad models and PyTorch autograd.

For each case it writes DIR/<case>.onnx (one tern.AttentionGrad node: inputs Q, K, V, O, dO, LSE[, M]; outputs dQ,
dK, dV; LSE left out in the _nolse cases, which the kernel then recomputes; M, the additive mask, in the mask_
cases), the inputs DIR/<case>.<name>.npy (float32) and PyTorch's gradients DIR/<case>.ref_<name>.npy (float64): the
forward O = softmax(scale * Q K^T [+ M] [+ causal mask]) V computed in float64 with autograd, K and V repeated over the
kv_rep query heads that share them (repeat_interleave: query head h reads K/V head h // kv_rep), LSE its
logsumexp. Also DIR/unfused_<case>.onnx: the same backward as plain ONNX ops (the planner's former graph), for
the time comparison, and DIR/too_wide.onnx (head size 160: refused). DIR/cases.txt lists the cases as
"name kv_rep causal lse mask" lines. Tests only: tern itself never runs Python."""
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

D_ = sys.argv[1]

# name, batch, query heads, kv heads, Sq, Sk, D, Dv, causal, LSE given (0: the kernel recomputes it), mask (the
# additive input M: 0 none; 1 a padding mask [B, 1, 1, Sk], -10000 on each sequence's last keys, as BERT's; 2 a
# local window [Sq, Sk] of 0 / -inf, |i - j| <= 40, so most key tiles of a query hold only -inf; 3 a float bias
# [1, H, Sq, Sk] of random values, not a mask at all; Where masks (attribute mask 1 / 2, the scores replaced by the
# fill, which then get no gradient): 4 a [B, 1, 1, Sk] padding condition, 1 on the masked keys, fill -1000, batch 1
# masked whole (every row uniform); 5 a [Sq, Sk] window, 0 on the masked keys, fill -1e9)
WHERE = {4: (1, -1000.0), 5: (2, -1e9)}
MASK_CASES = [
    ("where_pad", 2, 2, 2, 200, 328, 48, 48, 0, 1, 4),
    ("where_window_nolse", 1, 2, 2, 300, 300, 32, 32, 0, 0, 5),
    ("mask_pad_nolse", 2, 2, 2, 200, 328, 48, 48, 0, 0, 1),
    ("mask_window_nolse", 1, 2, 1, 300, 300, 64, 64, 0, 0, 2),
    ("mask_bias", 1, 2, 2, 130, 200, 32, 32, 0, 1, 3),
    ("mask_pad_causal", 2, 1, 1, 256, 256, 32, 32, 1, 0, 1),
]
CASES = [
    ("basic", 1, 2, 2, 128, 128, 64, 64, 0, 1),
    ("causal", 1, 2, 2, 256, 256, 64, 64, 1, 1),
    ("gqa_causal", 2, 4, 2, 128, 128, 32, 32, 1, 1),
    ("ragged", 1, 1, 1, 200, 328, 48, 40, 0, 1),
    ("ragged_causal", 1, 2, 1, 200, 200, 64, 64, 1, 1),
    ("causal_wide", 1, 1, 1, 128, 300, 64, 64, 1, 1),  # keys 128..299 follow every query: zero dK, dV
    ("causal_nolse", 1, 2, 2, 256, 256, 64, 64, 1, 0),
    ("gqa_ragged_nolse", 2, 4, 2, 200, 328, 48, 48, 0, 0),
]


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


MASK_SHAPES = {1: lambda b, hq, sq, sk: (b, 1, 1, sk), 2: lambda b, hq, sq, sk: (sq, sk),
               3: lambda b, hq, sq, sk: (1, hq, sq, sk), 4: lambda b, hq, sq, sk: (b, 1, 1, sk),
               5: lambda b, hq, sq, sk: (sq, sk)}


def model(name, b, hq, hkv, sq, sk, d, dv, causal, scale, lse=1, mask=0):
    shapes = {"Q": (b, hq, sq, d), "K": (b, hkv, sk, d), "V": (b, hkv, sk, dv), "O": (b, hq, sq, dv),
              "dO": (b, hq, sq, dv)}
    if lse:
        shapes["LSE"] = (b, hq, sq, 1)
    if mask:
        shapes["M"] = MASK_SHAPES[mask](b, hq, sq, sk)
    ins = list(shapes) if lse or not mask else list(shapes)[:5] + ["", "M"]
    extra = {"mask": WHERE[mask][0], "fill": WHERE[mask][1]} if mask in WHERE else {}
    node = helper.make_node("AttentionGrad", ins, ["dQ", "dK", "dV"], domain="tern", scale=scale,
                            causal=causal, kv_rep=hq // hkv, **extra)
    g = helper.make_graph([node], name, [vi(n, s) for n, s in shapes.items()],
                          [vi("dQ", shapes["Q"]), vi("dK", shapes["K"]), vi("dV", shapes["V"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("tern", 1)])
    onnx.save(m, f"{D_}/{name}.onnx")


def unfused(name, bh, s, d, scale):
    """The backward of one attention block as separate ops (softmax recomputed from Q K^T, delta given)."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["Q", "KT"], ["s"]), n("Mul", ["s", "scale"], ["ss"]), n("Softmax", ["ss"], ["p"], axis=-1),
        n("Transpose", ["p"], ["pT"], perm=[0, 2, 1]), n("MatMul", ["pT", "dO"], ["dV"]),
        n("MatMul", ["dO", "VT"], ["dp"]), n("Sub", ["dp", "delta"], ["dpd"]), n("Mul", ["p", "dpd"], ["ds0"]),
        n("Mul", ["ds0", "scale"], ["ds"]), n("MatMul", ["ds", "K"], ["dQ"]),
        n("Transpose", ["ds"], ["dsT"], perm=[0, 2, 1]), n("MatMul", ["dsT", "Q"], ["dK"]),
    ]
    ins = [vi("Q", (bh, s, d)), vi("KT", (bh, d, s)), vi("VT", (bh, d, s)), vi("K", (bh, s, d)),
           vi("dO", (bh, s, d)), vi("delta", (bh, s, 1))]
    init = [helper.make_tensor("scale", TensorProto.FLOAT, [], [scale])]
    g = helper.make_graph(nodes, name, ins, [vi("dQ", (bh, s, d)), vi("dK", (bh, s, d)), vi("dV", (bh, s, d))],
                          initializer=init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{D_}/unfused_{name}.onnx")


rng = np.random.default_rng(15)
with open(f"{D_}/cases.txt", "w") as cases:
    for name, b, hq, hkv, sq, sk, d, dv, causal, has_lse, mask in [c + (0,) for c in CASES] + MASK_CASES:
        scale = float(np.float32(1.0 / np.sqrt(d)))
        model(name, b, hq, hkv, sq, sk, d, dv, causal, scale, has_lse, mask)
        rep = hq // hkv
        q = torch.tensor(rng.standard_normal((b, hq, sq, d)), dtype=torch.float64, requires_grad=True)
        k = torch.tensor(rng.standard_normal((b, hkv, sk, d)), dtype=torch.float64, requires_grad=True)
        v = torch.tensor(rng.standard_normal((b, hkv, sk, dv)), dtype=torch.float64, requires_grad=True)
        # the float32 values the device and the host reference read, so the reference sees the same operands
        for t in (q, k, v):
            t.data = t.data.float().double()
        go = torch.tensor(rng.standard_normal((b, hq, sq, dv)).astype(np.float32), dtype=torch.float64)
        s = (q @ k.repeat_interleave(rep, dim=1).transpose(-1, -2)) * scale
        m = None
        if mask == 1:
            lens = rng.integers(sk // 3, sk + 1, b)
            m = np.where(np.arange(sk)[None, :] < lens[:, None], 0.0, -10000.0).reshape(b, 1, 1, sk)
        elif mask == 2:
            i = np.arange(sq)[:, None] * sk // sq
            m = np.where(np.abs(i - np.arange(sk)[None, :]) <= 40, 0.0, -np.inf)
        elif mask == 3:
            m = rng.standard_normal((1, hq, sq, sk)) * 2
        elif mask == 4:
            lens = np.array([sk // 2, 0] + [sk] * (b - 2))[:b]
            m = np.where(np.arange(sk)[None, :] < lens[:, None], 0.0, 1.0).reshape(b, 1, 1, sk)
        elif mask == 5:
            i = np.arange(sq)[:, None] * sk // sq
            m = np.where(np.abs(i - np.arange(sk)[None, :]) <= 40, 1.0, 0.0)
        if m is not None:
            m = m.astype(np.float32)
            if mask in WHERE:
                mode, fill = WHERE[mask]
                s = s.masked_fill(torch.tensor((m != 0) == (mode == 1)), float(np.float32(fill)))
            else:
                s = s + torch.tensor(m, dtype=torch.float64)
        if causal:
            s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        o = torch.softmax(s, dim=-1) @ v.repeat_interleave(rep, dim=1)
        o.backward(go)
        vals = {"Q": q, "K": k, "V": v, "O": o, "dO": go, "LSE": lse}
        for nm, t in vals.items():
            np.save(f"{D_}/{name}.{nm}.npy", t.detach().numpy().astype(np.float32))
        if m is not None:
            np.save(f"{D_}/{name}.M.npy", m)
        for nm, t in (("dQ", q.grad), ("dK", k.grad), ("dV", v.grad)):
            np.save(f"{D_}/{name}.ref_{nm}.npy", t.numpy())
        cases.write(f"{name} {rep} {causal} {has_lse} {mask}\n")

# the time comparison: 4 heads of one 512 x 512 block, head size 128 (the planner's block pair at a smaller size)
model("timing", 1, 4, 4, 512, 512, 128, 128, 0, float(np.float32(1 / np.sqrt(128))))
unfused("timing", 4, 512, 128, float(np.float32(1 / np.sqrt(128))))
model("too_wide", 1, 1, 1, 128, 128, 160, 160, 0, 0.08)
