#!/usr/bin/python3
"""Loss curves of a tern training run against PyTorch's, as an SVG (docs/training_loss.svg): the two losses per
step (top; they overlap) and their relative difference on a log scale (bottom). Inputs: the reference JSON
(tests/train/*_ref.py: {"losses": [...]}) and `tern train --json` output.

    /usr/bin/python3 scripts/plot_train_loss.py REF.json TERN.json OUT.svg [TITLE]"""
import json
import math
import sys

ref, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
title = sys.argv[4] if len(sys.argv) > 4 else "tern train vs PyTorch (fp32)"
a = ref["losses"]
b = [s["loss"] for s in got["steps"]]
n = min(len(a), len(b))
W, H, L, R, T = 720, 520, 70, 20, 40
ph = 250  # loss panel height; the difference panel below
lo, hi = min(min(a[:n]), min(b[:n])), max(max(a[:n]), max(b[:n]))
rel = [max(abs(x - y) / abs(x), 1e-12) for x, y in zip(a[:n], b[:n])]
rlo, rhi = -9, -3  # decades of the difference panel


def sx(i):
    return L + (W - L - R) * i / max(n - 1, 1)


def sy(v):
    return T + ph - (ph - 10) * (v - lo) / (hi - lo if hi > lo else 1)


def sr(v):
    top = T + ph + 60
    return top + 110 - 110 * (math.log10(v) - rlo) / (rhi - rlo)


out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>',
       f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
for k in range(5):
    v = lo + (hi - lo) * k / 4
    out.append(f'<line x1="{L}" y1="{sy(v):.1f}" x2="{W - R}" y2="{sy(v):.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{L - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
for d in range(rlo, rhi + 1, 2):
    out.append(f'<line x1="{L}" y1="{sr(10.0 ** d):.1f}" x2="{W - R}" y2="{sr(10.0 ** d):.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{L - 6}" y="{sr(10.0 ** d) + 4:.1f}" text-anchor="end">1e{d}</text>')
for i in range(0, n, max(1, n // 5)):
    out.append(f'<text x="{sx(i):.1f}" y="{H - 26}" text-anchor="middle">{i + 1}</text>')
out.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">step</text>')
out.append(f'<text x="14" y="{T + ph / 2}" transform="rotate(-90 14 {T + ph / 2})" text-anchor="middle">loss</text>')
out.append(f'<text x="14" y="{T + ph + 115}" transform="rotate(-90 14 {T + ph + 115})" text-anchor="middle" font-size="10">'
           '|tern - PyTorch| / PyTorch</text>')
for vals, color, width, dash in ((a, "#1f77b4", 3.5, ""), (b, "#d62728", 1.5, ' stroke-dasharray="5 3"')):
    pts = " ".join(f"{sx(i):.1f},{sy(v):.1f}" for i, v in enumerate(vals[:n]))
    out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>')
pts = " ".join(f"{sx(i):.1f},{sr(v):.1f}" for i, v in enumerate(rel))
out.append(f'<polyline points="{pts}" fill="none" stroke="#2ca02c" stroke-width="1.2"/>')
out.append(f'<text x="{W - R - 10}" y="{T + 20}" text-anchor="end" fill="#1f77b4">PyTorch</text>')
out.append(f'<text x="{W - R - 10}" y="{T + 36}" text-anchor="end" fill="#d62728">tern (simulated trn1)</text>')
out.append(f'<text x="{W - R - 10}" y="{T + ph + 50}" text-anchor="end" fill="#2ca02c">'
           f'relative difference, max {max(rel):.1e}</text>')
out.append("</svg>")
open(sys.argv[3], "w").write("\n".join(out) + "\n")
