#!/usr/bin/env python3
"""Plot bench_dma's sweep (lines `dma_<contig|strided>_p<P>_q<Q>_b<B>_gbps: X` on stdin or in a file) as an SVG
line chart of achieved GB/s against bytes per partition, with the NKI DMA overview's throughput curve
(nki-dma-overview.rst, figure nki-dma-intro-1.jpg, read as fractions of its 32 KiB point) scaled to tern's
128-partition one-queue value at 32 KiB. Usage: build/bench/bench_dma | scripts/plot_dma.py > docs/dma_sweep.svg"""
import math
import re
import sys

FIGURE = {128: 5.0, 256: 10.3, 512: 20.9, 1024: 42.4, 2048: 81.3, 4096: 96.6, 8192: 98.3, 16384: 99.0, 32768: 100.0}
SERIES = [("contig", 128, 1, "#1b6f5c", "128 partitions, contiguous, 1 queue"),
          ("strided", 128, 1, "#7f7f7f", "128 partitions, strided rows, 1 queue"),
          ("contig", 128, 4, "#d9822b", "128 partitions, 4 queues"),
          ("contig", 128, 16, "#c0392b", "128 partitions, 16 queues"),
          ("contig", 32, 1, "#2e86c1", "32 partitions, 1 queue"),
          ("contig", 1, 1, "#8e44ad", "1 partition, 1 queue")]


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    data = {}
    for m in re.finditer(r"dma_(contig|strided)_p(\d+)_q(\d+)_b(\d+)_gbps: ([0-9.]+)", text):
        data[(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))] = float(m.group(5))
    if not data:
        sys.exit("plot_dma.py: no dma_*_gbps lines in the input")
    W, H, L, R, T, B = 760, 430, 70, 250, 40, 60
    xs = sorted({k[3] for k in data})
    ymax = max(data.values()) * 1.1
    def X(b):
        return L + (math.log2(b) - math.log2(xs[0])) / (math.log2(xs[-1]) - math.log2(xs[0])) * (W - L - R)
    def Y(v):
        return H - B - v / ymax * (H - T - B)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">tern DMA sweep on a trn1 core (bench_dma, timing-only)</text>' % L]
    for g in range(0, int(ymax) + 1, 50):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (L, W - R, Y(g), Y(g)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (L - 6, Y(g) + 4, g))
    for b in xs:
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>' % (X(b), X(b), T, H - B))
        lab = "%dK" % (b // 1024) if b >= 1024 else str(b)
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (X(b), H - B + 16, lab))
    out.append('<text x="%d" y="%d" text-anchor="middle">bytes per partition</text>' % ((L + W - R) // 2, H - 18))
    out.append('<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">GB/s</text>' % (H // 2, H // 2))
    legend = []
    for kind, p, q, color, name in SERIES:
        pts = [(b, data[(kind, p, q, b)]) for b in xs if (kind, p, q, b) in data]
        if not pts:
            continue
        dash = ' stroke-dasharray="5,3"' if kind == "strided" else ""
        out.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' %
                   (color, dash, " ".join("%.1f,%.1f" % (X(b), Y(v)) for b, v in pts)))
        legend.append((color, name, dash))
    ref = data.get(("contig", 128, 1, 32768))
    if ref:
        pts = [(b, FIGURE[b] / 100 * ref) for b in sorted(FIGURE) if b in xs]
        for b, v in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="black"/>' % (X(b), Y(v)))
        legend.append(("black", "NKI DMA overview figure (shape, scaled to tern at 32 KiB)", "dot"))
    for i, (color, name, dash) in enumerate(legend):
        y = T + 10 + i * 32
        if dash == "dot":
            out.append('<circle cx="%d" cy="%d" r="3.5" fill="black"/>' % (W - R + 25, y))
        else:
            out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (W - R + 12, W - R + 38, y, y, color, dash))
        # two lines at most, broken at a space so no word is cut
        cut = name.rfind(" ", 0, 32) if len(name) > 32 else len(name)
        out.append('<text x="%d" y="%d">%s</text>' % (W - R + 44, y + 4, name[:cut]))
        if cut < len(name):
            out.append('<text x="%d" y="%d">%s</text>' % (W - R + 44, y + 17, name[cut + 1:]))
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
