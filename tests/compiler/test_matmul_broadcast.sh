#!/usr/bin/env bash
# MatMul with both operands fed at run time (no constant weight) under numpy's batch broadcasting: either
# operand may broadcast, over any of its batch dims (size 1 or missing), e.g. [2, 1, 4, 6] x [3, 6, 5] and
# [1, 3, 4, 6] x [2, 1, 6, 5]. Each model runs on the simulated device with fp32 matmuls and its output is compared
# with numpy's matmul (relative 1e-5 of the largest value). A regression test: the lowering once indexed the
# first operand as if it had every output batch and the second as if its batch dims were the trailing ones, which
# gave wrong numbers without an error for these shapes.
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_matmul_broadcast.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

cases="bcast_a:2,1,4,6:3,6,5 bcast_both:1,3,4,6:2,1,6,5 rank2_a:4,6:2,3,6,5 rank2_b:2,3,4,6:6,5 mid1:2,1,3,4,6:2,4,1,6,5 same:3,4,6:3,6,5 b_lead1:3,4,6:1,6,5"
$py - "$tmp" $cases <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
rng = np.random.default_rng(21)
for spec in sys.argv[2:]:
    name, sa, sb = spec.split(":")
    sa = [int(v) for v in sa.split(",")]
    sb = [int(v) for v in sb.split(",")]
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    y = np.matmul(a, b)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], name,
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, sa),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, sb)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/{name}.onnx")
    np.save(f"{d}/{name}.a.npy", a)
    np.save(f"{d}/{name}.b.npy", b)
    np.save(f"{d}/{name}.want.npy", y)
PY

for spec in $cases; do
    n=${spec%%:*}
    if "$tern" run "$tmp/$n.onnx" --dtype fp32 --input a="$tmp/$n.a.npy" --input b="$tmp/$n.b.npy" \
        --output-dir "$tmp/$n.out" >"$tmp/$n.log" 2>&1; then ok; else bad "$n: tern run failed: $(tail -2 "$tmp/$n.log")"; continue; fi
    if msg=$($py - "$tmp/$n.want.npy" "$tmp/$n.out/y.npy" 2>&1 <<'PY'
import sys, numpy as np
want, got = np.load(sys.argv[1]), np.load(sys.argv[2])
if got.shape != want.shape:
    sys.exit(f"shape {got.shape}, expected {want.shape}")
err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
if not err <= 1e-5:
    sys.exit(f"max error {err:.3g} of the largest value (want <= 1e-5)")
PY
    ); then ok; else bad "$n: $msg"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
