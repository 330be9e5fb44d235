#!/usr/bin/python3
"""Reference vectors for tests/num/test_num_torch.c, computed by PyTorch (Debian's python3-torch).

Usage: /usr/bin/python3 scripts/gen_torch_vectors.py OUTDIR

Writes OUTDIR/num_torch/<name>.bin. Every file is a 16-byte header followed by raw little-endian data:
    magic  b"TERNVEC1" (8 bytes)
    count  uint32      number of elements
    width  uint32      bytes per element
Files:
    inputs_f32.bin         fp32 inputs (random normals, wide-exponent values, fp32 denormals, bf16/fp16
                           subnormal-range values, exact bf16 and fp16 halfway points and their fp32 neighbours,
                           +-0, +-inf, NaNs)
    bf16_rne.bin           torch: inputs.to(torch.bfloat16) bit patterns (uint16)
    fp16_rne.bin           torch: inputs.to(torch.float16) bit patterns (uint16)
    bf16_decode.bin        torch: all 65536 bf16 codes .to(torch.float32) (fp32 bit patterns)
    fp16_decode.bin        torch: all 65536 fp16 codes .to(torch.float32)
    fp8_e4m3fn_rne.bin,    only when this torch has torch.float8_e4m3fn / float8_e5m2 (torch >= 2.1);
    fp8_e5m2_rne.bin       absent otherwise, and the test then says it skipped them
Deterministic (fixed seed); about 1.3 M inputs, ~11 MB, a few seconds.
"""
import os
import struct
import sys

import numpy as np
import torch

N_RANDOM = 1 << 20


def write(outdir, name, arr):
    arr = np.ascontiguousarray(arr)
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(b"TERNVEC1" + struct.pack("<II", arr.size, arr.dtype.itemsize))
        f.write(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())


