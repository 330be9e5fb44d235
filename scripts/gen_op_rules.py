#!/usr/bin/env python3
"""Small one-op ONNX models with random shapes for tests/compiler/test_op_rules.c (the registry-wide check that
every op the device runs agrees with the host evaluator, after ggml's test-backend-ops).

Usage: gen_op_rules.py OUTDIR SEED. Writes OUTDIR/<case>.onnx and OUTDIR/cases.tsv, one line per case:
    case <TAB> op <TAB> input domains (one per graph input, comma-separated)
where a domain tells the test how to draw that input: any (uniform [-2, 2]), pos ([0.1, 3]), unit ([-0.9, 0.9]),
ge1 ([1.1, 3]), bool, int:LO:HI (integers in [LO, HI)). Shapes come from SEED, so each run of the test sees other
shapes; attribute-like inputs are constants (initializers), as exporters emit them. Several cases per op reach
each of its compiler rules (the fast special case and the general one). Only onnx.helper and numpy: the reference
is tern's own host evaluator, run by the C test."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
os.makedirs(out, exist_ok=True)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
rows = []


def shape(rank_lo=1, rank_hi=4, lo=1, hi=6):
    return [int(d) for d in rng.integers(lo, hi + 1, size=int(rng.integers(rank_lo, rank_hi + 1)))]


def const(name, a, dtype=None):
    return numpy_helper.from_array(np.asarray(a, dtype=dtype), name)


def case(name, op, inputs, outputs, attrs=None, consts=(), node_inputs=None, node_outputs=None, opset=17,
         extra_nodes=()):
    """inputs: [(name, elem type, shape, domain)]; outputs: [(name, elem type)] (shapes left to inference)."""
    vi = helper.make_tensor_value_info
    ins = [vi(n, t, s) for n, t, s, _ in inputs]
    outs = [vi(n, t, None) for n, t in outputs]
    node = helper.make_node(op, node_inputs if node_inputs is not None else [n for n, _, _, _ in inputs],
                            node_outputs if node_outputs is not None else [n for n, _ in outputs], name=name,
                            **(attrs or {}))
    g = helper.make_graph(list(extra_nodes) + [node], name, ins, outs, initializer=list(consts))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, os.path.join(out, name + ".onnx"))
    rows.append("%s\t%s\t%s" % (name, op, ",".join(d for _, _, _, d in inputs)))


def unary(op, domain="any", attrs=None, opset=17):
    s = shape()
    case(op, op, [("x", F, s, domain)], [("y", F)], attrs, opset=opset)


# ---- elementwise unary ----
for op in ["Neg", "Abs", "Sign", "Relu", "Exp", "Tanh", "Sigmoid", "Erf", "Floor", "Ceil", "Round", "Sin", "Cos",
           "Atan", "Sinh", "Cosh", "Asinh", "Softplus", "Softsign", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
           "HardSwish", "Identity"]:
    unary(op)
for op in ["Sqrt", "Log", "Reciprocal"]:
    unary(op, "pos")
for op in ["Asin", "Acos", "Atanh", "Tan"]:
    unary(op, "unit")
unary("Acosh", "ge1")
unary("Celu", attrs={"alpha": 1.5})
unary("ThresholdedRelu", attrs={"alpha": 0.5})
unary("Shrink", attrs={"lambd": 0.7, "bias": 0.2})
unary("Gelu", opset=17)
s = shape()
case("Clip", "Clip", [("x", F, s, "any")], [("y", F)], consts=[const("lo", -0.5, np.float32), const("hi", 0.8, np.float32)],
     node_inputs=["x", "lo", "hi"])
s = shape()
case("Dropout", "Dropout", [("x", F, s, "any")], [("y", F)])
s = shape()
case("Not", "Not", [("x", B, s, "bool")], [("y", B)])
for op in ["IsNaN", "IsInf"]:
    s = shape()
    case(op, op, [("x", F, s, "any")], [("y", B)])
s = shape()
case("Cast", "Cast", [("x", F, s, "any")], [("y", F)], {"to": TensorProto.FLOAT16})
s = shape()
case("Cast_to_int", "Cast", [("x", F, s, "any")], [("y", TensorProto.INT32)], {"to": TensorProto.INT32})
s = shape()
case("CastLike", "CastLike", [("x", F, s, "any")], [("y", TensorProto.INT32)],
     consts=[const("like", np.zeros([1], np.int32))], node_inputs=["x", "like"])
s = shape(2, 4, 2, 6)
case("Trilu", "Trilu", [("x", F, s, "any")], [("y", F)], {"upper": int(rng.integers(0, 2))})

# ---- elementwise binary (b broadcast from a trailing or a size-1 shape) ----


def bshape(a):
    b = list(a[int(rng.integers(0, len(a))):])
    return [1 if rng.random() < 0.3 else d for d in b] or [1]


for op in ["Add", "Sub", "Mul", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]:
    a = shape()
    outt = B if op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual") else F
    case(op, op, [("a", F, a, "int:-3:4" if op == "Equal" else "any"), ("b", F, bshape(a), "int:-3:4" if op == "Equal" else "any")],
         [("y", outt)])
a = shape()
case("Div", "Div", [("a", F, a, "any"), ("b", F, bshape(a), "pos")], [("y", F)])
a = shape()
case("Div_int", "Div", [("a", TensorProto.INT32, a, "int:-20:20"), ("b", TensorProto.INT32, bshape(a), "int:1:5")],
     [("y", TensorProto.INT32)])
for op in ["And", "Or", "Xor"]:
    a = shape()
    case(op, op, [("a", B, a, "bool"), ("b", B, bshape(a), "bool")], [("y", B)])
a = shape()
case("Pow", "Pow", [("a", F, a, "pos")], [("y", F)], consts=[const("e", 2.0, np.float32)], node_inputs=["a", "e"])
a = shape()
case("Pow_tensor", "Pow", [("a", F, a, "pos"), ("b", F, bshape(a), "unit")], [("y", F)])
a = shape()
case("Mod", "Mod", [("a", TensorProto.INT32, a, "int:-20:20"), ("b", TensorProto.INT32, bshape(a), "int:1:6")],
     [("y", TensorProto.INT32)])
a = shape()
case("BitShift", "BitShift", [("a", TensorProto.UINT8, a, "int:0:16"), ("b", TensorProto.UINT8, bshape(a), "int:0:4")],
     [("y", TensorProto.UINT8)], {"direction": "LEFT"})
a = shape(2, 4)
case("PRelu", "PRelu", [("x", F, a, "any")], [("y", F)],
     consts=[const("slope", rng.uniform(0, 0.5, size=[a[1]] + [1] * (len(a) - 2)).astype(np.float32))],
     node_inputs=["x", "slope"])
for op in ["Sum", "Mean", "Max", "Min"]:
    a = shape()
    case(op + "_3", op, [("a", F, a, "any"), ("b", F, bshape(a), "any"), ("c", F, a, "any")], [("y", F)])
a = shape()
case("Where", "Where", [("c", B, bshape(a), "bool"), ("a", F, a, "any"), ("b", F, bshape(a), "any")], [("y", F)])

# ---- axis ops: the last axis (softmax.row) and another one (the general rule) ----
for op in ["Softmax", "LogSoftmax", "Hardmax"]:
    s = shape(2, 4)
    case(op, op, [("x", F, s, "any")], [("y", F)], {"axis": -1})
    case(op + "_axis0", op, [("x", F, s, "any")], [("y", F)], {"axis": 0})
for op in ["ArgMax", "ArgMin"]:
    s = shape(1, 4)
    case(op, op, [("x", F, s, "any")], [("y", I64)], {"axis": int(rng.integers(0, len(s))), "keepdims": 1})
s = shape(1, 3, 2, 6)
case("TopK", "TopK", [("x", F, s, "any")], [("v", F), ("i", I64)], {"axis": -1},
     consts=[const("k", [int(rng.integers(1, s[-1] + 1))], np.int64)], node_inputs=["x", "k"])
s = shape()
case("CumSum", "CumSum", [("x", F, s, "any")], [("y", F)], {"exclusive": int(rng.integers(0, 2))},
     consts=[const("ax", int(rng.integers(0, len(s))), np.int64)], node_inputs=["x", "ax"])

# ---- reductions: the last axis alone (reduce.last) and other axes (the general rule) ----
for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]:
    s = shape(2, 4)
    s[0] = max(s[0], 2)  # an axis of one element is reduce.one_element's (below)
    dom = "pos" if op in ("ReduceLogSum", "ReduceProd") else "any"
    if op == "ReduceSum":
        case(op + "_last", op, [("x", F, s, dom)], [("y", F)], {"keepdims": 1},
             consts=[const("axes", [-1], np.int64)], node_inputs=["x", "axes"])
        case(op, op, [("x", F, s, dom)], [("y", F)], {"keepdims": 0},
             consts=[const("axes", [0], np.int64)], node_inputs=["x", "axes"])
    else:
        case(op + "_last", op, [("x", F, s, dom)], [("y", F)], {"axes": [-1], "keepdims": 1})
        case(op, op, [("x", F, s, dom)], [("y", F)], {"axes": [0], "keepdims": 0})

# rows longer than one SBUF tile row holds (lower_reduce_long.c: more than 32,768 elements per output)
for op in ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceMax", "ReduceMin"]:
    s = [int(rng.integers(1, 3)), 40001 + int(rng.integers(0, 2000))]
    if op == "ReduceSum":
        case(op + "_long", op, [("x", F, s, "any")], [("y", F)], {"keepdims": 1},
             consts=[const("axes", [-1], np.int64)], node_inputs=["x", "axes"])
    else:
        case(op + "_long", op, [("x", F, s, "any")], [("y", F)], {"axes": [-1], "keepdims": 1})

# a reduction over axes of one element in all (the batch-1 gradient's sum over its batch axis): a copy
for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"]:
    s = [1] + shape(1, 3, 2, 6)
    if op == "ReduceSum":
        case(op + "_one", op, [("x", F, s, "any")], [("y", F)], {"keepdims": 0},
             consts=[const("axes", [0], np.int64)], node_inputs=["x", "axes"])
    else:
        case(op + "_one", op, [("x", F, s, "any")], [("y", F)], {"axes": [0], "keepdims": 0})

# one element per output (a size-1 axis that is not the last: lower_reduce_long.c's copy)
for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"]:
    s = [1] + shape(1, 3)
    if op == "ReduceSum":
        case(op + "_one", op, [("x", F, s, "any")], [("y", F)], {"keepdims": 0},
             consts=[const("axes", [0], np.int64)], node_inputs=["x", "axes"])
    else:
        case(op + "_one", op, [("x", F, s, "any")], [("y", F)], {"axes": [0], "keepdims": 0})

# reductions over leading axes only with a column per partition (lower_reduce.c's reduce.leading: a batched linear
# layer's weight and bias gradients); fixed shapes (no draw, so the cases after keep theirs): several blocks of
# rows per [128, 1024] chunk, a chunk of fewer columns and one of fewer partitions, a size-1 axis between
for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]:
    if op == "ReduceSum":
        case(op + "_leading", op, [("x", F, [10, 1, 140000], "any")], [("y", F)], {"keepdims": 1},
             consts=[const("axes", [0, 1], np.int64)], node_inputs=["x", "axes"])
    else:
        case(op + "_leading", op, [("x", F, [4, 3, 150], "any")], [("y", F)], {"axes": [0, 1], "keepdims": 0})

# ---- layout ----
s = shape(2, 4)
case("Reshape", "Reshape", [("x", F, s, "any")], [("y", F)], consts=[const("sh", [-1], np.int64)],
     node_inputs=["x", "sh"])
case("Flatten", "Flatten", [("x", F, s, "any")], [("y", F)], {"axis": 1})
case("Unsqueeze", "Unsqueeze", [("x", F, s, "any")], [("y", F)], consts=[const("ax", [0], np.int64)],
     node_inputs=["x", "ax"])
s1 = [1] + shape(1, 3)
case("Squeeze", "Squeeze", [("x", F, s1, "any")], [("y", F)], consts=[const("ax", [0], np.int64)],
     node_inputs=["x", "ax"])
s = shape(2, 4)
case("Transpose", "Transpose", [("x", F, s, "any")], [("y", F)], {"perm": [int(p) for p in rng.permutation(len(s))]})
s = shape(2, 4)
s2 = list(s)
s2[1] = int(rng.integers(1, 5))
case("Concat", "Concat", [("a", F, s, "any"), ("b", F, s2, "any")], [("y", F)], {"axis": 1})
s = shape(1, 3)
s[0] = 2 * int(rng.integers(1, 4))
case("Split", "Split", [("x", F, s, "any")], [("y0", F), ("y1", F)], {"axis": 0},
     consts=[const("sp", [s[0] // 2, s[0] // 2], np.int64)], node_inputs=["x", "sp"])
s = shape(2, 4, 3, 7)
case("Slice", "Slice", [("x", F, s, "any")], [("y", F)],
     consts=[const("st", [1], np.int64), const("en", [s[-1]], np.int64), const("ax", [-1], np.int64),
             const("sp", [1], np.int64)], node_inputs=["x", "st", "en", "ax", "sp"])
s = [1] + shape(1, 3)
case("Expand", "Expand", [("x", F, s, "any")], [("y", F)], consts=[const("sh", [3] + s[1:], np.int64)],
     node_inputs=["x", "sh"])
s = shape(1, 3)
case("Tile", "Tile", [("x", F, s, "any")], [("y", F)],
     consts=[const("rep", [int(r) for r in rng.integers(1, 3, size=len(s))], np.int64)], node_inputs=["x", "rep"])
s = shape(2, 4)
case("Pad", "Pad", [("x", F, s, "any")], [("y", F)], {"mode": "constant"},
     consts=[const("pads", [int(p) for p in rng.integers(0, 3, size=2 * len(s))], np.int64)],
     node_inputs=["x", "pads"])
n, cc, h, w = 1, 4 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 3))
case("DepthToSpace", "DepthToSpace", [("x", F, [n, cc, h, w], "any")], [("y", F)], {"blocksize": 2})
case("SpaceToDepth", "SpaceToDepth", [("x", F, [n, cc, h, w], "any")], [("y", F)], {"blocksize": 2})
case("Resize", "Resize", [("x", F, [1, 2, h, w], "any")], [("y", F)], {"mode": "nearest"},
     consts=[const("roi", np.zeros([0], np.float32)), const("sc", [1, 1, 2, 2], np.float32)],
     node_inputs=["x", "roi", "sc"])
case("Upsample", "Upsample", [("x", F, [1, 2, h, w], "any")], [("y", F)], {"mode": "nearest"},
     consts=[const("sc", [1, 1, 2, 2], np.float32)], node_inputs=["x", "sc"], opset=9)
t, bb = int(rng.integers(2, 5)), int(rng.integers(1, 4))
case("ReverseSequence", "ReverseSequence", [("x", F, [t, bb, 3], "any")], [("y", F)],
     {"time_axis": 0, "batch_axis": 1},
     consts=[const("len", [int(v) for v in rng.integers(1, t + 1, size=bb)], np.int64)], node_inputs=["x", "len"])

# ---- index ----
s = shape(2, 3)
case("Gather", "Gather", [("x", F, s, "any")], [("y", F)], {"axis": 0},
     consts=[const("ix", [int(v) for v in rng.integers(0, s[0], size=3)], np.int64)], node_inputs=["x", "ix"])
case("Gather_runtime", "Gather", [("x", F, s, "any"), ("ix", I64, [4], "int:0:%d" % s[1])], [("y", F)], {"axis": 1})
s = shape(2, 3)
case("GatherElements", "GatherElements", [("x", F, s, "any")], [("y", F)], {"axis": 0},
     consts=[const("ix", rng.integers(0, s[0], size=s), np.int64)], node_inputs=["x", "ix"])
s = shape(2, 3)
case("GatherND", "GatherND", [("x", F, s, "any")], [("y", F)],
     consts=[const("ix", np.stack([rng.integers(0, s[0], size=3), rng.integers(0, s[1], size=3)], 1), np.int64)],
     node_inputs=["x", "ix"])
s = shape(2, 3, 2, 6)
case("ScatterND", "ScatterND", [("x", F, s, "any"), ("u", F, [2] + s[1:], "any")], [("y", F)],
     consts=[const("ix", [[0], [s[0] - 1]], np.int64)], node_inputs=["x", "ix", "u"])
rows_ = 8192 + int(rng.integers(0, 100))  # a table of at least GRAPH_SCATTER_ROWS_MIN rows: the row scatter rule
case("ScatterND_add", "ScatterND", [("x", F, [rows_, 4], "any"), ("u", F, [3, 4], "any")], [("y", F)],
     {"reduction": "add"}, consts=[const("ix", [[0], [rows_ - 1], [0]], np.int64)], node_inputs=["x", "ix", "u"],
     opset=16)
s = shape(2, 3, 2, 6)
idx = np.stack([rng.permutation(s[0])[:1] for _ in range(s[1])], 1)
case("ScatterElements", "ScatterElements", [("x", F, s, "any"), ("u", F, [1, s[1]] + s[2:], "any")], [("y", F)],
     {"axis": 0}, consts=[const("ix", np.broadcast_to(idx.reshape([1, s[1]] + [1] * (len(s) - 2)),
                                                       [1, s[1]] + s[2:]), np.int64)],
     node_inputs=["x", "ix", "u"])
case("Scatter", "Scatter", [("x", F, s, "any"), ("u", F, [1, s[1]] + s[2:], "any")], [("y", F)],
     {"axis": 0}, consts=[const("ix", np.broadcast_to(idx.reshape([1, s[1]] + [1] * (len(s) - 2)),
                                                       [1, s[1]] + s[2:]), np.int64)],
     node_inputs=["x", "ix", "u"], opset=10)
d = int(rng.integers(2, 7))
case("OneHot", "OneHot", [("ix", I64, [int(rng.integers(1, 6))], "int:0:%d" % d)], [("y", F)],
     consts=[const("depth", [d], np.int64), const("vals", [0.0, 1.0], np.float32)],
     node_inputs=["ix", "depth", "vals"])
case("EyeLike", "EyeLike", [("x", F, shape(2, 2), "any")], [("y", F)], {"k": int(rng.integers(-1, 2))})

# ---- conv, pools, norms ----
n, c_in, h, w = 1, int(rng.integers(1, 4)), int(rng.integers(4, 8)), int(rng.integers(4, 8))
co = int(rng.integers(1, 5))
case("Conv", "Conv", [("x", F, [n, c_in, h, w], "any")], [("y", F)], {"pads": [1, 1, 1, 1]},
     consts=[const("w", rng.standard_normal([co, c_in, 3, 3]).astype(np.float32)),
             const("b", rng.standard_normal([co]).astype(np.float32))], node_inputs=["x", "w", "b"])
case("ConvTranspose", "ConvTranspose", [("x", F, [n, c_in, h, w], "any")], [("y", F)], {"strides": [2, 2]},
     consts=[const("w", rng.standard_normal([c_in, co, 3, 3]).astype(np.float32))], node_inputs=["x", "w"])
case("MaxPool", "MaxPool", [("x", F, [n, c_in, h, w], "any")], [("y", F)], {"kernel_shape": [2, 2]})
case("AveragePool", "AveragePool", [("x", F, [n, c_in, h, w], "any")], [("y", F)],
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]})
case("GlobalAveragePool", "GlobalAveragePool", [("x", F, [n, c_in, h, w], "any")], [("y", F)])
case("GlobalMaxPool", "GlobalMaxPool", [("x", F, [n, c_in, h, w], "any")], [("y", F)])
pc = [const(nm, rng.uniform(lo, 1.5, size=[c_in]).astype(np.float32)) for nm, lo in
      (("s", 0.5), ("bb", -1.0), ("m", -1.0), ("v", 0.5))]
case("BatchNormalization", "BatchNormalization", [("x", F, [n, c_in, h, w], "any")], [("y", F)], consts=pc,
     node_inputs=["x", "s", "bb", "m", "v"])
case("InstanceNormalization", "InstanceNormalization", [("x", F, [n, c_in, h, w], "any")], [("y", F)],
     consts=pc[:2], node_inputs=["x", "s", "bb"])
s = shape(3, 4, 2, 6)
case("LayerNormalization", "LayerNormalization", [("x", F, s, "any")], [("y", F)], {"axis": -1},
     consts=[const("g", rng.uniform(0.5, 1.5, size=[s[-1]]).astype(np.float32)),
             const("be", rng.uniform(-1, 1, size=[s[-1]]).astype(np.float32))], node_inputs=["x", "g", "be"])
case("LayerNormalization_axis1", "LayerNormalization", [("x", F, s, "any")], [("y", F)], {"axis": 1},
     consts=[const("g", rng.uniform(0.5, 1.5, size=s[1:]).astype(np.float32))], node_inputs=["x", "g"])
case("LRN", "LRN", [("x", F, [n, c_in + 2, h, w], "any")], [("y", F)], {"size": 3})
case("MeanVarianceNormalization", "MeanVarianceNormalization", [("x", F, [n, c_in, h, w], "any")], [("y", F)])

# ---- linear ----
m_, k_, n_ = int(rng.integers(1, 9)), int(rng.integers(1, 17)), int(rng.integers(1, 9))
case("MatMul", "MatMul", [("a", F, [2, m_, k_], "any")], [("y", F)],
     consts=[const("w", rng.standard_normal([k_, n_]).astype(np.float32))], node_inputs=["a", "w"])
case("MatMul_runtime", "MatMul", [("a", F, [2, m_, k_], "any"), ("b", F, [k_, n_], "any")], [("y", F)])
case("Gemm", "Gemm", [("a", F, [m_, k_], "any")], [("y", F)],
     consts=[const("w", rng.standard_normal([k_, n_]).astype(np.float32)),
             const("c", rng.standard_normal([n_]).astype(np.float32))], node_inputs=["a", "w", "c"])
case("Gemm_noc", "Gemm", [("a", F, [m_, k_], "any")], [("y", F)], {"transB": 1},  # no C: stays a Gemm
     consts=[const("w", rng.standard_normal([n_, k_]).astype(np.float32))], node_inputs=["a", "w"])
case("Gemm_attrs", "Gemm", [("a", F, [k_, m_], "any")], [("y", F)], {"transA": 1, "alpha": 0.5, "beta": 2.0},
     consts=[const("w", rng.standard_normal([k_, n_]).astype(np.float32)),
             const("c", rng.standard_normal([n_]).astype(np.float32))], node_inputs=["a", "w", "c"])
case("Einsum", "Einsum", [("a", F, [2, m_, k_], "any"), ("b", F, [2, k_, n_], "any")], [("y", F)],
     {"equation": "bij,bjk->bik"})

# ---- recurrent (expanded into primitive rows at shape inference) ----
t, bb, inp, hid = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
for op, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
    case(op, op, [("x", F, [t, bb, inp], "unit")], [("y", F)], {"hidden_size": hid},
         consts=[const("W", (0.5 * rng.standard_normal([1, gates * hid, inp])).astype(np.float32)),
                 const("R", (0.5 * rng.standard_normal([1, gates * hid, hid])).astype(np.float32))],
         node_inputs=["x", "W", "R"])

# ---- losses ----
nb, ncls = int(rng.integers(1, 5)), int(rng.integers(2, 6))
case("SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLoss", [("x", F, [nb, ncls], "any")], [("y", F)],
     consts=[const("lab", rng.integers(0, ncls, size=[nb]), np.int64)], node_inputs=["x", "lab"])
case("NegativeLogLikelihoodLoss", "NegativeLogLikelihoodLoss", [("x", F, [nb, ncls], "any")], [("y", F)],
     consts=[const("lab", rng.integers(0, ncls, size=[nb]), np.int64)], node_inputs=["x", "lab"])

# ---- control: If with a constant condition (inlined) ----
s = shape()
then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                           [helper.make_tensor_value_info("t", F, None)])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                           [helper.make_tensor_value_info("e", F, None)])
case("If", "If", [("x", F, s, "any")], [("y", F)], {"then_branch": then_g, "else_branch": else_g},
     consts=[const("cond", bool(rng.integers(0, 2)), np.bool_)], node_inputs=["cond"])

with open(os.path.join(out, "cases.tsv"), "w") as f:
    f.write("\n".join(rows) + "\n")
