"""Gradient conformance cases for tests/train/test_grad_conformance.sh.

gen OUTDIR: for every case, a small ONNX model (opset 17) whose float initializers are the op's operands, with a
scalar output loss = ReduceSum(op(...) * R) (R a random constant, itself trained: its gradient is op(...)), and
PyTorch autograd's gradient of that loss for every float initializer (OUTDIR/<case>/ref/<name>.npy).
check OUTDIR: compares tern's gradients (OUTDIR/<case>/tern/<name>.npy, from `tern train --dump-grads`) with the
references and prints one row per case and `grad_tests: P passed, F failed`.

The rule: max |tern - torch| <= 1e-4 * max(max |torch|, 1e-3) per tensor (fp32; differences come only from
summation order in matmuls and reductions)."""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1234)
F = torch.nn.functional


def rnd(*shape, pos=False):
    a = rng.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if pos else a


# name: (op nodes builder, params {name: array}, torch fn(params) -> y, int constants {name: array})
def node(op, ins, out="y", **attrs):
    return helper.make_node(op, ins, [out], **attrs)


CASES = []


def case(name, nodes, params, fn, consts=None):
    CASES.append((name, nodes, params, fn, consts or {}))


def ew(op, torch_fn, shape_a, shape_b=None, pos_b=False, pos_a=False):
    ps = {"a": rnd(*shape_a, pos=pos_a)}
    ins = ["a"]
    if shape_b is not None:
        ps["b"] = rnd(*shape_b, pos=pos_b)
        ins.append("b")
    return [node(op, ins)], ps, torch_fn


for op, fn in [("Add", lambda p: p["a"] + p["b"]), ("Sub", lambda p: p["a"] - p["b"]),
               ("Mul", lambda p: p["a"] * p["b"])]:
    case(f"{op}_same", *ew(op, fn, (4, 5), (4, 5)))
    case(f"{op}_broadcast", *ew(op, fn, (3, 1, 5), (4, 5)))
case("Div_broadcast", *ew("Div", lambda p: p["a"] / p["b"], (3, 4), (1, 4), pos_b=True))
case("Div_same", *ew("Div", lambda p: p["a"] / p["b"], (2, 3, 4), (2, 3, 4), pos_b=True))
case("Sum_3", [node("Sum", ["a", "b", "c"])], {"a": rnd(4, 3), "b": rnd(3), "c": rnd(1, 3)},
     lambda p: p["a"] + p["b"] + p["c"])
for op, fn, pos in [("Relu", torch.relu, False), ("Sigmoid", torch.sigmoid, False), ("Tanh", torch.tanh, False),
                    ("Exp", torch.exp, False), ("Log", torch.log, True), ("Sqrt", torch.sqrt, True),
                    ("Reciprocal", torch.reciprocal, True), ("Neg", torch.neg, False), ("Abs", torch.abs, False),
                    ("Erf", torch.erf, False), ("Softplus", F.softplus, False)]:
    case(op, [node(op, ["a"])], {"a": rnd(6, 7, pos=pos)}, (lambda f: lambda p: f(p["a"]))(fn))
case("LeakyRelu", [node("LeakyRelu", ["a"], alpha=0.2)], {"a": rnd(5, 6)}, lambda p: F.leaky_relu(p["a"], 0.2))
case("Pow_2", [node("Pow", ["a", "e"])], {"a": rnd(4, 6)}, lambda p: p["a"] ** 2,
     {"e": np.array(2.0, dtype=np.float32)})
case("Pow_3", [node("Pow", ["a", "e"])], {"a": rnd(4, 6)}, lambda p: p["a"] ** 3,
     {"e": np.array(3.0, dtype=np.float32)})
case("Pow_1.5", [node("Pow", ["a", "e"])], {"a": rnd(4, 6, pos=True)}, lambda p: p["a"] ** 1.5,
     {"e": np.array(1.5, dtype=np.float32)})
# GELU as PyTorch exports it at opset 17: x * 0.5 * (1 + erf(x / sqrt(2)))
case("Gelu_erf_decomposed",
     [node("Div", ["a", "s2"], "t0"), node("Erf", ["t0"], "t1"), node("Add", ["t1", "one"], "t2"),
      node("Mul", ["a", "t2"], "t3"), node("Mul", ["t3", "half"], "y")],
     {"a": rnd(8, 16)}, lambda p: F.gelu(p["a"]),
     {"s2": np.array(np.sqrt(2.0), dtype=np.float32), "one": np.array(1.0, dtype=np.float32),
      "half": np.array(0.5, dtype=np.float32)})
cond = rng.random((4, 5)) > 0.5
case("Where", [node("Where", ["c", "a", "b"])], {"a": rnd(4, 5), "b": rnd(1, 5)},
     lambda p: torch.where(torch.from_numpy(cond), p["a"], p["b"]), {"c": cond})