def inputs():
    rng = np.random.default_rng(20240601)
    parts = []
    # random normals at several scales
    parts.append((rng.standard_normal(N_RANDOM // 4) * 10.0 ** rng.integers(-8, 8, N_RANDOM // 4)).astype(np.float32))
    # wide exponents: any finite fp32 pattern
    bits = rng.integers(0, 1 << 32, N_RANDOM // 4, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]
    parts.append(bits.view(np.float32))
    # fp32 denormals and bf16/fp16 subnormal range
    parts.append(rng.integers(0, 1 << 23, N_RANDOM // 16, dtype=np.uint32).view(np.float32))
    parts.append((rng.uniform(-1, 1, N_RANDOM // 8) * 2.0 ** rng.integers(-27, -13, N_RANDOM // 8)).astype(np.float32))
    # exact bf16 halfway points (low 16 bits = 0x8000) and their fp32 neighbours
    hi = rng.integers(0, 1 << 16, N_RANDOM // 8, dtype=np.uint32) << 16
    for low in (0x7FFF, 0x8000, 0x8001):
        parts.append((hi | low).astype(np.uint32).view(np.float32))
    # exact fp16 halfway points: midpoints of adjacent fp16 values (exact in fp32), and neighbours
    codes = rng.integers(0, 0x7BFF, N_RANDOM // 8, dtype=np.uint16)
    lo = codes.view(np.float16).astype(np.float64)
    up = (codes + 1).astype(np.uint16).view(np.float16).astype(np.float64)
    mids = ((lo + up) / 2).astype(np.float32)
    signs = np.where(rng.integers(0, 2, mids.size) == 1, -1, 1).astype(np.float32)
    mids = mids * signs
    parts.append(mids)
    parts.append(np.nextafter(mids, np.float32(np.inf)))
    parts.append(np.nextafter(mids, np.float32(-np.inf)))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 65519.996, 3.3895314e38,
                         3.4028235e38, 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -24], dtype=np.float32)
    parts.append(specials)
    parts.append(np.frombuffer(struct.pack("<4I", 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345), dtype=np.float32))
    x = np.concatenate(parts).astype(np.float32)
    return x


def strconv_vectors(path):
    """float32 <-> text references for tests/num/test_num_strconv.c, from numpy alone (no torch).

    numpy is the reference of ONNX's Cast tests to and from STRING: float32 -> text is np.float32 .astype(np.str_)
    (str() of each element: Dragon4 shortest digits), text -> float32 is an object array of str .astype(np.float32)
    (Python's float() to double, then a second rounding to float32). One line per case:
        F <fp32 bits, 8 hex digits> <numpy's text>
        P <fp32 bits, 8 hex digits> <the text's UTF-8 bytes in hex>
        X -------- <the text's UTF-8 bytes in hex>    (Python's float() rejects it)
    """
    rng = np.random.default_rng(20240611)
    u32 = lambda a: np.asarray(a, dtype=np.uint64).astype(np.uint32)
    parts = [u32(rng.integers(0, 1 << 32, 140000, dtype=np.uint64))]       # any bit pattern (NaNs included)
    parts.append(rng.random(20000, dtype=np.float32).view(np.uint32))        # random_sample in [0, 1)
    parts.append(rng.random(20000).astype(np.float32).view(np.uint32))
    parts.append((rng.standard_normal(10000) * 10.0 ** rng.integers(-45, 39, 10000)).astype(np.float32).view(np.uint32))
    ex = np.arange(256, dtype=np.uint32) << 23                               # every exponent: powers of two and
    for m in (0, 1, 2, 3, 0x400000, 0x7FFFFD, 0x7FFFFE, 0x7FFFFF):          # their neighbours (unequal margins)
        parts.append(ex | np.uint32(m))
    parts.append(np.arange(1, 4097, dtype=np.uint32))                       # subnormals
    parts.append(u32(rng.integers(1, 1 << 23, 4000)))
    parts.append(np.arange(0x7F7FF000, 0x7F800001, dtype=np.uint32))          # up to max float and inf
    near = []
    for c in (1e-4, 1e16, 1e-5, 1e15, 1e17, 1.0, 1e8, 1e-45, 1.17549435e-38, 3.4028235e38):
        x = np.full(1, c, dtype=np.float32).view(np.uint32)[0]
        near.append(np.arange(max(int(x) - 64, 1), min(int(x) + 65, 0x7F800001), dtype=np.uint32))
    for k in range(-45, 39):                                                  # powers of ten and neighbours
        x = np.array([10.0 ** k], dtype=np.float32).view(np.uint32)[0]
        near.append(np.arange(max(int(x) - 3, 1), int(x) + 4, dtype=np.uint32))
    parts += near
    ints = np.concatenate([np.arange(0, 4096), np.arange((1 << 24) - 2048, (1 << 24) + 4096),
                           rng.integers(0, 1 << 24, 8000), rng.integers(1 << 24, 1 << 40, 8000)])
    parts.append(ints.astype(np.float32).view(np.uint32))                   # integers below and beyond 2^24
    bits = np.concatenate([u32(p) for p in parts])
    bits = np.concatenate([bits, bits[: bits.size // 4] ^ np.uint32(0x80000000)])  # and a quarter negated
    text = bits.view(np.float32).astype(np.str_)
    lines = ["F %08x %s" % (b, t) for b, t in zip(bits.tolist(), text.tolist())]

    strs = [str(t) for t in text[rng.choice(text.size, 6000, replace=False)]]  # numpy's own output
    strs += [repr(float(v)) for v in rng.standard_normal(2000) * 10.0 ** rng.integers(-50, 41, 2000)]
    for _ in range(8000):                                                     # random decimals, 1-20 digits
        nd = int(rng.integers(1, 21))
        d = "".join(str(int(c)) for c in rng.integers(0, 10, nd))
        pt = int(rng.integers(0, nd + 1))
        m = d[:pt] + "." + d[pt:] if rng.random() < 0.7 else d
        if m == ".":
            m = "0."
        if rng.random() < 0.7:
            m += "eE"[int(rng.integers(0, 2))] + ["", "+", "-"][int(rng.integers(0, 3))] + str(int(rng.integers(0, 60)))
        strs.append(["", "+", "-"][int(rng.integers(0, 3))] + m)
    # float32 rounding midpoints, exactly and a hair either side: the two roundings (double, then float32) differ
    # from a direct decimal -> float32 rounding exactly here
    from decimal import Decimal, getcontext
    getcontext().prec = 200
    mb = u32(rng.integers(1, 0x7F7FFFFF, 1500))
    for b in mb.tolist():
        lo = Decimal(float(np.array([b], dtype=np.uint32).view(np.float32)[0]))
        hi = Decimal(float(np.array([b + 1], dtype=np.uint32).view(np.float32)[0]))
        mid = (lo + hi) / 2
        for eps in (0, Decimal(10) ** -40, -Decimal(10) ** -40, Decimal(10) ** -15, -Decimal(10) ** -15):
            strs.append(format(mid * (1 + eps), "e"))
    mid = Decimal(float.fromhex("0x1.0000000000001p-1074")) / 2              # a long exact value near 2^-1075
    strs += [format(mid, "f"), format(mid, "f") + "0" * 900 + "1", "0." + "0" * 1000 + "1e1000", "1" * 1200 + "e-1200",
             "9" * 30 + "e-30", "1" + "0" * 900 + ".5e-900"]
    strs += ["NaN", "nan", "-nan", "+nan", "nAn", "INF", "+INF", "-INF", "inf", "-inf", "Infinity", "-infinity",
             "+iNfInItY", " 1_000.5 ", "1_0", "1e1_0", "1_2.3_4e-1_0", "1e-50", "-1e-50", "3.4028236e38",
             "3.4028235e38", "3.40282356779733661637539395458142568448e38", "3.4028235677973366e38", "1e39", "1e400",
             "-1e400", "1e-400", "-0", "-0.0", "+0", "0e999999999999999999999", "1e-99999999999999999999",
             "1e-45", "1.4e-45", "7e-46", "7.006e-46", "7.0064923216240854e-46", "7.00649232162408535e-46",
             "1.1754942e-38", "1.1754943e-38", "1.17549435e-38", "2.9e-45", "5e-324", "1.", ".5", "-.5e-3", "1e-0",
             "\t\n\r\v\f 42 \t", "\u00a01", "1\u3000", "\u0661\u0662.\u0665", "\uff11e\uff12", "\u0085 2",
             "0.1", "0.2", "0.3", "16777217", "16777217.000000001", "33554434", "1.00000005960464477539062500000000001"]
    bad = ["", " ", "0x10", "1__0", "_1", "1_", "1_.5", "1._5", "1_e5", "1e_5", "nan(1)", "1e", "1e+", ".", "abc",
           "1.2.3", "+-1", "- 1", "1 1", "infin", "infinityy", "in f", "nana", "+", "e5", ".e5", "1e5.5", "0b1",
           "\x1c1", "1\x1c", "\x001", "1\x00", "1\x7f", "\u00e91", "1,5", "1d5", "--1", "inf_", "_inf", "1e1e1"]
    for t in bad:
        try:
            float(t)
            raise SystemExit("gen_torch_vectors: float(%r) was expected to fail" % t)
        except ValueError:
            pass
    with np.errstate(over="ignore"):
        vals = np.array(strs, dtype=object).astype(np.float32).view(np.uint32)
    lines += ["P %08x %s" % (b, t.encode("utf-8").hex()) for b, t in zip(vals.tolist(), strs)]
    lines += ["X -------- %s" % t.encode("utf-8").hex() for t in bad]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return bits.size, len(strs), len(bad)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_torch_vectors.py OUTDIR")
    outdir = os.path.join(sys.argv[1], "num_torch")
    os.makedirs(outdir, exist_ok=True)
    x = inputs()
    t = torch.from_numpy(x.copy())
    write(outdir, "inputs_f32.bin", x.view(np.uint32))
    write(outdir, "bf16_rne.bin", t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
    write(outdir, "fp16_rne.bin", t.to(torch.float16).view(torch.int16).numpy().view(np.uint16))
    allc = torch.from_numpy(np.arange(65536, dtype=np.uint16).view(np.int16).copy())
    write(outdir, "bf16_decode.bin", allc.view(torch.bfloat16).to(torch.float32).numpy().view(np.uint32))
    write(outdir, "fp16_decode.bin", allc.view(torch.float16).to(torch.float32).numpy().view(np.uint32))
    made = ["bf16", "fp16"]
    for name, attr in (("fp8_e4m3fn", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2")):
        path = os.path.join(outdir, name + "_rne.bin")
        if hasattr(torch, attr):
            write(outdir, name + "_rne.bin", t.to(getattr(torch, attr)).view(torch.uint8).numpy())
            made.append(name)
        elif os.path.exists(path):
            os.remove(path)
    print("gen_torch_vectors: torch %s, %d inputs, formats: %s -> %s" % (torch.__version__, x.size,
                                                                           ", ".join(made), outdir))
    counts = strconv_vectors(os.path.join(sys.argv[1], "strconv_f32.txt"))
    print("gen_torch_vectors: numpy %s, float32 <-> text: %d formatted, %d parsed, %d invalid -> %s" %
          ((np.__version__,) + counts + (os.path.join(sys.argv[1], "strconv_f32.txt"),)))


if __name__ == "__main__":
    main()
