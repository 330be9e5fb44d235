#!/usr/bin/env bash
# Concats in place (lower_layout.c, cc_concat_plan): which Concat inputs their producers place where the Concat's
# output wants them (the count tern compile prints), and that every program gives the bytes of the same graph
# compiled with --no-fuse-elementwise (every Concat copying):
#  - a DenseNet-style block: each layer concatenates the block's input and every feature so far (2 + 3 + 4 inputs
#    in place), with a feature read again after the last Concat (the shared buffer must outlive the Concats);
#  - a Concat of a Concat's output and a new feature (the earlier output is a prefix of the later one: 2 + 2);
#  - left to copy: batch 2 (the inputs are not one run each), a graph input among the inputs, an input twice, two
#    Concats wanting one value at different offsets (the second copies), two Concats extending one prefix with
#    different values (the second copies; found in review: they shared a run), an input made by a Reshape (a view of
#    another value: copied into its run), a Reshape of the first input as the second (a view of the buffer's
#    own first run: copied into the second), and a Concat whose output is a graph output.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_concat_in_place.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(11)
def w(name, shape):
    return nh.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
def save(name, nodes, inits, outs, N=1, C=8, H=10):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, [N, C, H, H])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
conv = lambda i, o, wn, bn, **kw: h.make_node("Conv", [i, wn, bn], [o], **kw)
cat = lambda ins, o: h.make_node("Concat", ins, [o], axis=1)
relu = lambda i, o: h.make_node("Relu", [i], [o])
p1 = dict(pads=[1, 1, 1, 1])
def block(N):
    nodes = [conv("x", "x0", "w0", "b0", **p1), relu("x0", "r0"),
             conv("r0", "f1", "w1", "b1", **p1), cat(["r0", "f1"], "c1"), relu("c1", "s1"),
             conv("s1", "f2", "w2", "b2", **p1), cat(["r0", "f1", "f2"], "c2"), relu("c2", "s2"),
             conv("s2", "f3", "w3", "b3", **p1), cat(["r0", "f1", "f2", "f3"], "c3"), relu("c3", "s3"),
             conv("s3", "out", "w4", "b4"), h.make_node("Mul", ["f1", "two"], ["out2"])]
    inits = [w("w0", [8, 8, 3, 3]), w("b0", [8]), w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 12, 3, 3]),
             w("b2", [4]), w("w3", [4, 16, 3, 3]), w("b3", [4]), w("w4", [6, 20, 1, 1]), w("b4", [6]),
             nh.from_array(np.array(2.0, np.float32), "two")]
    save("block" if N == 1 else "block_batch2", nodes, inits, ["out", "out2"], N=N)
block(1)
block(2)
# a Concat of an earlier Concat's output and a new feature
save("nested", [conv("x", "a", "w1", "b1", **p1), conv("x", "b", "w2", "b2", **p1), cat(["a", "b"], "ab"),
                relu("ab", "r"), conv("r", "c", "w3", "b3", **p1), cat(["ab", "c"], "abc"),
                conv("abc", "out", "w4", "b4")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4]), w("w3", [4, 8, 3, 3]), w("b3", [4]),
      w("w4", [5, 12, 1, 1]), w("b4", [5])], ["out"])
# left to copy
save("graph_input", [conv("x", "a", "w1", "b1", **p1), cat(["x", "a"], "c"), conv("c", "out", "w2", "b2")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [5, 12, 1, 1]), w("b2", [5])], ["out"])
save("twice", [conv("x", "a", "w1", "b1", **p1), cat(["a", "a"], "c"), conv("c", "out", "w2", "b2")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [5, 8, 1, 1]), w("b2", [5])], ["out"])
save("conflict", [conv("x", "a", "w1", "b1", **p1), conv("x", "b", "w2", "b2", **p1), cat(["a", "b"], "c1"),
                  cat(["b", "a"], "c2"), conv("c1", "o1", "w3", "b3"), conv("c2", "o2", "w4", "b4"),
                  h.make_node("Add", ["o1", "o2"], ["out"])],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4]), w("w3", [5, 8, 1, 1]), w("b3", [5]),
      w("w4", [5, 8, 1, 1]), w("b4", [5])], ["out"])
# two Concats extending one prefix with different values (the second copies: a and b cannot share a run), and a
# third extending the first Concat's output while a longer Concat of the same prefix holds the run after it
save("branch", [conv("x", "x0", "w1", "b1", **p1), conv("x", "a", "w2", "b2", **p1), cat(["x0", "a"], "yA"),
                conv("x", "b", "w3", "b3", **p1), cat(["x0", "b"], "yB"), conv("yA", "oA", "w4", "b4"),
                conv("yB", "oB", "w5", "b5"), h.make_node("Add", ["oA", "oB"], ["out"])],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4]), w("w3", [4, 8, 3, 3]), w("b3", [4]),
      w("w4", [5, 8, 1, 1]), w("b4", [5]), w("w5", [5, 8, 1, 1]), w("b5", [5])], ["out"])
save("branch3", [conv("x", "x0", "w1", "b1", **p1), conv("x", "a", "w2", "b2", **p1), cat(["x0", "a"], "yA"),
                 conv("x", "b", "w3", "b3", **p1), cat(["x0", "a", "b"], "yB"), conv("x", "cc", "w6", "b6", **p1),
                 cat(["yA", "cc"], "yC"), conv("yB", "oB", "w4", "b4"), conv("yC", "oC", "w5", "b5"),
                 h.make_node("Add", ["oB", "oC"], ["out"])],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4]), w("w3", [4, 8, 3, 3]), w("b3", [4]),
      w("w6", [4, 8, 3, 3]), w("b6", [4]), w("w4", [5, 12, 1, 1]), w("b4", [5]), w("w5", [5, 12, 1, 1]), w("b5", [5])],
     ["out"])
