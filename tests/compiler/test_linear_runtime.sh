#!/usr/bin/env bash
# Linear layers with run-time weights (a training step's, the planner's per-rank graphs), BF16 matmuls: the two
# HBM savings of lower_linear.c give the bits of the routes they replace.
#  - a folded Transpose (dW = X^T dY): y = MatMul(Transpose(X), W) against the same graph with X^T also a graph
#    output (then the Transpose is copied and transposed back, the route before the fold);
#  - one transpose shared by the linears that read the same input: y1 = X W1, y2 = X W2, y3 = X W3 against the
#    same graph where y2 and y3 read X through Identity views (each then makes its own transpose);
# each output byte for byte, rows above 4,096 included (the folded GEMM's row blocks), and the predicted time
# below the other route's (so the saving did happen). Gets build/tern as $1.
set -u
TERN=${1:?usage: test_linear_runtime.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: generating the graphs"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h
d = sys.argv[1]
rng = np.random.default_rng(7)
def save(name, nodes, ins, outs):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(n, T.BFLOAT16, s) for n, s in ins],
                     [h.make_tensor_value_info(n, T.BFLOAT16, None) for n in outs])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f"{d}/{name}.onnx")
for tag, R, K, N in (("a", 512, 384, 320), ("b", 640, 4224, 192)):  # b: X^T has 4,224 rows (two row blocks)
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]), h.make_node("MatMul", ["xt", "w"], ["y"])]
    save(f"fold_{tag}", nodes, [("x", [R, K]), ("w", [R, N])], ["y"])
    save(f"copy_{tag}", nodes, [("x", [R, K]), ("w", [R, N])], ["y", "xt"])
    np.save(f"{d}/x_{tag}.npy", rng.uniform(-2, 2, (R, K)).astype(np.float32))
    np.save(f"{d}/w_{tag}.npy", rng.uniform(-2, 2, (R, N)).astype(np.float32))
M, K = 1024, 512
ins = [("x", [M, K]), ("w1", [K, 256]), ("w2", [K, 128]), ("w3", [K, 384])]
save("shared", [h.make_node("MatMul", ["x", w], [y]) for w, y in (("w1", "y1"), ("w2", "y2"), ("w3", "y3"))],
     ins, ["y1", "y2", "y3"])
save("separate", [h.make_node("Identity", ["x"], ["x2"]), h.make_node("Identity", ["x"], ["x3"]),
                  h.make_node("MatMul", ["x", "w1"], ["y1"]), h.make_node("MatMul", ["x2", "w2"], ["y2"]),
                  h.make_node("MatMul", ["x3", "w3"], ["y3"])], ins, ["y1", "y2", "y3"])
np.save(f"{d}/xs.npy", rng.uniform(-2, 2, (M, K)).astype(np.float32))
for w, n in (("w1", 256), ("w2", 128), ("w3", 384)):
    np.save(f"{d}/{w}.npy", rng.uniform(-2, 2, (K, n)).astype(np.float32))
PY

run() { # run NAME OUTDIR INPUTS...: tern run, outputs to OUTDIR, the predicted ms in $tmp/NAME.ms
    local name=$1 out=$2
    shift 2
    mkdir -p "$out"
    expect 0 "$TERN" run "$tmp/$name.onnx" --machine trn1 "$@" --output-dir "$out"
    sed -n 's/.*predicted device time on [^:]*: \([0-9.]*\) ms.*/\1/p' "$tmp/out" > "$tmp/$name.ms"
}
same() { # same FILE FILE: byte for byte
    if [ -s "$1" ] && cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ (or are missing)"; fi
}
for t in a b; do
    run fold_$t "$tmp/fold_$t" --input x="$tmp/x_$t.npy" --input w="$tmp/w_$t.npy"
    run copy_$t "$tmp/copy_$t" --input x="$tmp/x_$t.npy" --input w="$tmp/w_$t.npy"
    same "$tmp/fold_$t/y.npy" "$tmp/copy_$t/y.npy"
    if awk -v f="$(cat "$tmp/fold_$t.ms")" -v c="$(cat "$tmp/copy_$t.ms")" 'BEGIN { exit !(f > 0 && f < c) }'; then
        ok
    else
        bad "fold_$t: $(cat "$tmp/fold_$t.ms") ms, not below the copy route's $(cat "$tmp/copy_$t.ms") ms"
    fi
done
I=(--input x="$tmp/xs.npy" --input w1="$tmp/w1.npy" --input w2="$tmp/w2.npy" --input w3="$tmp/w3.npy")
run shared "$tmp/shared" "${I[@]}"
run separate "$tmp/separate" "${I[@]}"
for y in y1 y2 y3; do same "$tmp/shared/$y.npy" "$tmp/separate/$y.npy"; done
if awk -v f="$(cat "$tmp/shared.ms")" -v c="$(cat "$tmp/separate.ms")" 'BEGIN { exit !(f > 0 && f < c) }'; then
    ok
else
    bad "shared: $(cat "$tmp/shared.ms") ms, not below the separate transposes' $(cat "$tmp/separate.ms") ms"
fi
# the reference: the outputs are BF16 products of the BF16-rounded inputs (a loose check that they are right)
if $PY - "$tmp" <<'PY'; then ok; else bad "shared outputs against numpy"; fi
import sys, numpy as np, torch
d = sys.argv[1]
bf = lambda a: torch.tensor(a).bfloat16().float().numpy()
x = bf(np.load(f"{d}/xs.npy"))
for w, y in (("w1", "y1"), ("w2", "y2"), ("w3", "y3")):
    ref = x.astype(np.float64) @ bf(np.load(f"{d}/{w}.npy")).astype(np.float64)
    got = np.load(f"{d}/shared/{y}.npy").astype(np.float64)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    print(y, "max relative error", err)
    assert err < 1e-2, err
PY
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
