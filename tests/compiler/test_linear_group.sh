#!/usr/bin/env bash
# Linear layers with run-time weights that read one input (Q, K and V; gate and up; their dW = X^T dY) are one
# multi-output GEMM with the weights side by side (lower_linear.c linear_group, tern_lib_gemm_multi): the input
# streams from HBM once for all of them. Against the same graphs where the layers read the input through
# Identity views (so each is its own GEMM, the route before the fusion; in the forward each also reads the input
# for its own transpose, made on chip):
#  - every output byte for byte (K above 1,024: the GEMM's K blocks; widths that put a 512-column tile and the
#    1,024-column block across two weights);
#  - the HBM bytes of --profile lower by most of the input's extra reads (so the fusion did happen).
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_linear_group.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h
d = sys.argv[1]
rng = np.random.default_rng(11)
def save(name, nodes, ins, outs):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(n, T.BFLOAT16, s) for n, s in ins],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
# forward: y_j = X W_j, X [M, K]
M, K, Ns = 1024, 2048, (384, 448, 300)
ins = [("x", [M, K])] + [(f"w{j}", [K, n]) for j, n in enumerate(Ns)]
ys = [f"y{j}" for j in range(len(Ns))]
save("fwd_group", [h.make_node("MatMul", ["x", f"w{j}"], [ys[j]]) for j in range(len(Ns))], ins, ys)
save("fwd_separate", [h.make_node("Identity", ["x"], [f"x{j}"]) for j in range(len(Ns))] +
     [h.make_node("MatMul", [f"x{j}", f"w{j}"], [ys[j]]) for j in range(len(Ns))], ins, ys)
np.save(f"{d}/x.npy", rng.uniform(-2, 2, (M, K)).astype(np.float32))
for j, n in enumerate(Ns):
    np.save(f"{d}/w{j}.npy", rng.uniform(-2, 2, (K, n)).astype(np.float32))
# backward: dW_j = X^T dY_j, each through its own Transpose of X [R, C] (as the training graphs write it)
R, C, Nd = 1536, 1024, (128, 128, 640)
ins = [("a", [R, C])] + [(f"g{j}", [R, n]) for j, n in enumerate(Nd)]
ws = [f"dw{j}" for j in range(len(Nd))]
nodes = []
for j in range(len(Nd)):
    nodes += [h.make_node("Transpose", ["a"], [f"at{j}"], perm=[1, 0]), h.make_node("MatMul", [f"at{j}", f"g{j}"], [ws[j]])]
save("bwd_group", nodes, ins, ws)
save("bwd_separate", [h.make_node("Identity", ["a"], [f"a{j}"]) for j in range(len(Nd))] +
     [n for j in range(len(Nd)) for n in (h.make_node("Transpose", [f"a{j}"], [f"at{j}"], perm=[1, 0]),
                                          h.make_node("MatMul", [f"at{j}", f"g{j}"], [ws[j]]))], ins, ws)
np.save(f"{d}/a.npy", rng.uniform(-2, 2, (R, C)).astype(np.float32))
for j, n in enumerate(Nd):
    np.save(f"{d}/g{j}.npy", rng.uniform(-2, 2, (R, n)).astype(np.float32))
# the bytes the fusion saves: the input (its transpose) is read once per 1,024-column block of the weights side
# by side instead of once per block of each. The forward's layers, one and two N blocks wide, make their
# transposes on chip (lower_linear.c, transpose_on_chip), so neither route writes one to HBM: only the input's
# re-reads differ
blocks = lambda ns: sum(-(-n // 1024) for n in ns) - -(-sum(ns) // 1024)
open(f"{d}/fwd.save", "w").write(f"{blocks(Ns) * M * K * 2} 0")
open(f"{d}/bwd.save", "w").write(f"{blocks(Nd) * R * C * 2} 0")
PY

run() { # run NAME OUTDIR INPUTS...: tern run --profile, outputs to OUTDIR, the HBM bytes in $tmp/NAME.bytes
    local name=$1 out=$2
    shift 2
    mkdir -p "$out"
    expect 0 "$TERN" run "$tmp/$name.onnx" --machine trn1 --profile "$@" --output-dir "$out"
    awk '/MBU/ { for (i = 1; i < NF; i++) if ($i == "(HBM") { v = $(i + 1); u = $(i + 2) } }
         END { m = u == "GB" ? 1e9 : u == "MB" ? 1e6 : u == "kB" ? 1e3 : 1; printf "%.0f\n", v * m }' \
        "$tmp/out" > "$tmp/$name.bytes"
}
same() { # same FILE FILE: byte for byte
    if [ -s "$1" ] && cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ (or are missing)"; fi
}
saved() { # saved TAG: the separate route's HBM bytes exceed the group's by the transposes it makes and at least
    # 90 % of the input's re-reads
    local g s want
    g=$(cat "$tmp/$1_group.bytes") s=$(cat "$tmp/$1_separate.bytes") want=$(cat "$tmp/$1.save")
    if awk -v g="$g" -v s="$s" -v w="$want" 'BEGIN { split(w, a, " "); exit !(g > 0 && s - g >= a[2] + 0.9 * a[1]) }'; then
        ok
    else
        bad "$1: HBM bytes $g grouped vs $s separate: not the $want bytes (input re-reads, transposes) saved"
    fi
    echo "$1: HBM bytes $g grouped, $s separate (input re-reads, transposes: $want)"
}
for r in group separate; do
    run fwd_$r "$tmp/fwd_$r" --input x="$tmp/x.npy" --input w0="$tmp/w0.npy" --input w1="$tmp/w1.npy" \
        --input w2="$tmp/w2.npy"
    run bwd_$r "$tmp/bwd_$r" --input a="$tmp/a.npy" --input g0="$tmp/g0.npy" --input g1="$tmp/g1.npy" \
        --input g2="$tmp/g2.npy"
done
for y in y0 y1 y2; do same "$tmp/fwd_group/$y.npy" "$tmp/fwd_separate/$y.npy"; done
for y in dw0 dw1 dw2; do same "$tmp/bwd_group/$y.npy" "$tmp/bwd_separate/$y.npy"; done
saved fwd
saved bwd
# a loose check that the grouped outputs are right: BF16 products of the BF16-rounded inputs
if $PY - "$tmp" <<'PY'; then ok; else bad "grouped outputs against numpy"; fi
import sys, numpy as np, torch
d = sys.argv[1]
bf = lambda a: torch.tensor(a).bfloat16().float().numpy().astype(np.float64)
x, a = bf(np.load(f"{d}/x.npy")), bf(np.load(f"{d}/a.npy"))
for j in range(3):
    for ref, got in ((x @ bf(np.load(f"{d}/w{j}.npy")), f"fwd_group/y{j}"), (a.T @ bf(np.load(f"{d}/g{j}.npy")), f"bwd_group/dw{j}")):
        err = np.abs(np.load(f"{d}/{got}.npy") - ref).max() / np.abs(ref).max()
        assert err < 1e-2, (got, err)
PY
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
