#!/usr/bin/python3
"""Test models and references for tests/graph/ (the ONNX importer, inference, evaluator, passes).

Usage: /usr/bin/python3 scripts/gen_onnx_models.py OUTDIR

Writes OUTDIR/onnx/:
    op_<case>.onnx + op_<case>.bin   one-node models built with onnx.helper, inputs random (fixed seed), expected
                                     outputs computed here with numpy (or torch.nn.functional for conv/pool)
    cases.txt                        one line per op case: "<case> <atol> <rtol>"
    mlp, gpt2, cnn, bert .onnx/.bin  small models exported by torch.onnx.export (random weights, no downloads),
                                     outputs from PyTorch; batch (and sequence) are dynamic axes
    fold.onnx/.bin                   a model whose constant subgraph folds away
    bad_*.onnx                       malformed or unsupported models for the rejection tests
.bin layout (little-endian): b"TGDATA01", u32 n_inputs, u32 n_outputs, then per tensor: u32 name length, name,
i32 ONNX element type, u32 rank, i64 dims[rank], data (float32 for float types, int64 for integer/bool types).
Deterministic (fixed seeds); takes a few seconds.
"""
import math
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = None
CASES = []
rng = np.random.default_rng(1234)

NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32,
           np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.uint8): TensorProto.UINT8,
           np.dtype(np.int8): TensorProto.INT8, np.dtype(np.float64): TensorProto.DOUBLE,
           np.dtype(np.int16): TensorProto.INT16, np.dtype(np.uint16): TensorProto.UINT16,
           np.dtype(np.uint32): TensorProto.UINT32, np.dtype(np.uint64): TensorProto.UINT64}


