#!/usr/bin/env bash
# A binary op whose second operand broadcasts along trailing size-1 axes ([1, 256, 1024] x [1, 256, 1], as in
# RMSNorm and squeeze-excitation) lowers to VectorE tensor_scalar with a per-partition scalar column
# (tern_lib_binary_col), not a broadcast copy. This test makes the trailing-axis and the [1, 1, 1024] models for
# Mul, Add, Sub and Div, runs them on the simulated device with --dtype fp32 and the default (bf16), checks the
# outputs bit for bit against numpy's fp32 op (Div as fp32 division), and asserts the trailing-axis case's
# predicted time is at most 1.2x the [1, 1, 1024] case's. Also checked bit for bit: the column as the first
# operand (Sub and Div reversed), a squeeze-excitation shape [1, 64, 56, 56] x [1, 64, 1, 1], a batched column
# ([2, 8, 300] x [2, 8, 1]), an int32 comparison with a bool output (Less) and an int32 Mul over two trailing
# size-1 axes ([4, 6, 5] x [4, 1, 1]; the column is widened from int32 on chip).
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_broadcast_speed.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

# case NAME OP A_SHAPE B_SHAPE DTYPE: the model NAME.onnx (y = a OP b) and its inputs NAME.a.npy, NAME.b.npy
$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
rng = np.random.default_rng(14)
TY = {"f": (TensorProto.FLOAT, np.float32), "i": (TensorProto.INT32, np.int32)}
def case(name, op, sa, sb, dt="f", out_bool=False):
    t, npdt = TY[dt]
    ys = list(np.broadcast_shapes(tuple(sa), tuple(sb)))
    yt = TensorProto.BOOL if out_bool else t
    g = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"])], name,
                          [helper.make_tensor_value_info("a", t, sa), helper.make_tensor_value_info("b", t, sb)],
                          [helper.make_tensor_value_info("y", yt, ys)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/{name}.onnx")
    if dt == "f":
        a = rng.standard_normal(sa).astype(npdt)
        b = rng.standard_normal(sb).astype(npdt)
        b[np.abs(b) < 1e-3] = 0.5  # Div: no huge quotients (they would still be exact, but keep values ordinary)
    else:
        a = rng.integers(-1000, 1000, sa).astype(npdt)
        b = rng.integers(-1000, 1000, sb).astype(npdt)
    np.save(f"{d}/{name}.a.npy", a)
    np.save(f"{d}/{name}.b.npy", b)
for op in ["Mul", "Add", "Sub", "Div"]:
    case(f"{op}_trail", op, [1, 256, 1024], [1, 256, 1])
    case(f"{op}_row", op, [1, 256, 1024], [1, 1, 1024])
for op in ["Sub", "Div"]:
    case(f"{op}_rev", op, [1, 256, 1], [1, 256, 1024])
case("Mul_se", "Mul", [1, 64, 56, 56], [1, 64, 1, 1])
case("Div_lead", "Div", [2, 8, 300], [2, 8, 1])
case("Less_int", "Less", [4, 130, 7], [4, 130, 1], "i", out_bool=True)
case("Mul_int2", "Mul", [4, 6, 5], [4, 1, 1], "i")
PY

# numpy reference, bit for bit (NaN-free inputs; -0 and +0 distinguished by comparing bit patterns)
check() { # check NAME OP DIR
    $py - "$tmp/$1" "$2" "$3/y.npy" <<'PY'
import sys, numpy as np
base, op, out = sys.argv[1:]
a, b = np.load(base + ".a.npy"), np.load(base + ".b.npy")
f = {"Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Div": np.divide, "Less": np.less}[op]
if op == "Div" and a.dtype == np.float32:
    want = np.divide(a, b, dtype=np.float32)
elif op == "Mul" and a.dtype == np.int32:
    want = np.multiply(a, b, dtype=np.int32)
else:
    want = f(a, b)
y = np.load(out)
if want.dtype == np.bool_ and y.dtype == np.uint8:
    want = want.astype(np.uint8)  # a bool output is uint8 on the device; --output-dir writes it as such (0/1)
if y.shape != want.shape or y.dtype != want.dtype:
    sys.exit(f"{base}: output {y.dtype}{y.shape}, expected {want.dtype}{want.shape}")
if not np.array_equal(y.view(np.uint8), want.view(np.uint8)):
    bad = np.argwhere(y != want)
    sys.exit(f"{base}: {len(bad)} elements differ, first at {bad[0] if len(bad) else '(sign of zero)'}")
PY
}

ms() { # ms LOGFILE: the predicted device time in ms
    sed -n 's/^predicted device time on .*: \([0-9.]*\) ms.*/\1/p' "$1"
}

run_case() { # run_case NAME OP DTYPE
    local n=$1 op=$2 dt=$3 out="$tmp/$1.$3"
    if "$tern" run "$tmp/$n.onnx" --dtype "$dt" --input a="$tmp/$n.a.npy" --input b="$tmp/$n.b.npy" \
        --output-dir "$out" >"$out.log" 2>&1; then ok; else bad "$n --dtype $dt failed: $(tail -2 "$out.log")"; return; fi
    if msg=$(check "$n" "$op" "$out" 2>&1); then ok; else bad "$n --dtype $dt: $msg"; fi
}

for dt in fp32 bf16; do
    for op in Mul Add Sub Div; do
        run_case "${op}_trail" "$op" "$dt"
        run_case "${op}_row" "$op" "$dt"
        expect 0 "$tern" run "$tmp/${op}_trail.onnx" --dtype "$dt" --timing-only
        tt=$(ms "$tmp/out")
        expect 0 "$tern" run "$tmp/${op}_row.onnx" --dtype "$dt" --timing-only
        tr=$(ms "$tmp/out")
        if [ -n "$tt" ] && [ -n "$tr" ] && awk -v t="$tt" -v r="$tr" 'BEGIN { exit !(t > 0 && r > 0 && t <= 1.2 * r) }'
        then ok; else bad "$op --dtype $dt: [1,256,1] predicts ${tt:-?} ms, over 1.2x the [1,1,1024] case's ${tr:-?} ms"; fi
        echo "$op --dtype $dt: trailing [1,256,1] ${tt:-?} ms, row [1,1,1024] ${tr:-?} ms"
    done
done
for dt in fp32 bf16; do
    run_case Sub_rev Sub "$dt"
    run_case Div_rev Div "$dt"
    run_case Mul_se Mul "$dt"
    run_case Div_lead Div "$dt"
    run_case Less_int Less "$dt"
    run_case Mul_int2 Mul "$dt"
done

# the checker can fail: a flipped low bit in one element must be caught
cp "$tmp/Mul_trail.fp32/y.npy" "$tmp/keep.npy"
$py -c "import sys, numpy as np; y = np.load(sys.argv[1]); y.view(np.uint32)[0, 3, 5] ^= 1; np.save(sys.argv[1], y)" \
    "$tmp/Mul_trail.fp32/y.npy"
if check Mul_trail Mul "$tmp/Mul_trail.fp32" >/dev/null 2>&1; then bad "checker accepted a flipped bit"; else ok; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
