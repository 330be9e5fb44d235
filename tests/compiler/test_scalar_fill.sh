#!/usr/bin/env bash
# A one-element tensor broadcast over a large one (Expand of a [1] input to [700, 1001], 700,700 elements, and the
# same scalar as Add's second operand, as the optimizer's per-step scalars meet weight-sized tensors) is
# materialised through an SBUF tile stored in [128, 1024] blocks plus a tail (lower_tiles.c, tile_fill_copy), not
# one HBM-to-HBM DMA with a zero-step source. Checks the outputs bit for bit against numpy (fp32 and int32), and
# that the Expand's predicted time is below 0.2 ms (86 us; one zero-step DMA of 700,700 elements, about 0.38 ms).
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_scalar_fill.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
for name, t, npdt in [("f", TensorProto.FLOAT, np.float32), ("i", TensorProto.INT32, np.int32)]:
    shape = numpy_helper.from_array(np.array([700, 1001], np.int64), "shape")
    g = helper.make_graph([helper.make_node("Expand", ["b", "shape"], ["y"])], "fill",
                          [helper.make_tensor_value_info("b", t, [1])],
                          [helper.make_tensor_value_info("y", t, [700, 1001])], [shape])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/expand_{name}.onnx")
    np.save(f"{d}/b_{name}.npy", np.array([-1.75 if name == "f" else 123457], npdt))
PY

for k in f i; do
    if "$tern" run "$tmp/expand_$k.onnx" --dtype fp32 --input b="$tmp/b_$k.npy" --output-dir "$tmp/out_$k" >"$tmp/run_$k.txt" 2>&1 &&
        $py - "$tmp/b_$k.npy" "$tmp/out_$k/y.npy" "$tmp/run_$k.txt" <<'PY'
import re, sys, numpy as np
b, y = np.load(sys.argv[1]), np.load(sys.argv[2])
want = np.broadcast_to(b, (700, 1001))
if y.dtype != want.dtype or y.shape != want.shape or y.tobytes() != np.ascontiguousarray(want).tobytes():
    sys.exit(f"output {y.dtype}{y.shape} differs from numpy's broadcast {want.dtype}{want.shape}")
txt = open(sys.argv[3]).read()
m = re.search(r"([0-9.]+) (us|ms|s)\b", txt)
if not m:
    sys.exit("no predicted time in: " + txt[:300])
t = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1}[m.group(2)]
if t >= 2e-4:
    sys.exit(f"predicted {t * 1e3:.3f} ms, expected below 0.2 ms")
print(f"expand {y.dtype}: {t * 1e6:.1f} us")
PY
    then ok; else bad "Expand of a scalar to [700, 1001] ($k): $(tail -3 "$tmp/run_$k.txt")"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
