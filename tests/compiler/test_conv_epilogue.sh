#!/usr/bin/env bash
# A convolution's epilogue (lower_cnn.c: fuse.conv_relu, fuse.conv_add, fuse.conv_silu, fuse.conv_clip) and a
# BatchNormalization's (fuse.bn_relu): which nodes the Conv's GEMMs (or window walk, or the BN's pass) take, and
# that every program gives the bytes of the same graph compiled with --no-fuse-elementwise (each node on its own):
#  - residual Adds in both operand orders (the shortcut left and right), with and without a Relu after them, and
#    an Add of two Convs' outputs (the later Conv takes it), on trn1 and trn2;
#  - a grouped convolution (one GEMM per group) and a strided one with a Relu;
#  - left alone: a Relu whose Conv output has a second reader, a Relu after a depthwise convolution (a window
#    walk, no GEMM), and an Add whose other operand an elementwise group makes only after the Conv (the group is
#    emitted at its last member): those nodes keep their own rules and the graph still compiles;
#  - a SiLU written as Sigmoid and Mul (fuse.conv_silu), the product in either operand order, after a plain and a
#    strided Conv and after a depthwise one (its window walk applies it); left alone: the Conv's output read a third
#    time, the Sigmoid's output read again (a graph output);
#  - a Clip with compile-time bounds (ReLU6, fuse.conv_clip) after a Conv, a max-only one after a strided Conv, one
#    after a depthwise Conv; left alone: a Clip of a Conv output that something else reads too;
#  - a Relu after a BatchNormalization (DenseNet's pre-activation, fuse.bn_relu: the BN's pass applies the Relu
#    rule's activation); left alone: a BN output something else reads too.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_conv_epilogue.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(7)
def w(name, shape):
    return nh.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
def save(name, nodes, inits, outs, C=8, H=10):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, [1, C, H, H])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
conv = lambda i, o, wn, bn, **kw: h.make_node("Conv", [i, wn, bn], [o], **kw)
p1 = dict(pads=[1, 1, 1, 1])
# the shortcut on the right, then on the left; each with a Relu after the Add
for name, first in (("res_right", False), ("res_left", True)):
    save(name, [conv("x", "a", "w1", "b1", **p1), h.make_node("Relu", ["a"], ["ar"]),
                conv("ar", "y", "w2", "b2"),
                h.make_node("Add", ["x", "y"] if first else ["y", "x"], ["z"]), h.make_node("Relu", ["z"], ["out"])],
         [w("w1", [8, 8, 3, 3]), w("b1", [8]), w("w2", [8, 8, 1, 1]), w("b2", [8])], ["out"])
