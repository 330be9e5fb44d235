#!/usr/bin/env bash
# Two linear layers with constant weights where the second is the only reader of the first's output (a
# transformer's FFN) are one kernel with the middle kept on chip (lower_linear.c pair_next, tern_lib_linear_pair).
# Against the same graphs with the middle also a graph output (a second reader: the layers then run as two
# kernels through HBM), and against the same graph compiled with --no-keep-on-chip:
#  - the shared output byte for byte (a ReLU MLP; BERT's FFN: erf-form GELU, residual, layer norm);
#  - the HBM bytes of --profile lower by the middle's store and load (fp32 in the two-layer graph, where it is an
#    output; pairing disabled, the pair graph's middle would still cost half of that in bf16);
#  - the predicted time lower;
#  - BERT's FFN close to a float64 numpy reference of the bf16-rounded operands.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_linear_pair.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx, torch
from onnx import TensorProto as T, helper as h, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(7)
def save(name, nodes, x_shape, inits, outs):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
u = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)
# a ReLU MLP: y = relu(x W1 + b1) W2 + b2
M, K, H, N = 100, 256, 700, 300
w = {"w1": u(K, H) * 0.2, "b1": u(H), "w2": u(H, N) * 0.1, "b2": u(N)}
mlp = [h.make_node("MatMul", ["x", "w1"], ["p"]), h.make_node("Add", ["p", "b1"], ["q"]),
       h.make_node("Relu", ["q"], ["m"]), h.make_node("MatMul", ["m", "w2"], ["r"]), h.make_node("Add", ["r", "b2"], ["y"])]
save("relu_pair", mlp, [M, K], w, ["y"])
save("relu_two", mlp, [M, K], w, ["y", "m"])
np.save(f"{d}/relu_x.npy", u(M, K) * 2)
# BERT's FFN: y = LayerNorm(x + gelu(x W1 + b1) W2 + b2), GELU as exported: 0.5 g (1 + erf(g / sqrt 2))
M, K, H = 128, 256, 1024
w = {"w1": u(K, H) * 0.1, "b1": u(H) * 0.1, "w2": u(H, K) * 0.05, "b2": u(K) * 0.1, "s2": np.array(np.sqrt(2), np.float32),
     "one": np.array(1, np.float32), "half": np.array(0.5, np.float32), "g": 1 + u(K) * 0.1, "be": u(K) * 0.1}
ffn = [h.make_node("MatMul", ["x", "w1"], ["p"]), h.make_node("Add", ["p", "b1"], ["q"]),
       h.make_node("Div", ["q", "s2"], ["e0"]), h.make_node("Erf", ["e0"], ["e1"]), h.make_node("Add", ["e1", "one"], ["e2"]),
       h.make_node("Mul", ["q", "e2"], ["e3"]), h.make_node("Mul", ["e3", "half"], ["m"]),
       h.make_node("MatMul", ["m", "w2"], ["r"]), h.make_node("Add", ["r", "b2"], ["s"]), h.make_node("Add", ["s", "x"], ["t"]),
       h.make_node("LayerNormalization", ["t", "g", "be"], ["y"], axis=-1, epsilon=1e-12)]
save("ffn_pair", ffn, [M, K], w, ["y"])
save("ffn_two", ffn, [M, K], w, ["y", "m"])
x = u(M, K)
np.save(f"{d}/ffn_x.npy", x)
bf = lambda a: torch.tensor(a).bfloat16().double().numpy()
f = lambda a: a.astype(np.float64)
q = bf(x) @ bf(w["w1"]) + f(w["b1"])
m = 0.5 * q * (1 + torch.erf(torch.tensor(q / np.sqrt(2))).numpy())
t = f(x) + bf(m) @ bf(w["w2"]) + f(w["b2"])
y = (t - t.mean(-1, keepdims=True)) / np.sqrt(t.var(-1, keepdims=True) + 1e-12) * f(w["g"]) + f(w["be"])
np.save(f"{d}/ffn_ref.npy", y)
# the two-layer graphs store the middle (a graph output: fp32) and load it back; the pair does neither
open(f"{d}/relu.save", "w").write(str(2 * 100 * 700 * 4))
open(f"{d}/ffn.save", "w").write(str(2 * 128 * 1024 * 4))
PY