case("MatMul_2d", [node("MatMul", ["a", "b"])], {"a": rnd(5, 7), "b": rnd(7, 3)}, lambda p: p["a"] @ p["b"])
case("MatMul_batched", [node("MatMul", ["a", "b"])], {"a": rnd(2, 4, 6), "b": rnd(2, 6, 5)},
     lambda p: p["a"] @ p["b"])
# b's batch dims broadcast (a trailing part of the output's); the backward's A^T dY then reads an operand with a
# size-1 batch axis, which the gradient rule expands. (A forward MatMul whose first operand is broadcast, such as
# [2, 1, 4, 6] x [3, 6, 5], is computed wrongly by the compiler today: not a training case.)
case("MatMul_broadcast", [node("MatMul", ["a", "b"])], {"a": rnd(2, 3, 4, 6), "b": rnd(3, 6, 5)},
     lambda p: p["a"] @ p["b"])
case("MatMul_broadcast_1", [node("MatMul", ["a", "b"])], {"a": rnd(2, 3, 4, 6), "b": rnd(1, 6, 5)},
     lambda p: p["a"] @ p["b"])
case("MatMul_weight_shared", [node("MatMul", ["a", "b"])], {"a": rnd(3, 4, 6), "b": rnd(6, 5)},
     lambda p: p["a"] @ p["b"])
case("Gemm_linear", [node("Gemm", ["a", "b", "c"], transB=1)], {"a": rnd(4, 6), "b": rnd(5, 6), "c": rnd(5)},
     lambda p: p["a"] @ p["b"].T + p["c"])
case("Gemm_transA_alpha_beta", [node("Gemm", ["a", "b", "c"], transA=1, alpha=0.5, beta=2.0)],
     {"a": rnd(6, 4), "b": rnd(6, 5), "c": rnd(4, 5)}, lambda p: 0.5 * (p["a"].T @ p["b"]) + 2.0 * p["c"])
case("Gemm_transA_transB", [node("Gemm", ["a", "b", "c"], transA=1, transB=1)],
     {"a": rnd(6, 4), "b": rnd(5, 6), "c": rnd(1, 5)}, lambda p: p["a"].T @ p["b"].T + p["c"])
case("Gemm_plain", [node("Gemm", ["a", "b"])], {"a": rnd(3, 7), "b": rnd(7, 2)}, lambda p: p["a"] @ p["b"])
case("Softmax_last", [node("Softmax", ["a"], axis=-1)], {"a": rnd(3, 4, 9)}, lambda p: torch.softmax(p["a"], -1))
case("Softmax_axis1", [node("Softmax", ["a"], axis=1)], {"a": rnd(3, 6, 5)}, lambda p: torch.softmax(p["a"], 1))
case("LogSoftmax_last", [node("LogSoftmax", ["a"], axis=-1)], {"a": rnd(4, 10)},
     lambda p: torch.log_softmax(p["a"], -1))
case("Reshape", [node("Reshape", ["a", "s"])], {"a": rnd(2, 3, 4)}, lambda p: p["a"].reshape(6, 4),
     {"s": np.array([6, 4], dtype=np.int64)})
case("Flatten", [node("Flatten", ["a"], axis=1)], {"a": rnd(2, 3, 4)}, lambda p: p["a"].reshape(2, 12))
case("Transpose", [node("Transpose", ["a"], perm=[1, 2, 0])], {"a": rnd(2, 3, 4)},
     lambda p: p["a"].permute(1, 2, 0))
case("Unsqueeze", [node("Unsqueeze", ["a", "ax"])], {"a": rnd(3, 4)}, lambda p: p["a"].unsqueeze(1),
     {"ax": np.array([1], dtype=np.int64)})
case("Squeeze", [node("Squeeze", ["a", "ax"])], {"a": rnd(3, 1, 4)}, lambda p: p["a"].squeeze(1),
     {"ax": np.array([1], dtype=np.int64)})
case("Expand", [node("Expand", ["a", "s"])], {"a": rnd(3, 1)}, lambda p: p["a"].expand(2, 3, 4),
     {"s": np.array([2, 3, 4], dtype=np.int64)})
case("Split_one_output_used", [helper.make_node("Split", ["a", "sp"], ["s0", "s1"], axis=1), node("Identity", ["s1"])],
     {"a": rnd(3, 5)}, lambda p: p["a"][:, 2:], {"sp": np.array([2, 3], dtype=np.int64)})
case("Split_both", [helper.make_node("Split", ["a", "sp"], ["s0", "s1"], axis=0), node("Mul", ["s0", "s1"])],
     {"a": rnd(4, 3)}, lambda p: p["a"][:2] * p["a"][2:], {"sp": np.array([2, 2], dtype=np.int64)})
