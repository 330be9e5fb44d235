#!/usr/bin/env python3
"""Writes a large ONNX model with external data for the opt-in `make bench-big` (bench/bench_big.sh): a stack of
LAYERS fp32 MatMuls x[1, D] @ W_i[D, D] (ReLU between), each weight written by numpy straight into one raw data
file (weights.bin), and a small model proto made with onnx.helper whose initializers point into that file with
external_data entries (location, offset, length). Python holds one chunk of one weight at a time, so a 4 GB model
needs well under 100 MB here. Usage: big_model.py OUTDIR [D] [LAYERS]."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP, helper

out = sys.argv[1]
D = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
LAYERS = int(sys.argv[3]) if len(sys.argv) > 3 else 16
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)
rows = max(1, (1 << 22) // D)  # about 16 MB of fp32 per chunk
inits, nodes, offset = [], [], 0
with open(os.path.join(out, "weights.bin"), "wb") as f:
    for i in range(LAYERS):
        for r in range(0, D, rows):
            n = min(rows, D - r)
            # scaled so the activations stay near 1 through the stack
            f.write((rng.standard_normal((n, D), dtype=np.float32) * np.float32(1.0 / np.sqrt(D))).tobytes())
        t = TP()
        t.name = f"w{i}"
        t.data_type = TP.FLOAT
        t.dims.extend([D, D])
        t.data_location = TP.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(D * D * 4))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += D * D * 4
        inits.append(t)
        src = "x" if i == 0 else f"h{i - 1}"
        dst = "y" if i == LAYERS - 1 else f"m{i}"
        nodes.append(helper.make_node("MatMul", [src, f"w{i}"], [dst]))
        if i != LAYERS - 1:
            nodes.append(helper.make_node("Relu", [dst], [f"h{i}"]))
g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TP.FLOAT, [1, D])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, D])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
with open(os.path.join(out, "model.onnx"), "wb") as f:
    f.write(m.SerializeToString())
print(f"weight_bytes: {offset}")
