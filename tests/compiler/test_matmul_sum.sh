#!/usr/bin/env bash
# Sums of linear-layer products (a backward's input gradients dX = dQ Wq^T + dK Wk^T + dV Wv^T) computed on chip
# (fuse_matmul_sum.c, tern_lib_gemm_sum): the products stay in PSUM, the Adds run there and in SBUF, and only
# the sum is stored. Against the same graphs where each product reaches its Add through an Identity view (so each
# is its own GEMM writing fp32 to HBM and the Adds read it back, the route before the fusion):
#  - every output byte for byte, on trn1 and trn2: two products (K 200 over two K tiles, 1,100 rows over two row
#    blocks, 700 columns over a 1,024-column block and a ragged 512-column tile; rows of zeros in the inputs, so
#    sums of zeros), three as the planner's graphs write them (BF16 values: the products stored in fp32,
#    the partial sum rounded to BF16, the sum in BF16), four as a balanced tree (partial sum + partial sum);
#  - tern compile says how many products it summed on chip (none for the separate graphs), and the HBM bytes of
#    --profile lower by the fp32 products' write and read (within the printed figures' rounding).
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_matmul_sum.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h
d = sys.argv[1]
rng = np.random.default_rng(5)
def save(name, nodes, ins, outs):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in ins],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
def graphs(name, M, N, Ks, tree, bf16):
    """tree: nested tuples of term indices; bf16: BF16 values between the Casts (as the planner's graphs)"""
    ins = [(f"x{j}", [M, K]) for j, K in enumerate(Ks)] + [(f"w{j}", [K, N]) for j, K in enumerate(Ks)]
    for sep in (0, 1):
        nodes, cnt = [], [0]
        def val(v):  # the graph input, cast to BF16 when the graph computes in it
            if not bf16:
                return v
            nodes.append(h.make_node("Cast", [v], [v + "_b"], to=T.BFLOAT16))
            return v + "_b"
        xs = [val(f"x{j}") for j in range(len(Ks))]
        ws = [val(f"w{j}") for j in range(len(Ks))]
        def emit(t):
            if isinstance(t, int):
                nodes.append(h.make_node("MatMul", [xs[t], ws[t]], [f"p{t}"]))
                if sep:
                    nodes.append(h.make_node("Identity", [f"p{t}"], [f"p{t}_v"]))
                    return f"p{t}_v"
                return f"p{t}"
            a, b = emit(t[0]), emit(t[1])
            cnt[0] += 1
            nodes.append(h.make_node("Add", [a, b], [f"s{cnt[0]}"]))
            return f"s{cnt[0]}"
        y = emit(tree)
        nodes.append(h.make_node("Cast", [y], ["y"], to=T.FLOAT) if bf16 else h.make_node("Identity", [y], ["y"]))
        save(f"{name}_{'separate' if sep else 'fused'}", nodes, ins, ["y"])
    for j, K in enumerate(Ks):
        x = rng.uniform(-2, 2, (M, K)).astype(np.float32)
        w = rng.uniform(-2, 2, (K, N)).astype(np.float32)
        x[3] = 0.0  # every product's row 3 is a sum of zeros
        x[7 + j] = 0.0  # and row 7 + j of product j alone
        np.save(f"{d}/{name}_x{j}.npy", x)
        np.save(f"{d}/{name}_w{j}.npy", w)
    # the HBM bytes the fusion saves: each product's fp32 write and read, less (BF16) the sum's write and read
    # that the separate route saves by taking the final Cast into its elementwise group with the Adds
    open(f"{d}/{name}.save", "w").write(str(len(Ks) * 2 * M * N * 4 - (2 * M * N * 2 if bf16 else 0)))
graphs("two", 1100, 700, (200, 96), (0, 1), False)
graphs("three", 512, 1024, (128, 128, 128), (2, (0, 1)), True)
graphs("four", 256, 640, (64, 448, 130, 1024), ((0, 1), (2, 3)), False)
PY

for m in trn1 trn2; do
    for name in two three four; do
        nin=$(case $name in two) echo 2;; three) echo 3;; four) echo 4;; esac)
        args=()
        for ((j = 0; j < nin; j++)); do
            args+=(--input "x$j=$tmp/${name}_x$j.npy" --input "w$j=$tmp/${name}_w$j.npy")
        done
        for r in fused separate; do
            expect 0 "$TERN" compile "$tmp/${name}_$r.onnx" -o "$tmp/${name}_$r.tern" --machine $m
            if [ $r = fused ]; then
                contains "$tmp/out" "$nin linear-layer products summed on chip in 1 GEMM"
            elif grep -q "summed on chip" "$tmp/out"; then
                bad "$name ($m): the separate graph's products were summed on chip: $(cat "$tmp/out")"
            else
                ok
            fi
            mkdir -p "$tmp/$m/${name}_$r"
            expect 0 "$TERN" run "$tmp/${name}_$r.onnx" --machine $m --profile "${args[@]}" \
                --output-dir "$tmp/$m/${name}_$r"
            awk '/MBU/ { for (i = 1; i < NF; i++) if ($i == "(HBM") { v = $(i + 1); u = $(i + 2) } }
                 END { m = u == "GB" ? 1e9 : u == "MB" ? 1e6 : u == "kB" ? 1e3 : 1; printf "%.0f\n", v * m }' \
                "$tmp/out" > "$tmp/$m/${name}_$r.bytes"
        done
        if [ -s "$tmp/$m/${name}_fused/y.npy" ] && cmp -s "$tmp/$m/${name}_fused/y.npy" "$tmp/$m/${name}_separate/y.npy"; then
            ok
        else
            bad "$name ($m): the fused sum differs from the separate products and Adds"
        fi
        f=$(cat "$tmp/$m/${name}_fused.bytes") s=$(cat "$tmp/$m/${name}_separate.bytes") want=$(cat "$tmp/$name.save")
        if awk -v f="$f" -v s="$s" -v w="$want" 'BEGIN { exit !(f > 0 && s - f >= 0.99 * w) }'; then
            ok
        else
            bad "$name ($m): HBM bytes $f fused vs $s separate: not the $want bytes of the fp32 products saved"
        fi
        echo "$name ($m): HBM bytes $f fused, $s separate"
    done
done
# a loose check that the sums are right: BF16 products of the BF16-rounded inputs
if $PY - "$tmp" <<'PY'; then ok; else bad "fused sums against numpy"; fi
import sys, numpy as np, torch
d = sys.argv[1]
bf = lambda a: torch.tensor(a).bfloat16().float().numpy().astype(np.float64)
for name, n in (("two", 2), ("three", 3), ("four", 4)):
    ref = sum(bf(np.load(f"{d}/{name}_x{j}.npy")) @ bf(np.load(f"{d}/{name}_w{j}.npy")) for j in range(n))
    got = np.load(f"{d}/trn1/{name}_fused/y.npy")
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-2, (name, err)
    assert (got[3] == 0).all(), name
PY
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