save("reshaped", [conv("x", "a", "w1", "b1", **p1), conv("x", "b", "w2", "b2", **p1),
                  h.make_node("Reshape", ["b", "shape"], ["br"]), cat(["a", "br"], "c"), conv("c", "out", "w3", "b3")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4]), w("w3", [5, 8, 1, 1]), w("b3", [5]),
      nh.from_array(np.array([1, 4, 10, 10], np.int64), "shape")], ["out"])
# a Reshape of the first input as the second: a view of the buffer's first run, which the Concat must copy into
# its second
save("self_view", [conv("x", "a", "w1", "b1", **p1), h.make_node("Reshape", ["a", "shape"], ["ar"]),
                   cat(["a", "ar"], "c"), conv("c", "out", "w3", "b3")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w3", [5, 8, 1, 1]), w("b3", [5]),
      nh.from_array(np.array([1, 4, 10, 10], np.int64), "shape")], ["out"])
save("output_concat", [conv("x", "a", "w1", "b1", **p1), conv("x", "b", "w2", "b2", **p1), cat(["a", "b"], "out")],
     [w("w1", [4, 8, 3, 3]), w("b1", [4]), w("w2", [4, 8, 3, 3]), w("b2", [4])], ["out"])
for N in (1, 2):
    x = rng.uniform(-2, 2, (N, 8, 10, 10)).astype(np.float32)
    x[0, 0, 0, :4] = [-0.0, 3e30, -3e30, 0.0]
    np.save(f"{d}/x{N}.npy", x)
PY

# name, batch, Concat inputs placed in place (as tern compile prints them; 0: the line is absent)
cases=("block 1 9" "block_batch2 2 0" "nested 1 4" "graph_input 1 0" "twice 1 0" "conflict 1 2" "branch 1 2" "branch3 1 5" "reshaped 1 1"
       "self_view 1 1" "output_concat 1 0")
for m in trn1 trn2; do
    for c in "${cases[@]}"; do
        set -- $c
        name=$1 batch=$2 placed=$3
        expect 0 "$TERN" compile "$tmp/$name.onnx" -o "$tmp/$name.tern" --machine $m
        if [ "$placed" = 0 ]; then
            if grep -q "Concat input" "$tmp/out"; then bad "$name ($m): $(grep -o '[0-9]* Concat input[^;]*' "$tmp/out")"; else ok; fi
        else
            contains "$tmp/out" "$placed Concat input"
        fi
        for r in fused separate; do
            flag=()
            [ $r = separate ] && flag=(--no-fuse-elementwise)
            mkdir -p "$tmp/$m/$name/$r"
            expect 0 "$TERN" run "$tmp/$name.onnx" --machine $m --input "x=$tmp/x$batch.npy" \
                --output-dir "$tmp/$m/$name/$r" "${flag[@]}"
        done
        for f in "$tmp/$m/$name/separate"/*.npy; do
            if cmp -s "$f" "$tmp/$m/$name/fused/$(basename "$f")"; then
                ok
            else
                bad "$name ($m): $(basename "$f") differs between the in-place and the copying programs"
            fi
        done
    done
done
# the numbers themselves, once: the block's outputs against numpy (a wrong offset would still agree between the
# two programs only if both were wrong)
mkdir -p "$tmp/ref"
$PY - "$tmp" <<'PY' || bad "block: outputs differ from numpy's"
import sys, numpy as np, onnx
from onnx import numpy_helper as nh
d = sys.argv[1]
m = onnx.load(f"{d}/block.onnx")
W = {i.name: nh.to_array(i) for i in m.graph.initializer}
x = np.load(f"{d}/x1.npy").astype(np.float64)
def conv(v, wn, bn, pad):
    wt, b = W[wn].astype(np.float64), W[bn].astype(np.float64)
    co, ci, k, _ = wt.shape
    vp = np.pad(v, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    H = v.shape[2]
    out = np.zeros((1, co, H, H))
    for i in range(k):
        for j in range(k):
            out += np.einsum("oc,nchw->nohw", wt[:, :, i, j], vp[:, :, i:i + H, j:j + H])
    return out + b[None, :, None, None]
r0 = np.maximum(conv(x, "w0", "b0", 1), 0)
f1 = conv(r0, "w1", "b1", 1)
f2 = conv(np.maximum(np.concatenate([r0, f1], 1), 0), "w2", "b2", 1)
f3 = conv(np.maximum(np.concatenate([r0, f1, f2], 1), 0), "w3", "b3", 1)
out = conv(np.maximum(np.concatenate([r0, f1, f2, f3], 1), 0), "w4", "b4", 0)
got = np.load(f"{d}/trn1/block/fused/out.npy").astype(np.float64)
got2 = np.load(f"{d}/trn1/block/fused/out2.npy").astype(np.float64)
e = np.abs(got - out).max() / (np.abs(out).max() + 1e-30)
e2 = np.abs(got2 - 2 * f1).max() / (np.abs(f1).max() + 1e-30)
print(f"block: max relative error {e:.2e}, out2 {e2:.2e}")
sys.exit(0 if e < 0.05 and e2 < 0.02 else 1)
PY
[ $? -eq 0 ] && ok
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
