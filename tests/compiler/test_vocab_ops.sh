#!/usr/bin/env bash
# Softmax, LogSoftmax, ArgMax/ArgMin and TopK over a real vocabulary (rows of 50,257 and 128,256 fp32 values, longer
# than one SBUF partition holds), made here with onnx.helper and run with `tern run`, against numpy:
#  - Softmax within 1e-4 relative and LogSoftmax within 1e-4 absolute of float64 numpy (measured: 9e-6);
#  - ArgMax (keepdims 0 and 1, select_last_index 0 and 1) and ArgMin equal to numpy's, with the row's best value
#    planted at three columns in different chunks, so ties must go to the first (or last) one;
#  - TopK k=5 (largest 1 and 0): values and indices equal to a stable sort's, with equal values planted across
#    chunks (ties by the lower index);
#  - rows that fit keep the rules they had: Softmax of 1,000 and 12,000 columns (tern_lib_softmax) and LogSoftmax
#    of 1,000 (the general axis rule) hash to the bytes the code before the chunked rules produced; ArgMax/TopK
#    there equal numpy's (12,000 columns: ArgMax/ArgMin and LogSoftmax were refused before, now chunked).
# Inputs are computed from an integer formula, not a random generator, so the hashes do not depend on numpy's.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_vocab_ops.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as TP
d = sys.argv[1]
def save(name, op, shape, outs, **attrs):
    x = helper.make_tensor_value_info("x", TP.FLOAT, shape)
    inits, ins = [], ["x"]
    if op == "TopK":
        inits = [helper.make_tensor("k", TP.INT64, [1], [attrs.pop("k")])]
        ins.append("k")
    n = helper.make_node(op, ins, outs, **attrs)
    et = {"v": TP.FLOAT, "i": TP.INT64, "y": TP.INT64 if op.startswith("Arg") else TP.FLOAT}
    g = helper.make_graph([n], name, [x], [helper.make_tensor_value_info(o, et[o], None) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, f"{d}/{name}.onnx")
for R, C in [(4, 50257), (2, 128256), (3, 1000), (2, 12000)]:
    i = np.arange(R * C, dtype=np.int64).reshape(R, C)
    x = (((i * 2654435761) % 100003) / 100003.0 * 16.0 - 8.0).astype(np.float32)
    if C > 16384: # the row's best (and worst) value at three columns in different chunks, equal runners-up too
        for r in range(R):
            for j, col in enumerate([700 + r, 20000 + r, C - 3]):
                x[r, col] = 9.5
                x[r, (col + 5000) % C] = -9.5
                x[r, (col + 9000) % C] = 9.25
    np.save(f"{d}/x_{C}.npy", x)
    for op in ["Softmax", "LogSoftmax"]:
        save(f"{op}_{C}", op, [R, C], ["y"], axis=-1)
    save(f"ArgMax_{C}_k1", "ArgMax", [R, C], ["y"], axis=-1, keepdims=1)
    save(f"ArgMax_{C}_k0", "ArgMax", [R, C], ["y"], axis=-1, keepdims=0)
    save(f"ArgMax_{C}_last", "ArgMax", [R, C], ["y"], axis=-1, keepdims=0, select_last_index=1)
    save(f"ArgMin_{C}_k0", "ArgMin", [R, C], ["y"], axis=-1, keepdims=0)
    save(f"TopK_{C}_l1", "TopK", [R, C], ["v", "i"], axis=-1, k=5, largest=1)
    save(f"TopK_{C}_l0", "TopK", [R, C], ["v", "i"], axis=-1, k=5, largest=0)
PY

check() { # check MODEL C: run it, compare with numpy
    expect 0 "$TERN" run "$tmp/$1.onnx" --input "x=$tmp/x_$2.npy" --output-dir "$tmp/o_$1"
    if $PY - "$tmp" "$1" "$2" <<'PY'; then ok; else bad "$1 differs from numpy"; fi
import sys, hashlib, numpy as np
d, name, C = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.load(f"{d}/x_{C}.npy"); o = f"{d}/o_{name}"
op = name.split("_")[0]
# the byte hashes of the outputs before the chunked rules (rows that fit keep their rules)
ref = {"Softmax_1000": "2ae5bd71e2d917c6", "LogSoftmax_1000": "335986afe24e73de",
       "Softmax_12000": "541ba4047baa216e"}
def fail(msg):
    print(name, msg); sys.exit(1)
if op in ("Softmax", "LogSoftmax"):
    y = np.load(f"{o}/y.npy"); x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True); e = np.exp(x64 - m); s = e.sum(-1, keepdims=True)
    if op == "Softmax":
        err = (abs(y - e / s) / (e / s)).max()
    else:
        err = abs(y - (x64 - m - np.log(s))).max()
    if y.shape != x.shape or not err <= 1e-4:
        fail(f"shape {y.shape}, error {err}")
    h = hashlib.sha256(np.ascontiguousarray(y, np.float32).tobytes()).hexdigest()[:16]
    if name in ref and h != ref[name]:
        fail(f"bytes hash {h}, expected {ref[name]}")
elif op in ("ArgMax", "ArgMin"):
    y = np.load(f"{o}/y.npy")
    s = -x if op == "ArgMin" else x
    if name.endswith("_last"):
        want = s.shape[-1] - 1 - np.argmax(s[:, ::-1], -1)
    else:
        want = np.argmax(s, -1)
    if name.endswith("_k1"):
        want = want[:, None]
    if y.shape != want.shape or not (y == want).all():
        fail(f"{y.ravel()[:8]} != {want.ravel()[:8]}")
else:
    v, i = np.load(f"{o}/v.npy"), np.load(f"{o}/i.npy")
    s = -x if name.endswith("_l1") else x
    ri = np.argsort(s, -1, kind="stable")[:, :5]
    rv = np.take_along_axis(x, ri, -1)
    if v.shape != rv.shape or not (v == rv).all() or not (i == ri).all():
        fail(f"values {v[0]} indices {i[0]}, expected {rv[0]} {ri[0]}")
PY
}

for C in 50257 128256 1000 12000; do
    for m in Softmax_$C LogSoftmax_$C ArgMax_${C}_k1 ArgMax_${C}_k0 ArgMax_${C}_last ArgMin_${C}_k0 TopK_${C}_l1 \
        TopK_${C}_l0; do
        check "$m" "$C"
    done
done
echo "test_vocab_ops: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