run() { # run NAME INPUT [GRAPH] [OPTION]: tern run --profile of GRAPH (default NAME), outputs to $tmp/NAME, the HBM
    # bytes in $tmp/NAME.bytes, the report in $tmp/NAME.out
    local name=$1
    mkdir -p "$tmp/$name"
    expect 0 "$TERN" run "$tmp/${3:-$name}.onnx" --machine trn1 --profile --input x="$2" --output-dir "$tmp/$name" ${4:-}
    awk '/MBU/ { for (i = 1; i < NF; i++) if ($i == "(HBM") { v = $(i + 1); u = $(i + 2) } }
         END { m = u == "GB" ? 1e9 : u == "MB" ? 1e6 : u == "kB" ? 1e3 : 1; printf "%.0f\n", v * m }' \
        "$tmp/out" > "$tmp/$name.bytes"
    cp "$tmp/out" "$tmp/$name.out"
}
for t in relu ffn; do
    run ${t}_pair "$tmp/${t}_x.npy"
    run ${t}_two "$tmp/${t}_x.npy"
    run ${t}_nopair "$tmp/${t}_x.npy" ${t}_pair --no-keep-on-chip
    if [ -s "$tmp/${t}_pair/y.npy" ] && cmp -s "$tmp/${t}_pair/y.npy" "$tmp/${t}_nopair/y.npy"; then ok; else
        bad "$t: the pair's output differs from --no-keep-on-chip'"; fi
    p=$(cat "$tmp/${t}_pair.bytes") s=$(cat "$tmp/${t}_nopair.bytes") want=$(($(cat "$tmp/$t.save") / 2))
    if awk -v p="$p" -v s="$s" -v w="$want" 'BEGIN { exit !(p > 0 && s - p >= w - 0.01 * s) }'; then ok; else
        bad "$t: HBM bytes $p as a pair vs $s with --no-keep-on-chip: not the middle's $want bf16 bytes saved"; fi
    if [ -s "$tmp/${t}_pair/y.npy" ] && cmp -s "$tmp/${t}_pair/y.npy" "$tmp/${t}_two/y.npy"; then ok; else
        bad "$t: the pair's output differs from the two layers'"; fi
    p=$(cat "$tmp/${t}_pair.bytes") s=$(cat "$tmp/${t}_two.bytes") want=$(cat "$tmp/$t.save")
    # --profile prints HBM bytes to 3 significant figures: allow 1 % of the larger
    if awk -v p="$p" -v s="$s" -v w="$want" 'BEGIN { exit !(p > 0 && s - p >= w - 0.01 * s) }'; then ok; else
        bad "$t: HBM bytes $p as a pair vs $s as two layers: not the middle's $want bytes saved"; fi
    echo "$t: HBM bytes $p as a pair, $s as two layers (the middle's fp32 round trip: $want)"
    tp=$(sed -n 's/^predicted device time.*(\([0-9]*\) ps).*/\1/p' "$tmp/${t}_pair.out" | head -1)
    tt=$(sed -n 's/^predicted device time.*(\([0-9]*\) ps).*/\1/p' "$tmp/${t}_two.out" | head -1)
    if [ -n "$tp" ] && [ -n "$tt" ] && awk -v a="$tp" -v b="$tt" 'BEGIN { exit !(a < b) }'; then ok; else
        bad "$t: predicted time '$tp' ps as a pair, '$tt' ps as two layers: not lower"; fi
    echo "$t: predicted $tp ps as a pair, $tt ps as two layers"
done
if close_to_ref "BERT FFN as a pair" "$tmp/ffn_ref.npy" "$tmp/ffn_pair/y.npy" 0.05; then ok; else bad "FFN against numpy"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