# an Add of two Convs (no Relu after it): the later Conv takes it
save("two_convs", [conv("x", "a", "w1", "b1", **p1), conv("x", "c", "w2", "b2"), h.make_node("Add", ["a", "c"], ["out"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), w("w2", [8, 8, 1, 1]), w("b2", [8])], ["out"])
# grouped (2 groups of 4 channels) and strided convolutions with a Relu
save("grouped", [conv("x", "a", "w1", "b1", group=2, **p1), h.make_node("Relu", ["a"], ["r"]),
                 conv("r", "s", "w2", "b2", strides=[2, 2], **p1), h.make_node("Relu", ["s"], ["out"])],
     [w("w1", [8, 4, 3, 3]), w("b1", [8]), w("w2", [16, 8, 3, 3]), w("b2", [16])], ["out"])
# left alone: a second reader of the Conv's output; a depthwise Conv; a shortcut made by a group after the Conv
save("second_reader", [conv("x", "a", "w1", "b1", **p1), h.make_node("Relu", ["a"], ["out"]),
                       h.make_node("Mul", ["a", "two"], ["out2"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), nh.from_array(np.array(2.0, np.float32), "two")], ["out", "out2"])
save("depthwise", [conv("x", "a", "w1", "b1", group=8, **p1), h.make_node("Relu", ["a"], ["out"])],
     [w("w1", [8, 1, 3, 3]), w("b1", [8])], ["out"])
save("late_shortcut", [h.make_node("Mul", ["x", "half"], ["t"]), conv("x", "y", "w1", "b1", **p1),
                       h.make_node("Sub", ["t", "quarter"], ["u"]), h.make_node("Add", ["y", "t"], ["z"]),
                       h.make_node("Relu", ["z"], ["out"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), nh.from_array(np.array(0.5, np.float32), "half"),
      nh.from_array(np.array(0.25, np.float32), "quarter")], ["out", "u"])
# SiLU as Sigmoid and Mul (EfficientNet's): the product in both operand orders, a strided Conv, a depthwise one (its
# window walk); left alone: the Conv's output read a third time, the Sigmoid's output read again
sig = lambda i, o: h.make_node("Sigmoid", [i], [o])
save("silu_right", [conv("x", "a", "w1", "b1", **p1), sig("a", "s"), h.make_node("Mul", ["a", "s"], ["out"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8])], ["out"])
save("silu_left", [conv("x", "a", "w1", "b1", strides=[2, 2], **p1), sig("a", "s"),
                   h.make_node("Mul", ["s", "a"], ["m"]), conv("m", "out", "w2", "b2")],
     [w("w1", [16, 8, 3, 3]), w("b1", [16]), w("w2", [8, 16, 1, 1]), w("b2", [8])], ["out"])
save("silu_third_reader", [conv("x", "a", "w1", "b1", **p1), sig("a", "s"), h.make_node("Mul", ["a", "s"], ["out"]),
                           h.make_node("Add", ["a", "a"], ["out2"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8])], ["out", "out2"])
save("silu_sigmoid_read", [conv("x", "a", "w1", "b1", **p1), sig("a", "s"), h.make_node("Mul", ["a", "s"], ["out"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8])], ["out", "s"])
save("silu_depthwise", [conv("x", "a", "w1", "b1", group=8, **p1), sig("a", "s"), h.make_node("Mul", ["a", "s"], ["out"])],
     [w("w1", [8, 1, 3, 3]), w("b1", [8])], ["out"])
# Clip with compile-time bounds (MobileNetV2's ReLU6): after a Conv, a max-only Clip after a strided one, after a
# depthwise one; left alone: a Clip of a Conv output that something else reads too
c0, c6 = nh.from_array(np.array(0.0, np.float32), "c0"), nh.from_array(np.array(6.0, np.float32), "c6")
clip = lambda i, o, lo, hi: h.make_node("Clip", [i, lo, hi], [o])
save("clip6", [conv("x", "a", "w1", "b1", **p1), clip("a", "m", "c0", "c6"), conv("m", "out", "w2", "b2")],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), w("w2", [8, 8, 1, 1]), w("b2", [8]), c0, c6], ["out"])
save("clip_max_only", [conv("x", "a", "w1", "b1", strides=[2, 2], **p1), clip("a", "out", "", "c6")],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), c6], ["out"])
save("clip_depthwise", [conv("x", "a", "w1", "b1", group=8, **p1), clip("a", "out", "c0", "c6")],
     [w("w1", [8, 1, 3, 3]), w("b1", [8]), c0, c6], ["out"])
save("clip_second_reader", [conv("x", "a", "w1", "b1", **p1), clip("a", "out", "c0", "c6"),
                            h.make_node("Add", ["a", "a"], ["out2"])],
     [w("w1", [8, 8, 3, 3]), w("b1", [8]), c0, c6], ["out", "out2"])
# a Relu after a BatchNormalization (DenseNet's pre-activation, fuse.bn_relu); left alone: the BN's output read
# again
def bn(i, o):
    return h.make_node("BatchNormalization", [i, "g", "be", "mu", "var"], [o], epsilon=1e-5)
