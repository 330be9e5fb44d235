#!/usr/bin/env bash
# ONNX external data (data_location = EXTERNAL): a small model saved by onnx.save_model(...,
# save_as_external_data=True) with every initializer in one side file (fp32 weights read straight into the host
# tensor, an fp16 scale through the chunked conversion, an int64 Reshape shape) must give byte-identical outputs
# to the same model saved inline, and both must match numpy. Then each rule on the external_data entries is broken
# once in a copy of the model (absolute location, a '..' component, offset past the end, offset + length
# overflowing 64 bits, a range running past the end, a length other than dims x element size, an offset that is not
# a number, a missing file): each must exit 1 with a message naming the tensor, the rule and the value.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_external_data.sh path/to/tern}
TERN=$(cd "$(dirname "$TERN")" && pwd)/$(basename "$TERN") # absolute: one run is made from the model's directory
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

mkdir -p "$tmp/ext" "$tmp/bad"
(cd "$tmp" && $PY - "$tmp" <<'PY') || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, os, copy, numpy as np, onnx
from onnx import helper, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(11)
W = (rng.standard_normal((8, 16)) * 0.5).astype(np.float32)
b = (rng.standard_normal(16) * 0.1).astype(np.float32)
s16 = np.linspace(0.5, 2.0, 16).astype(np.float16)
shape = np.array([2, 2, 16], np.int64)
x = rng.standard_normal((4, 8)).astype(np.float32)
N = helper.make_node
nodes = [N("MatMul", ["x", "W"], ["xw"]), N("Add", ["xw", "b"], ["xb"]),
         N("Cast", ["s16"], ["s32"], to=TP.FLOAT), N("Mul", ["xb", "s32"], ["xs"]),
         N("Reshape", ["xs", "shape"], ["y"])]
g = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", TP.FLOAT, [4, 8])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 2, 16])],
                      [nh.from_array(W, "W"), nh.from_array(b, "b"), nh.from_array(s16, "s16"),
                       nh.from_array(shape, "shape")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(m, f"{d}/inline.onnx")
onnx.save_model(copy.deepcopy(m), f"{d}/ext/model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0)
np.save(f"{d}/x.npy", x)
ref = ((x.astype(np.float64) @ W + b) * s16.astype(np.float64)).reshape(2, 2, 16)
np.save(f"{d}/ref.npy", ref)

ext = onnx.load(f"{d}/ext/model.onnx", load_external_data=False)
w = [t for t in ext.graph.initializer if t.name == "W"][0]
assert w.data_location == TP.EXTERNAL, "onnx did not write W as external data"
info = {e.key: e.value for e in w.external_data}
size = os.path.getsize(f"{d}/ext/weights.bin")
off, length = int(info.get("offset", "0")), int(info["length"])
def variant(name, **kv):
    v = copy.deepcopy(ext)
    t = [t for t in v.graph.initializer if t.name == "W"][0]
    cur = {e.key: e.value for e in t.external_data}
    cur.update(kv)
    del t.external_data[:]
    for k, val in cur.items():
        e = t.external_data.add()
        e.key, e.value = k, val
    with open(f"{d}/ext/{name}.onnx", "wb") as f:
        f.write(v.SerializeToString())
variant("abs", location=f"{d}/ext/weights.bin")
variant("dotdot", location="../ext/weights.bin")
variant("past", offset=str(size + 1))
variant("overflow", offset=str(off + 1), length=str(2**64 - 1))
variant("overrun", offset=str(size - length + 4), length=str(length))
variant("short", length=str(length - 4))
variant("nan", offset="12x")
variant("missing", location="nope.bin")
with open(f"{d}/facts", "w") as f:
    f.write(f"{size} {off} {length}\n")
PY
read -r size off length <"$tmp/facts"

# same outputs as the inline model, and numpy's
expect 0 "$TERN" run "$tmp/inline.onnx" --dtype fp32 --input x="$tmp/x.npy" --output-dir "$tmp/out_inline"
expect 0 "$TERN" run "$tmp/ext/model.onnx" --dtype fp32 --input x="$tmp/x.npy" --output-dir "$tmp/out_ext"
if cmp -s "$tmp/out_inline/y.npy" "$tmp/out_ext/y.npy"; then ok; else bad "external-data output differs from inline"; fi
if $PY -c "
import numpy as np, sys
y, r = np.load('$tmp/out_ext/y.npy'), np.load('$tmp/ref.npy')
sys.exit(0 if y.shape == r.shape and np.allclose(y, r, rtol=1e-4, atol=1e-5) else 1)"; then ok
else bad "external-data output does not match numpy"; fi
# a model path without a directory part reads its data from the current directory
here=$PWD
cd "$tmp/ext" && expect 0 "$TERN" run model.onnx --dtype fp32 --input x="$tmp/x.npy" --output-dir "$tmp/out_cwd"
cd "$here" || exit 1
if cmp -s "$tmp/out_inline/y.npy" "$tmp/out_cwd/y.npy"; then ok; else bad "model.onnx from its own directory differs"; fi

# each rule broken once
rule() { # rule VARIANT TEXT...
    local v=$1
    shift
    expect 1 "$TERN" run "$tmp/ext/$v.onnx" --timing-only
    contains "$tmp/err" 'initializer tensor "W"'
    for t in "$@"; do contains "$tmp/err" "$t"; done
}
rule abs "external data location \"$tmp/ext/weights.bin\" is an absolute path"
rule dotdot "external data location \"../ext/weights.bin\" has a '..' component"
rule past "external data offset $((size + 1)) is past the end of \"weights.bin\" ($size bytes)"
rule overflow "external data offset $((off + 1)) + length 18446744073709551615 overruns \"weights.bin\""
rule overrun "external data offset $((size - length + 4)) + length $length overruns \"weights.bin\" ($size bytes)"
rule short "external data length $((length - 4)) bytes, dims need $length (128 x 4-byte float)"
rule nan "external data offset \"12x\" is not a decimal integer"
rule missing "external data file \"nope.bin\" cannot be opened"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
