#!/usr/bin/python3
"""Reference cases for the compiler's CNN lowerings (tests/compiler/test_cnn.c): small PyTorch modules (Conv1d/2d/3d
with strides, pads, dilations, groups; BatchNorm2d; Max/Avg/adaptive pools) exported with torch.onnx.export, with
a seeded random input and PyTorch's output (float64 module for the reference, so the reference's own rounding is
negligible next to the tolerances).

usage: gen_cnn_tests.py OUTDIR   writes OUTDIR/<case>.onnx, <case>.in.npy, <case>.out.npy and OUTDIR/cases.txt
(one case name per line); 3-D Conv and pools among them.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

OPSET = 14


class ConvBN(nn.Module):
    """BatchNorm on its own (not after a Conv, which the exporter would fold away), then a ReLU."""

    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, eps=1e-3)

    def forward(self, x):
        return torch.relu(self.bn(x))


def cases():
    def conv(*a, **k):
        return nn.Conv2d(*a, **k)

    bn = ConvBN(6)
    with torch.no_grad():
        bn.bn.running_mean.uniform_(-1, 1)
        bn.bn.running_var.uniform_(0.5, 2)
        bn.bn.weight.uniform_(0.5, 1.5)
        bn.bn.bias.uniform_(-0.5, 0.5)
    return [
        # name, module, input shape
        ("conv3x3_bias", conv(20, 7, 3, 1, 1), (2, 20, 9, 11)),          # K = 180: two K tiles, batch 2
        ("conv_odd", conv(3, 130, (5, 3), (2, 1), (2, 1), dilation=(1, 2), bias=False), (1, 3, 13, 10)),  # M > 128
        ("conv_valid_s2", conv(4, 5, 2, 2, 0), (1, 4, 8, 8)),          # no padding: no zero fill
        ("conv_groups2", conv(4, 6, 3, 1, 1, groups=2), (1, 4, 6, 7)),
        ("conv_depthwise", conv(8, 8, 3, 2, 1, groups=8), (2, 8, 9, 9)),
        ("conv1d", nn.Conv1d(3, 5, 3, 2, 1), (2, 3, 17)),
        ("batchnorm", bn, (2, 6, 5, 4)),
        ("maxpool", nn.MaxPool2d(3, 2, 1), (1, 5, 11, 12)),
        ("maxpool_ceil", nn.MaxPool2d(2, 2, ceil_mode=True), (1, 3, 7, 9)),
        ("avgpool_ceil", nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 4, 8, 9)),
        ("avgpool_excl", nn.AvgPool2d(3, 2, 1, count_include_pad=False), (1, 4, 9, 8)),
        ("global_avg", nn.AdaptiveAvgPool2d(1), (2, 130, 6, 5)),        # rows 2*130 > 128
        ("global_max", nn.AdaptiveMaxPool2d(1), (1, 7, 5, 5)),
    ]


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    names = []
    for name, m, shape in cases():
        m = m.eval()
        x = torch.randn(*shape)
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=OPSET)
        with torch.no_grad():
            y = m.double()(x.double())
        np.save(os.path.join(out, name + ".in.npy"), x.numpy())
        np.save(os.path.join(out, name + ".out.npy"), y.numpy().astype(np.float32))
        names.append(name)
    # AveragePool with count_include_pad=1: torch exports it as Pad + AveragePool, so this one is written with
    # onnx.helper (the reference is still PyTorch's AvgPool2d(count_include_pad=True)).
    import onnx
    from onnx import TensorProto, helper
    x = torch.randn(1, 4, 9, 8)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            count_include_pad=1)
    graph = helper.make_graph([node], "avgpool_incl", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]),
              os.path.join(out, "avgpool_incl.onnx"))
    y = nn.AvgPool2d(3, 2, 1, count_include_pad=True)(x.double())
    np.save(os.path.join(out, "avgpool_incl.in.npy"), x.numpy())
    np.save(os.path.join(out, "avgpool_incl.out.npy"), y.numpy().astype(np.float32))
    names.append("avgpool_incl")
    # 3-D (NCDHW): the 2-D lowerings run per output depth and kernel depth offset. Made after the 2-D cases so
    # that their modules and inputs stay as they were.
    for name, m, shape in [
            ("conv3d", nn.Conv3d(2, 3, 2), (1, 2, 4, 4, 4)),
            ("conv3d_s2_p1_d2", nn.Conv3d(3, 5, 3, (2, 1, 2), (1, 1, 0), dilation=(2, 1, 1)), (2, 3, 7, 6, 7)),
            ("dwconv3d", nn.Conv3d(4, 4, 3, 2, 1, groups=4), (1, 4, 5, 6, 5)),   # depthwise: the window walk
            ("maxpool3d", nn.MaxPool3d(3, 2, 1), (1, 3, 7, 6, 8)),
            ("avgpool3d_ceil_excl", nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 7, 6, 5)),
            ("global_avg3d", nn.AdaptiveAvgPool3d(1), (2, 3, 3, 4, 5))]:
        m = m.eval()
        x = torch.randn(*shape)
        torch.onnx.export(m, (x,), os.path.join(out, name + ".onnx"), input_names=["x"], output_names=["y"],
                          opset_version=OPSET)
        with torch.no_grad():
            y = m.double()(x.double())
        np.save(os.path.join(out, name + ".in.npy"), x.numpy())
        np.save(os.path.join(out, name + ".out.npy"), y.numpy().astype(np.float32))
        names.append(name)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