bnp = [nh.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "g"),
       nh.from_array(rng.uniform(-0.5, 0.5, 8).astype(np.float32), "be"),
       nh.from_array(rng.uniform(-0.5, 0.5, 8).astype(np.float32), "mu"),
       nh.from_array(rng.uniform(0.5, 2.0, 8).astype(np.float32), "var")]
save("bn_relu", [bn("x", "b"), h.make_node("Relu", ["b"], ["r"]), conv("r", "out", "w1", "b1")],
     [w("w1", [8, 8, 1, 1]), w("b1", [8])] + bnp, ["out"])
save("bn_relu_second_reader", [bn("x", "b"), h.make_node("Relu", ["b"], ["out"]), h.make_node("Add", ["b", "b"], ["out2"])],
     bnp, ["out", "out2"])
x = rng.uniform(-2, 2, (1, 8, 10, 10)).astype(np.float32)
x[0, 0, 0, :4] = [-0.0, 3e30, -3e30, 0.0]
np.save(f"{d}/x.npy", x)
PY

# name, Relu and Add nodes fused (as tern compile prints them, or none)
cases=("res_right 2 1" "res_left 2 1" "two_convs 0 1" "grouped 2 0" "second_reader 0 0" "depthwise 0 0"
       "late_shortcut 0 0" "silu_right 0 0 1" "silu_left 0 0 1" "silu_third_reader 0 0 0" "silu_sigmoid_read 0 0 0"
       "silu_depthwise 0 0 1" "clip6 0 0 0 1" "clip_max_only 0 0 0 1" "clip_depthwise 0 0 0 1"
       "clip_second_reader 0 0 0 0" "bn_relu 0 0 0 0 1" "bn_relu_second_reader 0 0 0 0 0")
for m in trn1 trn2; do
    for c in "${cases[@]}"; do
        set -- $c
        name=$1 relus=$2 adds=$3 silus=${4:-0} clips=${5:-0} bnrelus=${6:-0}
        expect 0 "$TERN" compile "$tmp/$name.onnx" -o "$tmp/$name.tern" --machine $m --explain
        if [ "$bnrelus" != 0 ]; then
            contains "$tmp/out" "$bnrelus Relu applied by the BatchNormalization"
            contains "$tmp/out" "fuse.bn_relu"
        elif [ "$clips" != 0 ]; then
            contains "$tmp/out" "$clips Clip"
            contains "$tmp/out" "fuse.conv_clip"
        elif [ "$silus" != 0 ]; then
            contains "$tmp/out" "$silus SiLU"
            contains "$tmp/out" "fuse.conv_silu"
        elif [ "$relus$adds" = 00 ]; then
            if grep -q "fuse.conv_\|fuse.bn_" "$tmp/out"; then bad "$name ($m): fused: $(grep fuse. "$tmp/out")"; else ok; fi
        else
            contains "$tmp/out" "$relus Relu and $adds Add node"
        fi
        for r in fused separate; do
            flag=()
            [ $r = separate ] && flag=(--no-fuse-elementwise)
            mkdir -p "$tmp/$m/$name/$r"
            expect 0 "$TERN" run "$tmp/$name.onnx" --machine $m --input "x=$tmp/x.npy" --output-dir "$tmp/$m/$name/$r" \
                "${flag[@]}"
        done
        for f in "$tmp/$m/$name/separate"/*.npy; do
            if cmp -s "$f" "$tmp/$m/$name/fused/$(basename "$f")"; then
                ok
            else
                bad "$name ($m): $(basename "$f") differs between the fused and the node-by-node programs"
            fi
        done
    done
    # the Add the late shortcut's group keeps: lowered on its own (binary.alu), and so is its Relu
    "$TERN" compile "$tmp/late_shortcut.onnx" -o "$tmp/l.tern" --machine $m --explain >"$tmp/out" 2>&1
    contains "$tmp/out" "binary.alu"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