case("Slice_two_axes", [node("Slice", ["a", "st", "en", "ax"])], {"a": rnd(4, 6, 5)},
     lambda p: p["a"][1:3, :, 2:], {"st": np.array([1, 2], dtype=np.int64), "en": np.array([3, 99], dtype=np.int64),
                                    "ax": np.array([0, 2], dtype=np.int64)})
case("Slice_negative", [node("Slice", ["a", "st", "en"])], {"a": rnd(7, 3)}, lambda p: p["a"][-4:-1],
     {"st": np.array([-4], dtype=np.int64), "en": np.array([-1], dtype=np.int64)})
case("Slice_strided", [node("Slice", ["a", "st", "en", "ax", "sp"])], {"a": rnd(7, 4, 8)},
     lambda p: p["a"][1:6:2, :, ::3], {"st": np.array([1, 0], dtype=np.int64), "en": np.array([6, 99], dtype=np.int64),
                                       "ax": np.array([0, 2], dtype=np.int64), "sp": np.array([2, 3], dtype=np.int64)})
case("Slice_strided_tail", [node("Slice", ["a", "st", "en", "ax", "sp"], "s"), node("Mul", ["s", "s"])], {"a": rnd(3, 8)},
     lambda p: p["a"][:, 1:8:3] ** 2, {"st": np.array([1], dtype=np.int64), "en": np.array([8], dtype=np.int64),
                                       "ax": np.array([1], dtype=np.int64), "sp": np.array([3], dtype=np.int64)})
# Rotary embeddings' rotate_half: x[..., :d/2] and x[..., d/2:] as exporters write them (axis -1, ends INT64_MAX,
# starts INT64_MIN and negative starts/ends), then cat(-x2, x1) * sin + x * cos.
I64MAX, I64MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
case("Slice_int64_max_end", [node("Slice", ["a", "st", "en", "ax"])], {"a": rnd(2, 3, 4, 16)},
     lambda p: p["a"][..., 8:], {"st": np.array([8], dtype=np.int64), "en": np.array([I64MAX], dtype=np.int64),
                                 "ax": np.array([-1], dtype=np.int64)})
case("Slice_int64_min_start", [node("Slice", ["a", "st", "en", "ax", "sp"])], {"a": rnd(3, 10)},
     lambda p: p["a"][:, :-3:2], {"st": np.array([I64MIN], dtype=np.int64), "en": np.array([-3], dtype=np.int64),
                                  "ax": np.array([-1], dtype=np.int64), "sp": np.array([2], dtype=np.int64)})
case("Slice_negative_both_axes", [node("Slice", ["a", "st", "en", "ax"])], {"a": rnd(5, 4, 9)},
     lambda p: p["a"][-4:-1, :, -6:], {"st": np.array([-4, -6], dtype=np.int64),
                                       "en": np.array([-1, I64MAX], dtype=np.int64),
                                       "ax": np.array([0, -1], dtype=np.int64)})
case("Slice_rotate_half", [node("Slice", ["a", "s0", "e0", "ax"], "x1"), node("Slice", ["a", "s1", "e1", "ax"], "x2"),
                           node("Neg", ["x2"], "nx2"), helper.make_node("Concat", ["nx2", "x1"], ["rh"], axis=-1),
                           node("Mul", ["rh", "sn"], "rs"), node("Mul", ["a", "cs"], "ac"), node("Add", ["ac", "rs"])],
     {"a": rnd(2, 2, 5, 16), "sn": rnd(5, 16), "cs": rnd(5, 16)},
     lambda p: p["a"] * p["cs"] + torch.cat([-p["a"][..., 8:], p["a"][..., :8]], -1) * p["sn"],
     {"s0": np.array([0], dtype=np.int64), "e0": np.array([8], dtype=np.int64),
      "s1": np.array([8], dtype=np.int64), "e1": np.array([I64MAX], dtype=np.int64),
      "ax": np.array([-1], dtype=np.int64)})
# negative steps (torch slices only forward: the same elements as an index list)
case("Slice_negative_step", [node("Slice", ["a", "st", "en", "ax", "sp"])], {"a": rnd(3, 8)},
     lambda p: p["a"][:, torch.from_numpy(np.arange(8)[-2::-3].copy())],
     {"st": np.array([-2], dtype=np.int64), "en": np.array([I64MIN], dtype=np.int64),
      "ax": np.array([1], dtype=np.int64), "sp": np.array([-3], dtype=np.int64)})