def write_bin(path, inputs, outputs, in_types=None, out_types=None):
    """in_types/out_types: ONNX element types overriding the numpy dtype's (bfloat16 arrives as float32)."""
    types = list(in_types or [None] * len(inputs)) + list(out_types or [None] * len(outputs))
    with open(path, "wb") as f:
        f.write(b"TGDATA01" + struct.pack("<II", len(inputs), len(outputs)))
        for (name, a), t in zip(list(inputs) + list(outputs), types):
            a = np.asarray(a)
            et = t or NP2ONNX[a.dtype]
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<iI", et, a.ndim))
            f.write(struct.pack("<%dq" % a.ndim, *a.shape))
            if a.dtype.kind == "f":
                f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
            else:
                f.write(np.ascontiguousarray(a, dtype="<i8").tobytes())


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def case(name, op, inputs, outputs, attrs=None, opset=17, consts=(), atol=1e-5, rtol=1e-5, domain=""):
    """inputs/outputs: lists of (name, array); names in consts become initializers. A name of "" marks an omitted
    optional input."""
    attrs = attrs or {}
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], domain=domain, **attrs)
    g_in, inits, feed = [], [], []
    for n, a in inputs:
        if n == "":
            continue
        a = np.asarray(a)
        if n in consts:
            inits.append(numpy_helper.from_array(a, n))
        else:
            g_in.append(helper.make_tensor_value_info(n, NP2ONNX[a.dtype], list(a.shape)))
            feed.append((n, a))
    g_out = [helper.make_tensor_value_info(n, NP2ONNX[np.asarray(a).dtype], None) for n, a in outputs]
    graph = helper.make_graph([node], name, g_in, g_out, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tern-gen")
    model.ir_version = 8
    onnx.save(model, os.path.join(OUT, "op_%s.onnx" % name))
    write_bin(os.path.join(OUT, "op_%s.bin" % name), feed, [(n, np.asarray(a)) for n, a in outputs])
    CASES.append("%s %g %g" % (name, atol, rtol))


erf = np.vectorize(math.erf, otypes=[np.float32])


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def op_cases():
    a, b = f32(2, 3, 4), f32(3, 1)
    for op, fn in [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)]:
        case(op.lower(), op, [("a", a), ("b", b)], [("y", fn(a, b))])
    p = f32(2, 3, lo=0.5, hi=2.0)
    e = f32(3, lo=-2, hi=2)
    case("pow", "Pow", [("a", p), ("b", e)], [("y", np.power(p, e).astype(np.float32))], rtol=1e-5)
    case("pow_scalar", "Pow", [("a", a), ("b", np.array(2.0, np.float32))], [("y", a * a)], consts=("b",))
    ia, ib = rng.integers(-50, 50, (3, 4)), rng.integers(1, 9, (4,))
    case("add_int64", "Add", [("a", ia), ("b", ib)], [("y", ia + ib)])
    case("div_int64", "Div", [("a", ia), ("b", ib)], [("y", np.trunc(ia / ib).astype(np.int64))])
    case("mod_int64", "Mod", [("a", ia), ("b", ib)], [("y", np.mod(ia, ib))])
    x = f32(2, 3, 5)
    pos = f32(2, 3, 5, lo=0.1, hi=3.0)
    unary = [("Sqrt", pos, np.sqrt), ("Exp", x, np.exp), ("Log", pos, np.log), ("Tanh", x, np.tanh),
             ("Sigmoid", x, lambda v: 1 / (1 + np.exp(-v))), ("Relu", x, lambda v: np.maximum(v, 0)),
             ("Erf", x, erf), ("Neg", x, np.negative), ("Abs", x, np.abs), ("Reciprocal", pos, lambda v: 1 / v),
             ("Floor", x, np.floor), ("Ceil", x, np.ceil), ("Sin", x, np.sin), ("Cos", x, np.cos),
             ("Softplus", x, lambda v: np.log1p(np.exp(v))), ("Identity", x, lambda v: v)]
    for op, inp, fn in unary:
        case(op.lower(), op, [("x", inp)], [("y", fn(inp).astype(np.float32))], rtol=2e-6, atol=2e-6)
    case("leakyrelu", "LeakyRelu", [("x", x)], [("y", np.where(x < 0, 0.1 * x, x))], attrs={"alpha": 0.1})
    case("gelu_tanh_op", "Gelu", [("x", x)],
         [("y", (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).astype(np.float32))],
         attrs={"approximate": "tanh"}, opset=17, atol=1e-5)
    cond = rng.random((2, 3, 1)) > 0.5
    yy = f32(5)
    case("where", "Where", [("c", cond), ("x", x), ("y", yy)], [("z", np.where(cond, x, yy))])
    for op, fn in [("Equal", np.equal), ("Less", np.less), ("Greater", np.greater)]:
        case(op.lower(), op, [("a", ia), ("b", ib)], [("y", fn(ia, ib))])
    case("less_float", "Less", [("a", a), ("b", b)], [("y", np.less(a, b))])
    bb = rng.random((4,)) > 0.5
    case("not", "Not", [("x", bb)], [("y", ~bb)])
    case("clip", "Clip", [("x", x), ("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))],
         [("y", np.clip(x, -0.5, 0.7))], consts=("lo", "hi"))
    case("clip_opset6", "Clip", [("x", x)], [("y", np.clip(x, -0.5, 0.7))], attrs={"min": -0.5, "max": 0.7}, opset=6)
    c3 = f32(3, 1)
    case("max", "Max", [("a", a), ("b", b), ("c", c3)], [("y", np.maximum(np.maximum(a, b), c3))])
    case("min", "Min", [("a", a), ("b", b)], [("y", np.minimum(a, b))])
    case("sum", "Sum", [("a", a), ("b", b)], [("y", a + b)])
    # matmul family
    A, B = f32(2, 1, 4, 6), f32(3, 6, 5)
    case("matmul_batched", "MatMul", [("a", A), ("b", B)], [("y", np.matmul(A, B))], atol=1e-5)
    v1, M2 = f32(6), f32(6, 3)
    case("matmul_vec", "MatMul", [("a", v1), ("b", M2)], [("y", np.matmul(v1, M2))])
    ga, gb, gc = f32(5, 4), f32(3, 4), f32(3)
    case("gemm", "Gemm", [("a", ga), ("b", gb), ("c", gc)], [("y", (0.5 * ga @ gb.T + 2.0 * gc).astype(np.float32))],
         attrs={"transB": 1, "alpha": 0.5, "beta": 2.0})
    # conv / pools through torch.nn.functional
    import torch
    import torch.nn.functional as F
    X, W, Bc = f32(2, 4, 9, 8), f32(6, 2, 3, 3), f32(6)
    ref = F.conv2d(torch.from_numpy(X), torch.from_numpy(W), torch.from_numpy(Bc), stride=(2, 1), padding=(1, 2),
                   dilation=(1, 2), groups=2).numpy()
    case("conv2d", "Conv", [("x", X), ("w", W), ("b", Bc)], [("y", ref)],
         attrs={"strides": [2, 1], "pads": [1, 2, 1, 2], "dilations": [1, 2], "group": 2}, consts=("w", "b"), atol=1e-5)
    X1, W1 = f32(1, 3, 10), f32(4, 3, 3)
    case("conv1d_same", "Conv", [("x", X1), ("w", W1)],
         [("y", F.conv1d(torch.from_numpy(X1), torch.from_numpy(W1), padding=1).numpy())],
         attrs={"auto_pad": "SAME_UPPER"}, consts=("w",))
    P = f32(1, 2, 7, 7)
    case("maxpool", "MaxPool", [("x", P)],
         [("y", F.max_pool2d(torch.from_numpy(P), 3, stride=2, padding=1, ceil_mode=True).numpy())],
         attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})
    case("avgpool", "AveragePool", [("x", P)],
         [("y", F.avg_pool2d(torch.from_numpy(P), 3, stride=2, padding=1, count_include_pad=False).numpy())],
         attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    case("avgpool_incl", "AveragePool", [("x", P)],
         [("y", F.avg_pool2d(torch.from_numpy(P), 2, stride=2, padding=1, count_include_pad=True).numpy())],
         attrs={"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1})
    case("globalavgpool", "GlobalAveragePool", [("x", P)], [("y", P.mean(axis=(2, 3), keepdims=True))])
    sc, bi, mu, var = f32(2), f32(2), f32(2), f32(2, lo=0.5, hi=2)
    case("batchnorm", "BatchNormalization", [("x", P), ("s", sc), ("b", bi), ("m", mu), ("v", var)],
         [("y", ((P - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * sc[:, None, None]
                 + bi[:, None, None]).astype(np.float32))], consts=("s", "b", "m", "v"), atol=1e-5)
    L, gm, bt = f32(2, 3, 8), f32(8), f32(8)
    mean = L.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((L - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    case("layernorm", "LayerNormalization", [("x", L), ("g", gm), ("b", bt)],
         [("y", ((L - mean) * inv * gm + bt).astype(np.float32))], consts=("g", "b"), atol=1e-5)
    case("softmax", "Softmax", [("x", x)], [("y", softmax(x, -1))])
    case("softmax_axis1", "Softmax", [("x", x)], [("y", softmax(x, 1))], attrs={"axis": 1})
    case("softmax_opset11", "Softmax", [("x", x)], [("y", softmax(x.reshape(2, 15), 1).reshape(x.shape))], opset=11)
    case("reducemean", "ReduceMean", [("x", x)], [("y", x.mean(axis=(0, 2), keepdims=True))], attrs={"axes": [0, -1]})
    case("reducesum_input", "ReduceSum", [("x", x), ("ax", np.array([1], np.int64))],
         [("y", x.sum(axis=1, keepdims=False))], attrs={"keepdims": 0}, consts=("ax",))
    case("reducesum_all", "ReduceSum", [("x", x)], [("y", x.sum(keepdims=True).reshape(1, 1, 1))])
    case("reducemax", "ReduceMax", [("x", x)], [("y", x.max(axis=2))], attrs={"axes": [2], "keepdims": 0})
    # data movement
    case("reshape", "Reshape", [("x", x), ("s", np.array([0, -1], np.int64))], [("y", x.reshape(2, 15))],
         consts=("s",))
    case("transpose", "Transpose", [("x", x)], [("y", x.transpose(2, 0, 1))], attrs={"perm": [2, 0, 1]})
    x2 = f32(2, 4, 5)
    case("concat", "Concat", [("a", x), ("b", x2)], [("y", np.concatenate([x, x2], 1))], attrs={"axis": 1})
    case("split", "Split", [("x", x), ("s", np.array([2, 3], np.int64))],
         [("y0", x[:, :, :2]), ("y1", x[:, :, 2:])], attrs={"axis": -1}, consts=("s",))
    case("split_equal_opset11", "Split", [("x", x)], [("y0", x[:, :1]), ("y1", x[:, 1:2]), ("y2", x[:, 2:])],
         attrs={"axis": 1}, opset=11)
    S = f32(5, 6, 7)
    case("slice", "Slice", [("x", S), ("st", np.array([1, -1], np.int64)), ("en", np.array([4, -100], np.int64)),
                            ("ax", np.array([0, 2], np.int64)), ("sp", np.array([2, -2], np.int64))],
         [("y", S[1:4:2, :, 6::-2])], consts=("st", "en", "ax", "sp"))
    case("slice_opset9", "Slice", [("x", S)], [("y", S[:, 1:3])], attrs={"starts": [1], "ends": [3], "axes": [1]},
         opset=9)
    idx = np.array([[0, 2], [-1, 1]], np.int64)
    case("gather", "Gather", [("x", S), ("i", idx)], [("y", np.take(S, idx % 6, axis=1))], attrs={"axis": 1},
         consts=("i",))
    case("gather_scalar", "Gather", [("x", S), ("i", np.array(3, np.int64))], [("y", S[3])], consts=("i",))
    E = f32(3, 1)
    case("expand", "Expand", [("x", E), ("s", np.array([2, 1, 4], np.int64))],
         [("y", np.broadcast_to(E, (2, 3, 4)).copy())], consts=("s",))
    case("unsqueeze", "Unsqueeze", [("x", E), ("a", np.array([0, 3], np.int64))], [("y", E.reshape(1, 3, 1, 1))],
         consts=("a",))
    case("unsqueeze_opset11", "Unsqueeze", [("x", E)], [("y", E.reshape(3, 1, 1))], attrs={"axes": [-1]}, opset=11)
    case("squeeze", "Squeeze", [("x", E), ("a", np.array([1], np.int64))], [("y", E.reshape(3))], consts=("a",))
    case("flatten", "Flatten", [("x", x)], [("y", x.reshape(6, 5))], attrs={"axis": 2})
    case("cast_f2i", "Cast", [("x", x * 3)], [("y", np.trunc(x * 3).astype(np.int64))], attrs={"to": TensorProto.INT64})
    case("cast_i2f", "Cast", [("x", ia)], [("y", ia.astype(np.float32))], attrs={"to": TensorProto.FLOAT})
    case("cast_f16", "Cast", [("x", x)], [("y", x.astype(np.float16))], attrs={"to": TensorProto.FLOAT16})
    case("shape", "Shape", [("x", x)], [("y", np.array(x.shape, np.int64))])
    case("shape_slice", "Shape", [("x", x)], [("y", np.array(x.shape[1:], np.int64))], attrs={"start": 1})
    case("constantofshape", "ConstantOfShape", [("s", np.array([2, 3], np.int64))], [("y", np.full((2, 3), 7, np.int64))],
         attrs={"value": numpy_helper.from_array(np.array([7], np.int64))})
    case("range", "Range", [("s", np.array(1, np.int64)), ("l", np.array(10, np.int64)), ("d", np.array(3, np.int64))],
         [("y", np.arange(1, 10, 3, dtype=np.int64))])
    case("range_float", "Range", [("s", np.array(0.5, np.float32)), ("l", np.array(-1, np.float32)),
                                  ("d", np.array(-0.25, np.float32))], [("y", np.arange(0.5, -1, -0.25, dtype=np.float32))])
    cv = f32(2, 3)
    case("constant", "Constant", [], [("y", cv)], attrs={"value": numpy_helper.from_array(cv)})
    case("pad_reflect", "Pad", [("x", S[0]), ("p", np.array([1, 2, 1, 0], np.int64))],
         [("y", np.pad(S[0], ((1, 1), (2, 0)), mode="reflect"))], attrs={"mode": "reflect"}, consts=("p",))
    case("tile", "Tile", [("x", E), ("r", np.array([2, 3], np.int64))], [("y", np.tile(E, (2, 3)))], consts=("r",))
    case("argmax", "ArgMax", [("x", x)], [("y", x.argmax(axis=1))], attrs={"axis": 1, "keepdims": 0})
    # less common ops (eval_extra.c)
    Xt, Wt, Bt = f32(1, 4, 5, 6), f32(4, 3, 3, 2), f32(6)
    ref = F.conv_transpose2d(torch.from_numpy(Xt), torch.from_numpy(Wt), torch.from_numpy(Bt), stride=(2, 1),
                             padding=(1, 0), output_padding=(1, 0), groups=2, dilation=(1, 2)).numpy()
    case("convtranspose", "ConvTranspose", [("x", Xt), ("w", Wt), ("b", Bt)], [("y", ref)],
         attrs={"strides": [2, 1], "pads": [1, 0, 1, 0], "output_padding": [1, 0], "group": 2, "dilations": [1, 2]},
         consts=("w", "b"), atol=1e-5)
    T = f32(3, 7)
    tk = np.argsort(-T, axis=1, kind="stable")[:, :3]
    case("topk", "TopK", [("x", T), ("k", np.array([3], np.int64))],
         [("v", np.take_along_axis(T, tk, 1)), ("i", tk)], consts=("k",))
    G = f32(2, 3, 4)
    gi = np.array([[[1, 2]], [[0, 3]]], np.int64)
    case("gathernd", "GatherND", [("x", G), ("i", gi)], [("y", np.stack([G[0, 1, 2], G[1, 0, 3]]).reshape(2, 1))],
         attrs={"batch_dims": 1}, consts=("i",))
    sd, si, su = f32(4, 3), np.array([[2], [0]], np.int64), f32(2, 3)
    ref = sd.copy()
    ref[2] += su[0]
    ref[0] += su[1]
    case("scatternd_add", "ScatterND", [("x", sd), ("i", si), ("u", su)], [("y", ref)], attrs={"reduction": "add"},
         consts=("i",))
    ei, eu = np.array([[1, 0, 2], [0, 2, 1]], np.int64), f32(2, 3)
    ref = sd[:3].copy()
    for r_ in range(2):
        for c_ in range(3):
            ref[ei[r_, c_], c_] = eu[r_, c_]
    case("scatterelements", "ScatterElements", [("x", sd[:3].copy()), ("i", ei), ("u", eu)], [("y", ref)],
         consts=("i",))
    oi = np.array([[1, 4], [0, -1]], np.int64)
    case("onehot", "OneHot", [("i", oi), ("d", np.array(5, np.int64)), ("v", np.array([0.5, 2.0], np.float32))],
         [("y", np.where(np.eye(5, dtype=bool)[oi % 5], 2.0, 0.5).astype(np.float32))], consts=("d", "v"))
    D = f32(1, 8, 2, 3)
    case("depthtospace_crd", "DepthToSpace", [("x", D)],
         [("y", D.reshape(1, 2, 2, 2, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 4, 6))],
         attrs={"blocksize": 2, "mode": "CRD"})
    SD = f32(1, 2, 4, 6)
    case("spacetodepth", "SpaceToDepth", [("x", SD)],
         [("y", SD.reshape(1, 2, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3))],
         attrs={"blocksize": 2})
    case("eyelike", "EyeLike", [("x", f32(3, 4))], [("y", np.eye(3, 4, k=1, dtype=np.float32))], attrs={"k": 1})
    nz = (rng.random((3, 4)) > 0.5).astype(np.float32)
    case("nonzero", "NonZero", [("x", nz)], [("y", np.array(np.nonzero(nz), np.int64))])
    cm = np.array([True, False, True])
    case("compress", "Compress", [("x", G), ("c", cm)], [("y", np.compress(cm, G, axis=1))], attrs={"axis": 1},
         consts=("c",))
    RZ = f32(1, 2, 3, 4)
    case("resize_linear", "Resize", [("x", RZ), ("roi", np.array([], np.float32)), ("s", np.array([1, 1, 2, 1.5], np.float32))],
         [("y", F.interpolate(torch.from_numpy(RZ), size=(6, 6), mode="bilinear", align_corners=False).numpy())],
         attrs={"mode": "linear"}, consts=("roi", "s"), atol=1e-5)
    case("resize_nearest_sizes", "Resize", [("x", RZ), ("roi", np.array([], np.float32)), ("", None),
                                             ("sz", np.array([1, 2, 7, 9], np.int64))],
         [("y", F.interpolate(torch.from_numpy(RZ), size=(7, 9), mode="nearest").numpy())],
         attrs={"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
         consts=("roi", "sz"))
    LR = f32(2, 5, 3, 3)
    case("lrn", "LRN", [("x", LR)],
         [("y", F.local_response_norm(torch.from_numpy(LR), 3, alpha=1e-2, beta=0.75, k=1.0).numpy())],
         attrs={"size": 3, "alpha": 1e-2, "beta": 0.75, "bias": 1.0}, atol=1e-5)


def save_model_data(name, feeds, outs):
    write_bin(os.path.join(OUT, name + ".bin"), feeds, outs)


def torch_models():
    import torch
    import torch.nn as nn
    torch.manual_seed(0)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 8)

        def forward(self, x):
            return self.l3(nn.functional.gelu(self.l2(torch.relu(self.l1(x)))))

    def export(model, name, args, names, dyn, opset):
        model.eval()
        path = os.path.join(OUT, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, args, path, input_names=names, output_names=["out"], dynamic_axes=dyn,
                              opset_version=opset, do_constant_folding=False)
            out = model(*args)
        feeds = [(n, a.numpy()) for n, a in zip(names, args)]
        save_model_data(name, feeds, [("out", out.numpy())])

    export(MLP(), "mlp", (torch.randn(4, 16),), ["x"], {"x": {0: "batch"}, "out": {0: "batch"}}, 17)

    class Attn(nn.Module):  # GPT-2 style: fused qkv, causal mask buffer, tanh GELU, pre-norm
        def __init__(self, d, h, T):
            super().__init__()
            self.h, self.d = h, d
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(self.d, dim=2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class NewGELU(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Block(nn.Module):
        def __init__(self, d, h, T):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = Attn(d, h, T)
            self.fc, self.act, self.out = nn.Linear(d, 4 * d), NewGELU(), nn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(self.act(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=50, d=32, h=4, T=16, layers=2):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
            self.blocks = nn.ModuleList([Block(d, h, T) for _ in range(layers)])
            self.lnf = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.head(self.lnf(x))

    idx = torch.randint(0, 50, (2, 7))
    export(GPT(), "gpt2", (idx,), ["idx"], {"idx": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, 14)

    class BertLayer(nn.Module):  # HF-BERT style: separate q/k/v, additive mask, erf GELU, post-norm
        def __init__(self, d=32, h=4):
            super().__init__()
            self.h, self.dh = h, d // h
            self.q, self.k, self.v, self.o = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
            self.ff1, self.ff2 = nn.Linear(d, 64), nn.Linear(64, d)

        def heads(self, t):
            B, T, _ = t.size()
            return t.view(B, T, self.h, self.dh).permute(0, 2, 1, 3)

        def forward(self, x, bias):
            B, T, C = x.size()
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + bias
            a = torch.matmul(torch.softmax(s, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
            x = self.ln1(x + self.o(a))
            return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    class Bert(nn.Module):
        def __init__(self, vocab=40, d=32, T=16):
            super().__init__()
            self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
            self.ln = nn.LayerNorm(d, eps=1e-12)
            self.layers = nn.ModuleList([BertLayer(d) for _ in range(2)])

        def forward(self, ids, mask):
            T = ids.size(1)
            pos = torch.arange(T).unsqueeze(0).expand_as(ids)
            bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
            x = self.ln(self.emb(ids) + self.pos(pos))
            for l in self.layers:
                x = l(x, bias)
            return x

    ids = torch.randint(0, 40, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    export(Bert(), "bert", (ids, mask), ["ids", "mask"],
           {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, 12)

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
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (self.down(x) if self.down is not None else x))

    class CNN(nn.Module):  # ResNet-18 style at small width
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            self.l1, self.l2 = BasicBlock(8, 8, 1), BasicBlock(8, 16, 2)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.l2(self.l1(self.stem(x)))
            return self.fc(torch.flatten(self.pool(x), 1))

    cnn = CNN()
    for m in cnn.modules():  # non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    export(cnn, "cnn", (torch.randn(2, 3, 32, 32),), ["x"], {"x": {0: "batch"}, "out": {0: "batch"}}, 13)

    # LLaMA-style decoder (gen_models.py's: RMSNorm, rotary, 4 query heads on 2 K/V heads, causal mask, SwiGLU),
    # last so the models above keep their weights: the fused attention's kv_rep in the host evaluator
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_models
    torch.manual_seed(1)
    idx = torch.randint(0, 50, (2, 12))
    export(gen_models.Llama(50, 32, 4, 2, 48, 2, 16), "llama", (idx,), ["idx"],
           {"idx": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, 14)


def fold_model():
    """y = x * (c1 + Reshape(c2)) + Shape-derived constant; the constant part folds to one initializer."""
    c1 = f32(2, 3)
    c2 = f32(6)
    x = f32(4, 2, 3)
    nodes = [
        helper.make_node("Reshape", ["c2", "shp"], ["c2r"]),
        helper.make_node("Add", ["c1", "c2r"], ["s"]),
        helper.make_node("Exp", ["s"], ["e"]),
        helper.make_node("Mul", ["x", "e"], ["m"]),
        helper.make_node("Shape", ["c1"], ["sh"]),
        helper.make_node("Cast", ["sh"], ["shf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["shf"], ["tot"], keepdims=0),
        helper.make_node("Add", ["m", "tot"], ["y"]),
        helper.make_node("Neg", ["x"], ["unused"]),  # dead code
    ]
    inits = [numpy_helper.from_array(c1, "c1"), numpy_helper.from_array(c2, "c2"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "shp")]
    g = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, os.path.join(OUT, "fold.onnx"))
    y = x * np.exp(c1 + c2.reshape(2, 3)) + 5.0
    save_model_data("fold", [("x", x)], [("y", y.astype(np.float32))])


def bad_models():
    def save(name, nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        onnx.save(m, os.path.join(OUT, "bad_%s.onnx" % name))

    vi = helper.make_tensor_value_info
    F = TensorProto.FLOAT
    save("unknown_op", [helper.make_node("Relu", ["x"], ["r"], name="first"),
                        helper.make_node("FrobnicateTensor", ["r"], ["y"], name="frob")],
         [vi("x", F, [2, 3])], [vi("y", F, None)])
    save("missing_input", [helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
         [vi("x", F, [2, 3])], [vi("y", F, None)])
    save("shape_mismatch", [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
         [vi("a", F, [2, 3]), vi("b", F, [4, 5])], [vi("y", F, None)])
    t = TensorProto()
    t.name, t.data_type = "w", F
    t.dims.extend([4])
    t.raw_data = b"\0" * 10
    save("raw_data_len", [helper.make_node("Add", ["x", "w"], ["y"], name="addw")],
         [vi("x", F, [4])], [vi("y", F, None)], [t])
    save("cycle", [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                   helper.make_node("Relu", ["a"], ["b"], name="n2")],
         [vi("x", F, [2])], [vi("a", F, None)])
    big = TensorProto()
    big.name, big.data_type = "huge", F
    big.dims.extend([1 << 40, 1 << 40])
    save("dims_overflow", [helper.make_node("Add", ["x", "huge"], ["y"], name="addh")],
         [vi("x", F, [1])], [vi("y", F, None)], [big])
    save("opset18", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)], opset=18)
    save("reshape_bad", [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
         [vi("x", F, [2, 3])], [vi("y", F, None)], [numpy_helper.from_array(np.array([4, 2], np.int64), "s")])


def main():
    global OUT
    if len(sys.argv) != 2:
        sys.exit("usage: gen_onnx_models.py OUTDIR")
    OUT = os.path.join(sys.argv[1], "onnx")
    os.makedirs(OUT, exist_ok=True)
    op_cases()
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("\n".join(CASES) + "\n")
    fold_model()
    bad_models()
    torch_models()
    print("gen_onnx_models: %d op cases, 4 torch models, fold and bad models in %s" % (len(CASES), OUT))


if __name__ == "__main__":
    main()
