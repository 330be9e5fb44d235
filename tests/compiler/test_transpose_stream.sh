#!/bin/bash
# Transposes of many slices as one pipelined stream (src/kernel/lib_transpose.c, tern_lib_transpose_exact_n): on
# NeuronCore-v2 the Transpose op moves 32 x 32 blocks through VectorE, each strip loaded two strips ahead in three
# rotating buffers, across every batch slice of the op. Checked on trn1:
#   - the bits: batched last-two-axes swaps ([16, 2048, 64], [5, 100, 70] with partial strips and blocks, [3, 130,
#     600] with two column chunks) and a strided-source transpose ([2, 40, 4, 48] -> [2, 4, 48, 40], the second
#     path), fp32 inputs holding -0, +-inf, NaN and subnormals, equal to numpy bit for bit;
#   - the same bits on trn2 (NeuronCore-v3: 128 x 128 blocks through transpose_pe and PSUM, streamed alike);
#   - the time: [256, 128, 64] (one strip a slice) predicts at most half the slice-by-slice stream's 0.645 ms
#     (measured 0.218 ms; as long as [16, 2048, 64], which is the same bytes) and [16, 2048, 64] likewise.
set -u
TERN=${1:?usage: test_transpose_stream.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'PYEOF' || { echo "NOT OK: the models could not be made" >&2; exit 1; }
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto
d = sys.argv[1]
rng = np.random.default_rng(0)
cases = {"b16": ([16, 2048, 64], [0, 2, 1]), "odd": ([5, 100, 70], [0, 2, 1]), "wide": ([3, 130, 600], [0, 2, 1]),
         "kt": ([2, 40, 4, 48], [0, 2, 3, 1]), "b256": ([256, 128, 64], [0, 2, 1])}
for name, (shape, perm) in cases.items():
    out = [shape[p] for p in perm]
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/{name}.onnx")
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    special = np.array([-0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3.4e38], np.float32)
    idx = rng.choice(flat.size, size=min(flat.size, 700), replace=False)
    flat[idx] = np.resize(special, idx.size)
    np.save(f"{d}/{name}.x.npy", x)
    np.save(f"{d}/{name}.want.npy", np.transpose(x, perm))
PYEOF
for n in b16 odd wide kt b256; do
    expect 0 "$TERN" run "$tmp/$n.onnx" --machine trn1 --dtype fp32 --input x="$tmp/$n.x.npy" --output-dir "$tmp/$n"
    sed -n 's/.*predicted device time on [^:]*: \([0-9.]*\) ms.*/\1/p' "$tmp/out" > "$tmp/$n.ms"
    if "$PY" -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if a.shape==b.shape and a.tobytes()==b.tobytes() else 1)" \
        "$tmp/$n/y.npy" "$tmp/$n.want.npy"; then ok; else bad "$n: the transpose's bits differ from numpy's"; fi
done
# NeuronCore-v3 (trn2): transpose_pe blocks of 128 through PSUM, streamed the same way for slices under 512 x 512
for n in b16 odd kt b256; do
    expect 0 "$TERN" run "$tmp/$n.onnx" --machine trn2.48xlarge --dtype fp32 --input x="$tmp/$n.x.npy" --output-dir "$tmp/v3$n"
    if "$PY" -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if a.shape==b.shape and a.tobytes()==b.tobytes() else 1)" \
        "$tmp/v3$n/y.npy" "$tmp/$n.want.npy"; then ok; else bad "$n on trn2: the transpose's bits differ from numpy's"; fi
done
for n in b16 b256; do
    if "$PY" -c "import sys; sys.exit(0 if float(open(sys.argv[1]).read()) <= 0.645 / 2 else 1)" "$tmp/$n.ms"; then ok
    else bad "$n: predicted $(cat "$tmp/$n.ms") ms, more than half of the unpipelined 0.645 ms"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