case("Slice_reverse_two_axes", [node("Slice", ["a", "st", "en", "ax", "sp"], "s"), node("Mul", ["s", "s"])],
     {"a": rnd(5, 4, 6)},
     lambda p: (p["a"][torch.from_numpy(np.arange(5)[::-1].copy())][:, :, torch.from_numpy(np.arange(6)[4:0:-2].copy())]) ** 2,
     {"st": np.array([-1, 4], dtype=np.int64), "en": np.array([I64MIN, 0], dtype=np.int64),
      "ax": np.array([0, 2], dtype=np.int64), "sp": np.array([-1, -2], dtype=np.int64)})
case("Pad_constant", [node("Pad", ["a", "pd"])], {"a": rnd(2, 3, 4)},
     lambda p: F.pad(p["a"], (1, 2, 0, 1)), {"pd": np.array([0, 0, 1, 0, 1, 2], dtype=np.int64)})
case("Concat_axis1", [node("Concat", ["a", "b"], axis=1)], {"a": rnd(3, 2), "b": rnd(3, 5)},
     lambda p: torch.cat([p["a"], p["b"]], 1))
case("ReduceSum_axis1", [node("ReduceSum", ["a", "ax"], keepdims=0)], {"a": rnd(3, 4, 5)},
     lambda p: p["a"].sum(1), {"ax": np.array([1], dtype=np.int64)})
case("ReduceSum_all", [node("ReduceSum", ["a"], keepdims=1)], {"a": rnd(3, 4)},
     lambda p: p["a"].sum().reshape(1, 1))
case("ReduceMean_axes02", [node("ReduceMean", ["a"], axes=[0, 2], keepdims=1)], {"a": rnd(3, 4, 5)},
     lambda p: p["a"].mean((0, 2), keepdim=True))
case("ReduceMean_last", [node("ReduceMean", ["a"], axes=[-1], keepdims=0)], {"a": rnd(6, 8)},
     lambda p: p["a"].mean(-1))
case("LayerNorm_last", [node("LayerNormalization", ["a", "g", "b"], axis=-1, epsilon=1e-5)],
     {"a": rnd(4, 16), "g": rnd(16), "b": rnd(16)}, lambda p: F.layer_norm(p["a"], (16,), p["g"], p["b"], 1e-5))
case("LayerNorm_axis1", [node("LayerNormalization", ["a", "g", "b"], axis=1, epsilon=1e-5)],
     {"a": rnd(2, 3, 4), "g": rnd(3, 4), "b": rnd(3, 4)},
     lambda p: F.layer_norm(p["a"], (3, 4), p["g"], p["b"], 1e-5))
