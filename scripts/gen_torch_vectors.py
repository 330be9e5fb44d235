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


if __name__ == "__main__":
    main()
