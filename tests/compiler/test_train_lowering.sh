#!/usr/bin/env bash
# Lowerings a training step leans on (docs/performance.md, "Where the time went"), each checked bit for bit against
# numpy and for its predicted time:
#   - a [R, 1] tensor broadcast over a last axis (Expand [2048, 1] -> [2048, 1024]: norm statistics, ReduceSum
#     gradients) through SBUF rows (lower_tiles.c), below 0.3 ms (a zero-step DMA of a descriptor per element
#     took about 1.1 ms);
#   - a weight-sized tensor times, minus and divided by a run-time one-element input (the optimizer's per-step
#     scalars) as tensor_scalar's column (lower_elementwise.c): exact IEEE fp32 results;
#   - ReduceSum over the leading axis of [16, 1024, 512] (a batched linear layer's weight gradient) as
#     reduce.leading (lower_reduce.c): the rows summed in order in fp32, bit for bit, below 1 ms (the axis moved
#     innermost first took about 12 ms).
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_train_lowering.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as T, numpy_helper
d = sys.argv[1]
rng = np.random.default_rng(7)
def save(name, nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, name, ins, outs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/{name}.onnx")
vi = helper.make_tensor_value_info
save("expand", [helper.make_node("Expand", ["x", "shp"], ["y"])], [vi("x", T.FLOAT, [2048, 1])],
     [vi("y", T.FLOAT, [2048, 1024])], [numpy_helper.from_array(np.array([2048, 1024], np.int64), "shp")])
np.save(f"{d}/x.npy", rng.standard_normal((2048, 1)).astype(np.float32))
save("scalar", [helper.make_node("Mul", ["a", "s"], ["z"]), helper.make_node("Sub", ["a", "s"], ["v"]),
                helper.make_node("Div", ["s", "a"], ["w"])],
     [vi("a", T.FLOAT, [768, 1000]), vi("s", T.FLOAT, [1])], [vi(n, T.FLOAT, [768, 1000]) for n in "zvw"])
np.save(f"{d}/a.npy", (rng.standard_normal((768, 1000)) + 3).astype(np.float32))
np.save(f"{d}/s.npy", np.array([0.37], np.float32))
save("rsum", [helper.make_node("ReduceSum", ["p", "ax"], ["r"], keepdims=1)], [vi("p", T.FLOAT, [16, 1024, 512])],
     [vi("r", T.FLOAT, [1, 1024, 512])], [numpy_helper.from_array(np.array([0], np.int64), "ax")])
np.save(f"{d}/p.npy", rng.standard_normal((16, 1024, 512)).astype(np.float32))
PY

check() { # name, inputs..., then the python check on stdin
    local name=$1
    shift
    local args=()
    for i in "$@"; do args+=(--input "$i=$tmp/$i.npy"); done
    if "$tern" run "$tmp/$name.onnx" "${args[@]}" --output-dir "$tmp/out_$name" >"$tmp/run_$name.txt" 2>&1 &&
        $py - "$tmp" "$name" >"$tmp/chk_$name.txt" 2>&1; then
        ok
        cat "$tmp/chk_$name.txt"
    else
        bad "$name: $(tail -3 "$tmp/run_$name.txt") $(tail -3 "$tmp/chk_$name.txt" 2>/dev/null)"
    fi
}

PYLIB='
import re, sys, numpy as np
d, name = sys.argv[1], sys.argv[2]
def out(n): return np.load(f"{d}/out_{name}/{n}.npy")
def same(n, got, want):
    want = np.ascontiguousarray(want, dtype=np.float32)
    if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
        sys.exit(f"{name}: {n} differs from numpy (max abs {np.max(np.abs(got - want)):.3g})")
def predicted_below(limit):
    txt = open(f"{d}/run_{name}.txt").read()
    m = re.search(r"predicted device time[^:]*: ([0-9.]+) (us|ms|s)\b", txt)
    if not m:
        sys.exit("no predicted time in: " + txt[:300])
    t = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1}[m.group(2)]
    if t >= limit:
        sys.exit(f"{name}: predicted {t * 1e3:.3f} ms, expected below {limit * 1e3:.3f} ms")
    print(f"{name}: predicted {t * 1e3:.3f} ms")
'

check expand x <<PY
$PYLIB
x = np.load(f"{d}/x.npy")
same("y", out("y"), np.broadcast_to(x, (2048, 1024)))
predicted_below(3e-4)
PY
check scalar a s <<PY
$PYLIB
a, s = np.load(f"{d}/a.npy"), np.load(f"{d}/s.npy")
same("z", out("z"), a * s[0])
same("v", out("v"), a - s[0])
same("w", out("w"), s[0] / a)
PY
check rsum p <<PY
$PYLIB
p = np.load(f"{d}/p.npy")
acc = p[0].copy()
for r in range(1, 16):
    acc = (acc + p[r]).astype(np.float32)  # the rows in order, fp32
same("r", out("r"), acc[None])
predicted_below(1e-3)
PY
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