case("Conv2d_pad1_bias", [node("Conv", ["a", "w", "c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
     {"a": rnd(2, 3, 6, 6), "w": rnd(4, 3, 3, 3), "c": rnd(4)}, lambda p: F.conv2d(p["a"], p["w"], p["c"], padding=1))
case("Conv2d_nopad_asym", [node("Conv", ["a", "w"], pads=[0, 1, 0, 0])], {"a": rnd(2, 2, 5, 7), "w": rnd(3, 2, 3, 2)},
     lambda p: F.conv2d(F.pad(p["a"], (1, 0, 0, 0)), p["w"]))
case("Conv1d", [node("Conv", ["a", "w"], pads=[2, 2])], {"a": rnd(2, 3, 9), "w": rnd(5, 3, 5)},
     lambda p: F.conv1d(p["a"], p["w"], padding=2))
case("MaxPool2d_k2", [node("MaxPool", ["a"], kernel_shape=[2, 2], strides=[2, 2])], {"a": rnd(2, 3, 6, 4)},
     lambda p: F.max_pool2d(p["a"], 2))
ties = np.round(rnd(2, 2, 4, 6)).astype(np.float32)  # many equal values per window: the first maximum wins
case("MaxPool2d_ties", [node("MaxPool", ["a"], kernel_shape=[2, 2], strides=[2, 2])], {"a": ties},
     lambda p: F.max_pool2d(p["a"], 2))
case("MaxPool1d_k3", [node("MaxPool", ["a"], kernel_shape=[3], strides=[3])], {"a": np.round(rnd(2, 3, 9))},
     lambda p: F.max_pool1d(p["a"], 3))
case("AveragePool2d_k2", [node("AveragePool", ["a"], kernel_shape=[2, 2], strides=[2, 2])], {"a": rnd(2, 3, 4, 6)},
     lambda p: F.avg_pool2d(p["a"], 2))
case("GlobalAveragePool", [node("GlobalAveragePool", ["a"])], {"a": rnd(2, 3, 4, 5)},
     lambda p: p["a"].mean((2, 3), keepdim=True))
# Conv with strides (a remainder row the stride leaves unread), dilations, groups, depthwise, asymmetric pads,
# pads larger than the kernel span (the dX convolution crops), auto_pad; dX by a stride-spread dY convolved with the
# flipped kernel, dW by a convolution of X with dY whose strides and dilations swap roles (grad_conv.c)
case("Conv2d_stride2_pad1", [node("Conv", ["a", "w"], strides=[2, 2], pads=[1, 1, 1, 1])],
     {"a": rnd(2, 3, 7, 7), "w": rnd(4, 3, 3, 3)}, lambda p: F.conv2d(p["a"], p["w"], stride=2, padding=1))
case("Conv2d_stride2_rem", [node("Conv", ["a", "w"], strides=[2, 2])], {"a": rnd(2, 2, 8, 8), "w": rnd(3, 2, 3, 3)},
     lambda p: F.conv2d(p["a"], p["w"], stride=2))
case("Conv2d_stride3_k2", [node("Conv", ["a", "w"], strides=[3, 3], pads=[0, 1, 1, 0])],
     {"a": rnd(2, 2, 8, 7), "w": rnd(3, 2, 2, 2)},
     lambda p: F.conv2d(F.pad(p["a"], (1, 0, 0, 1)), p["w"], stride=3))
case("Conv2d_dilation2", [node("Conv", ["a", "w"], dilations=[2, 2], pads=[2, 2, 2, 2])],
     {"a": rnd(2, 2, 9, 9), "w": rnd(3, 2, 3, 3)}, lambda p: F.conv2d(p["a"], p["w"], padding=2, dilation=2))
case("Conv2d_groups2", [node("Conv", ["a", "w"], group=2, pads=[1, 1, 1, 1])],
     {"a": rnd(2, 4, 6, 6), "w": rnd(6, 2, 3, 3)}, lambda p: F.conv2d(p["a"], p["w"], padding=1, groups=2))
case("Conv2d_depthwise_s2_bias", [node("Conv", ["a", "w", "c"], group=4, strides=[2, 2], pads=[1, 1, 1, 1])],
     {"a": rnd(2, 4, 8, 8), "w": rnd(4, 1, 3, 3), "c": rnd(4)},
     lambda p: F.conv2d(p["a"], p["w"], p["c"], stride=2, padding=1, groups=4))
case("Conv2d_depthwise_mult2", [node("Conv", ["a", "w"], group=3, pads=[1, 1, 1, 1])],
     {"a": rnd(2, 3, 5, 5), "w": rnd(6, 1, 3, 3)}, lambda p: F.conv2d(p["a"], p["w"], padding=1, groups=3))
case("Conv2d_mixed_g2", [node("Conv", ["a", "w"], group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 2, 0, 1])],
     {"a": rnd(2, 4, 7, 8), "w": rnd(4, 2, 3, 2)},
     lambda p: F.conv2d(F.pad(p["a"], (2, 1, 1, 0)), p["w"], stride=(2, 1), dilation=(1, 2), groups=2))
case("Conv2d_k1_pad1", [node("Conv", ["a", "w"], pads=[1, 1, 1, 1])], {"a": rnd(2, 2, 4, 4), "w": rnd(3, 2, 1, 1)},
     lambda p: F.conv2d(p["a"], p["w"], padding=1))
case("Conv2d_same_upper_s2", [node("Conv", ["a", "w"], strides=[2, 2], auto_pad="SAME_UPPER")],
     {"a": rnd(2, 2, 7, 7), "w": rnd(2, 2, 3, 3)}, lambda p: F.conv2d(p["a"], p["w"], stride=2, padding=1))
case("Conv1d_s3_d2_g3", [node("Conv", ["a", "w"], strides=[3], dilations=[2], pads=[1, 2], group=3)],
     {"a": rnd(2, 3, 17), "w": rnd(6, 1, 3)},
     lambda p: F.conv1d(F.pad(p["a"], (1, 2)), p["w"], stride=3, dilation=2, groups=3))
# Pooling with pads, overlapping strides, dilations and ceil_mode: one kernel offset at a time (grad_conv.c)
case("MaxPool2d_k3s2p1", [node("MaxPool", ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
     {"a": rnd(2, 3, 9, 9)}, lambda p: F.max_pool2d(p["a"], 3, 2, 1))
ties2 = np.round(rnd(2, 2, 8, 8)).astype(np.float32)
case("MaxPool2d_k3s2p1_ties", [node("MaxPool", ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
     {"a": ties2}, lambda p: F.max_pool2d(p["a"], 3, 2, 1))
case("MaxPool2d_k2s1", [node("MaxPool", ["a"], kernel_shape=[2, 2], strides=[1, 1])], {"a": rnd(2, 2, 5, 6)},
     lambda p: F.max_pool2d(p["a"], 2, 1))
case("MaxPool2d_ceil", [node("MaxPool", ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
     {"a": rnd(2, 2, 8, 8)}, lambda p: F.max_pool2d(p["a"], 3, 2, ceil_mode=True))
case("MaxPool2d_dilation2", [node("MaxPool", ["a"], kernel_shape=[2, 2], strides=[1, 1], dilations=[2, 2])],
     {"a": rnd(2, 2, 6, 6)}, lambda p: F.max_pool2d(p["a"], 2, 1, dilation=2))
case("MaxPool1d_k3s2p1", [node("MaxPool", ["a"], kernel_shape=[3], strides=[2], pads=[1, 1])],
     {"a": np.round(rnd(2, 3, 10))}, lambda p: F.max_pool1d(p["a"], 3, 2, 1))
case("AveragePool2d_k3s2p1_excl", [node("AveragePool", ["a"], kernel_shape=[3, 3], strides=[2, 2],
                                        pads=[1, 1, 1, 1], count_include_pad=0)],
     {"a": rnd(2, 3, 9, 8)}, lambda p: F.avg_pool2d(p["a"], 3, 2, 1, count_include_pad=False))
case("AveragePool2d_k3s2p1_incl", [node("AveragePool", ["a"], kernel_shape=[3, 3], strides=[2, 2],
                                        pads=[1, 1, 1, 1], count_include_pad=1)],
     {"a": rnd(2, 3, 9, 8)}, lambda p: F.avg_pool2d(p["a"], 3, 2, 1, count_include_pad=True))
case("AveragePool2d_k3s1p1", [node("AveragePool", ["a"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])],
     {"a": rnd(2, 2, 5, 5)}, lambda p: F.avg_pool2d(p["a"], 3, 1, 1, count_include_pad=False))
case("AveragePool2d_k2s2_odd", [node("AveragePool", ["a"], kernel_shape=[2, 2], strides=[2, 2])],
     {"a": rnd(2, 2, 7, 5)}, lambda p: F.avg_pool2d(p["a"], 2, 2))
case("AveragePool1d_k3s2p1_incl", [node("AveragePool", ["a"], kernel_shape=[3], strides=[2], pads=[1, 1],
                                        count_include_pad=1)],
     {"a": rnd(2, 3, 10)}, lambda p: F.avg_pool1d(p["a"], 3, 2, 1, count_include_pad=True))
# BatchNormalization trains on batch statistics (model.train()), the gradient through the batch mean and
# variance; the running statistics (initializers, not trained) are not read. An inference-exported node, a
# training-mode one with its running-statistic outputs, and BatchNorm1d's rank-2 input.
bn_rm, bn_rv = rnd(3), rnd(3, pos=True)
case("BatchNorm2d_train", [node("BatchNormalization", ["a", "g", "b", "rm", "rv"], epsilon=1e-5, momentum=0.9)],
     {"a": rnd(4, 3, 5, 5), "g": rnd(3), "b": rnd(3)},
     lambda p: F.batch_norm(p["a"], torch.from_numpy(bn_rm.copy()), torch.from_numpy(bn_rv.copy()), p["g"], p["b"],
                            training=True, momentum=0.1, eps=1e-5), {"rm": bn_rm, "rv": bn_rv})
case("BatchNorm2d_training_mode1",
     [helper.make_node("BatchNormalization", ["a", "g", "b", "rm", "rv"], ["y", "rmo", "rvo"], epsilon=1e-3,
                       momentum=0.8, training_mode=1)],
     {"a": rnd(2, 3, 4, 6), "g": rnd(3), "b": rnd(3)},
     lambda p: F.batch_norm(p["a"], torch.from_numpy(bn_rm.copy()), torch.from_numpy(bn_rv.copy()), p["g"], p["b"],
                            training=True, momentum=0.2, eps=1e-3), {"rm": bn_rm, "rv": bn_rv})
bn1_rm, bn1_rv = rnd(5), rnd(5, pos=True)
case("BatchNorm1d_rank2", [node("BatchNormalization", ["a", "g", "b", "rm", "rv"])],
     {"a": rnd(8, 5), "g": rnd(5), "b": rnd(5)},
     lambda p: F.batch_norm(p["a"], torch.from_numpy(bn1_rm.copy()), torch.from_numpy(bn1_rv.copy()), p["g"], p["b"],
                            training=True), {"rm": bn1_rm, "rv": bn1_rv})
gidx = np.array([[1, 3, 3], [0, 9, 1]], dtype=np.int64)
case("Gather_embedding", [node("Gather", ["a", "i"], axis=0)], {"a": rnd(10, 4)},
     lambda p: p["a"][torch.from_numpy(gidx)], {"i": gidx})

# Real vocabularies: tables of GRAPH_SCATTER_ROWS_MIN (8192) rows and more take the row scatter-add
# (src/compiler/lower_scatter_add.c) instead of the one-hot product. GPT-2's 50,257 rows, indices repeated many times
# within and across blocks of 128, a negative one, the last row; a table just above the bound with 300 indices
# drawn from 7 values (three blocks, the last partial); a tied table read by Gather and by a MatMul (the scatter
# adds into the MatMul's gradient in place).
vidx = rng.integers(0, 6, (3, 70)).astype(np.int64)
vidx[:, ::9] = rng.integers(0, 50257, vidx[:, ::9].shape)
vidx[0, 1], vidx[1, 2], vidx[2, 3] = -1, 50256, -50257
case("Gather_vocab_50257", [node("Gather", ["a", "i"], axis=0)], {"a": rnd(50257, 12)},
     lambda p: p["a"][torch.from_numpy(vidx)], {"i": vidx})
ridx = rng.choice(np.array([5, 9000, 0, 17, 8999, 5, 5]), 300).astype(np.int64)
case("Gather_repeats_9001", [node("Gather", ["a", "i"], axis=0)], {"a": rnd(9001, 20)},
     lambda p: p["a"][torch.from_numpy(ridx)], {"i": ridx})
tidx = rng.integers(0, 40, 130).astype(np.int64)
case("Gather_tied_8200", [node("Gather", ["a", "i"], "e", axis=0), node("Transpose", ["a"], "at", perm=[1, 0]),
                          node("MatMul", ["e", "at"])], {"a": rnd(8200, 6)},
     lambda p: p["a"][torch.from_numpy(tidx)] @ p["a"].t(), {"i": tidx})

# 3-D convolution and pooling (grad_conv.c's rules over three spatial axes; the compiler's 3-D window ops loop the
# 2-D ones over depth, src/compiler/lower_cnn.c): strides with remainders, dilations, groups, depthwise, asymmetric
# pads, odd shapes, MaxPool's first maximum among ties, AveragePool with and without the pads in its count.
case("Conv3d_pad1_bias", [node("Conv", ["a", "w", "c"], pads=[1] * 6, kernel_shape=[3, 3, 3])],
     {"a": rnd(2, 3, 5, 6, 4), "w": rnd(4, 3, 3, 3, 3), "c": rnd(4)},
     lambda p: F.conv3d(p["a"], p["w"], p["c"], padding=1))
case("Conv3d_s2d2_asym", [node("Conv", ["a", "w"], strides=[2, 1, 2], dilations=[1, 2, 1], pads=[1, 0, 2, 0, 1, 1])],
     {"a": rnd(2, 2, 7, 6, 7), "w": rnd(3, 2, 3, 2, 3)},
     lambda p: F.conv3d(F.pad(p["a"], (2, 1, 0, 1, 1, 0)), p["w"], stride=(2, 1, 2), dilation=(1, 2, 1)))
case("Conv3d_groups2_s2", [node("Conv", ["a", "w"], group=2, strides=[2, 2, 1], pads=[1] * 6)],
     {"a": rnd(2, 4, 5, 6, 5), "w": rnd(6, 2, 3, 3, 2)},
     lambda p: F.conv3d(p["a"], p["w"], stride=(2, 2, 1), padding=1, groups=2))
case("Conv3d_depthwise_s2_bias", [node("Conv", ["a", "w", "c"], group=3, strides=[2, 2, 2], pads=[1] * 6)],
     {"a": rnd(2, 3, 6, 5, 7), "w": rnd(3, 1, 3, 3, 3), "c": rnd(3)},
     lambda p: F.conv3d(p["a"], p["w"], p["c"], stride=2, padding=1, groups=3))
case("Conv3d_stride_rem_odd", [node("Conv", ["a", "w"], strides=[3, 2, 2])],
     {"a": rnd(1, 2, 8, 7, 9), "w": rnd(2, 2, 2, 3, 2)}, lambda p: F.conv3d(p["a"], p["w"], stride=(3, 2, 2)))
case("MaxPool3d_k2", [node("MaxPool", ["a"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])], {"a": rnd(2, 2, 4, 6, 4)},
     lambda p: F.max_pool3d(p["a"], 2))
ties3 = np.round(rnd(2, 2, 4, 4, 6)).astype(np.float32)
case("MaxPool3d_k2_ties", [node("MaxPool", ["a"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])], {"a": ties3},
     lambda p: F.max_pool3d(p["a"], 2))
case("MaxPool3d_k3s2p1", [node("MaxPool", ["a"], kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6)],
     {"a": rnd(2, 2, 7, 6, 5)}, lambda p: F.max_pool3d(p["a"], 3, 2, 1))
ties3b = np.round(rnd(1, 2, 6, 5, 7)).astype(np.float32)
case("MaxPool3d_k3s2p1_ties", [node("MaxPool", ["a"], kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6)],
     {"a": ties3b}, lambda p: F.max_pool3d(p["a"], 3, 2, 1))
case("MaxPool3d_ceil_dil", [node("MaxPool", ["a"], kernel_shape=[2, 2, 2], strides=[2, 1, 2], dilations=[1, 2, 1],
                                 ceil_mode=1)],
     {"a": rnd(2, 2, 5, 7, 5)}, lambda p: F.max_pool3d(p["a"], 2, (2, 1, 2), dilation=(1, 2, 1), ceil_mode=True))
case("AveragePool3d_k2", [node("AveragePool", ["a"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])],
     {"a": rnd(2, 3, 4, 4, 6)}, lambda p: F.avg_pool3d(p["a"], 2))
case("AveragePool3d_k3s2p1_excl", [node("AveragePool", ["a"], kernel_shape=[3, 3, 3], strides=[2, 2, 2],
                                        pads=[1] * 6, count_include_pad=0)],
     {"a": rnd(2, 2, 7, 6, 5)}, lambda p: F.avg_pool3d(p["a"], 3, 2, 1, count_include_pad=False))
case("AveragePool3d_k3s2p1_incl", [node("AveragePool", ["a"], kernel_shape=[3, 3, 3], strides=[2, 2, 2],
                                        pads=[1] * 6, count_include_pad=1)],
     {"a": rnd(2, 2, 7, 6, 5)}, lambda p: F.avg_pool3d(p["a"], 3, 2, 1, count_include_pad=True))
case("AveragePool3d_k2s2_odd", [node("AveragePool", ["a"], kernel_shape=[2, 3, 2], strides=[2, 3, 2])],
     {"a": rnd(2, 2, 5, 7, 3)}, lambda p: F.avg_pool3d(p["a"], (2, 3, 2)))
case("GlobalAveragePool3d", [node("GlobalAveragePool", ["a"])], {"a": rnd(2, 3, 3, 4, 5)},
     lambda p: p["a"].mean((2, 3, 4), keepdim=True))


def gen(out):
    names = []
    for name, nodes, params, fn, consts in CASES:
        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, "ref"), exist_ok=True)
        tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        y = fn(tp)
        r = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        if r.size < 2:  # a one-element R would not be trained (weights have two or more elements)
            r = np.full(tuple(y.shape), 1.5, dtype=np.float32)
        tr = torch.tensor(r, requires_grad=r.size >= 2)
        loss = (y * tr).sum()
        loss.backward()
        inits = [numpy_helper.from_array(v, k) for k, v in params.items()]
        inits.append(numpy_helper.from_array(r, "R"))
        for k, v in consts.items():
            inits.append(numpy_helper.from_array(v, k))
        all_nodes = list(nodes) + [helper.make_node("Mul", ["y", "R"], ["yr"]),
                                   helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
        g = helper.make_graph(all_nodes, name, [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, "model.onnx"))
        for k, v in tp.items():
            np.save(os.path.join(d, "ref", k + ".npy"), v.grad.numpy().reshape(-1))
        if tr.requires_grad:
            np.save(os.path.join(d, "ref", "R.npy"), tr.grad.numpy().reshape(-1))
        names.append(name)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


def check(out):
    ok = bad = 0
    print(f"{'case':<26} {'tensor':<6} {'elems':>6} {'max err/max|ref|':>17}  result")
    for name in open(os.path.join(out, "cases.txt")).read().split():
        d = os.path.join(out, name)
        worst, detail, fail = 0.0, "", False
        if not os.path.isdir(os.path.join(d, "tern")):
            err = open(os.path.join(d, "err.txt")).read().strip().splitlines()
            print(f"{name:<26} {'-':<6} {'-':>6} {'-':>17}  FAIL ({err[-1][:100] if err else 'no output'})")
            bad += 1
            continue
        for f in sorted(os.listdir(os.path.join(d, "ref"))):
            ref = np.load(os.path.join(d, "ref", f))
            tp = os.path.join(d, "tern", f)
            if not os.path.exists(tp):
                fail, detail = True, f"no gradient for {f[:-4]}"
                break
            got = np.load(tp)
            if got.shape != ref.shape:
                fail, detail = True, f"{f[:-4]}: {got.shape} elements, expected {ref.shape}"
                break
            rel = float(np.abs(got - ref).max() / max(float(np.abs(ref).max()), 1e-3))
            if not rel <= 1e-4:
                fail = True
            if rel >= worst:
                worst, detail = rel, f"{f[:-4]:<6} {ref.size:>6}"
        print(f"{name:<26} {detail if not fail or 'elements' not in detail else '':<13} {worst:>17.3e}  "
              f"{'FAIL ' + detail if fail else 'ok'}")
        if fail:
            bad += 1
        else:
            ok += 1
    print(f"grad_tests: {ok} passed, {bad} failed")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(1 if check(sys.argv[2]) else 0)
