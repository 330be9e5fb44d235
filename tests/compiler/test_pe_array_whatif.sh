#!/usr/bin/env bash
# The compiler follows the machine file's PE array and partitions: what-if NeuronCore-v2 copies with a 64 x 64
# array (64 partitions), a 256 x 256 one (256 partitions), a non-square 128 x 64 one (128 partitions) and a
# 32 x 32 one (128 partitions: the attention's head size 64 goes through the array in two chunks, its 600 keys
# in 19 blocks) compile and run
#  - an MLP, a GPT-2-style transformer (fused attention), the bare attention attn_add (200 queries, 600 keys, an
#    additive mask), a LLaMA-style decoder (rotary, grouped-query heads), a 1024^3 MatMul, and a model of row-tiled
#    ops (ReduceMax, Sub, CumSum, Abs, Where, Transpose, reflect Pad, TopK, ReduceSum, ArgMax over 200 x 300);
#  - with the outputs of the 128 x 128 catalogue core (trn1) within rounding (cosine >= 0.99999, max error <= 2e-3
#    of the largest magnitude: the products are summed in other groupings, so a BF16 rounding of the softmax's
#    probabilities may flip), the row-tiled ops bit for bit, and PyTorch's within test_attention.sh's tolerance;
#  - the MatMul's predicted time following the array: 64 x 64 slower than 128 x 128 (printed), 256 x 256 not
#    slower.
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_pe_array_whatif.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
w=$tmp/whatif
mkdir -p "$w"

# core-NAME.json / chip-NAME.json: NeuronCore-v2 and Trainium1 with the array ROWS x COLS and PARTS partitions
$py - "$src/data/machines" "$w" <<'PY' || { echo "NOT OK: cannot write the machine files"; exit 1; }
import json, sys
cat, out = sys.argv[1], sys.argv[2]
for name, rows, cols, parts in (("pe64", 64, 64, 64), ("pe256", 256, 256, 256), ("pe128x64", 128, 64, 128),
                                ("pe32", 32, 32, 128)):
    c = json.load(open(f"{cat}/neuroncore-v2.json"))
    c["name"] = f"core-{name}"
    c["core"]["tensor"]["pe_rows"]["value"], c["core"]["tensor"]["pe_cols"]["value"] = rows, cols
    c["core"]["sbuf"]["partitions"]["value"] = c["core"]["psum"]["partitions"]["value"] = parts
    json.dump(c, open(f"{out}/core-{name}.json", "w"), indent=1)
    ch = json.load(open(f"{cat}/trainium1.json"))
    ch["name"], ch["chip"]["core"] = f"chip-{name}", f"core-{name}"
    json.dump(ch, open(f"{out}/chip-{name}.json", "w"), indent=1)
PY
$py "$src/scripts/gen_models.py" "$tmp" mlp gpt2_tiny attn_add llama_tiny > /dev/null ||
  { echo "NOT OK: cannot make the models"; exit 1; }
$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the MatMul and row-op models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(5)
W = nh.from_array((rng.standard_normal((1024, 1024)) * 0.03).astype(np.float32), "W")
g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["output"])], "mm", [h.make_tensor_value_info("x", T.FLOAT, [1024, 1024])],
                 [h.make_tensor_value_info("output", T.FLOAT, [1024, 1024])], [W])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), f"{d}/mm.onnx")
x = rng.standard_normal((1024, 1024)).astype(np.float32)
np.save(f"{d}/mm.in.npy", x)
np.save(f"{d}/mm.out.npy", x.astype(np.float64) @ nh.to_array(W).astype(np.float64))
nodes = [h.make_node("ReduceMax", ["x"], ["r"], axes=[1], keepdims=1), h.make_node("Sub", ["x", "r"], ["s"]),
         h.make_node("CumSum", ["s", "ax"], ["cs"]), h.make_node("Abs", ["cs"], ["a"]),
         h.make_node("Where", ["cond", "a", "s"], ["w"]), h.make_node("Transpose", ["w"], ["t"], perm=[1, 0]),
         h.make_node("Pad", ["t", "pads"], ["p"], mode="reflect"), h.make_node("TopK", ["p", "k"], ["tv", "ti"], axis=1),
         h.make_node("ReduceSum", ["tv", "ax1"], ["output"], keepdims=0), h.make_node("ArgMax", ["p"], ["am"], axis=1)]
inits = [nh.from_array(np.array(1, np.int64), "ax"), nh.from_array(np.array([1], np.int64), "ax1"),
         nh.from_array(np.array([0, 2, 0, 2], np.int64), "pads"), nh.from_array(np.array([5], np.int64), "k"),
         nh.from_array(rng.random((200, 300)) > 0.5, "cond")]
g = h.make_graph(nodes, "rows", [h.make_tensor_value_info("x", T.FLOAT, [200, 300])],
                 [h.make_tensor_value_info("output", T.FLOAT, [300]), h.make_tensor_value_info("am", T.INT64, [300])],
                 inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), f"{d}/rows.onnx")
np.save(f"{d}/rows.in.npy", rng.standard_normal((200, 300)).astype(np.float32))
PY
inputs() {
  case $1 in
    mlp|mm|rows) echo "--input x=$tmp/$1.in.npy" ;;
    attn_add) echo "--input q=$tmp/$1.q.npy --input k=$tmp/$1.k.npy --input v=$tmp/$1.v.npy --input mask=$tmp/$1.mask.npy" ;;
    *) echo "--input input_ids=$tmp/$1.in.npy" ;;
  esac
}
time_of() { sed -n 's/^predicted device time .*: \([0-9.]*\) ms.*/\1/p' "$1"; }
# near OUT REF TOL: cosine >= 0.99999 and max error <= TOL * max |REF|
near() {
  $py - "$@" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
if a.shape != b.shape:
    print(f"shape {a.shape} vs {b.shape}"); sys.exit(1)
cos = float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
err = float(np.abs(a - b).max())
print(f"cosine {cos:.7f}, max error {err:.3g}")
sys.exit(0 if cos >= 0.99999 and err <= float(sys.argv[3]) * float(np.abs(b).max()) else 1)
PY
}
models="mlp gpt2_tiny attn_add llama_tiny mm rows"
for mach in trn1 pe64 pe256 pe128x64 pe32; do
  m_arg=$mach; [ $mach = trn1 ] || m_arg=$w/chip-$mach.json
  for m in $models; do
    mkdir -p "$tmp/o/$mach/$m"
    # shellcheck disable=SC2046
    if "$tern" run "$tmp/$m.onnx" $(inputs $m) --machine "$m_arg" --output-dir "$tmp/o/$mach/$m" \
         > "$tmp/o/$mach/$m.log" 2>&1; then ok; else
      bad "$m on $mach: $(grep -v '^compiling' "$tmp/o/$mach/$m.log" | head -c 400)"; continue; fi
    [ $mach = trn1 ] && continue
    if [ $m = rows ]; then
      if cmp -s "$tmp/o/$mach/$m/output.npy" "$tmp/o/trn1/$m/output.npy" &&
         cmp -s "$tmp/o/$mach/$m/am.npy" "$tmp/o/trn1/$m/am.npy"; then ok; else
        bad "$m on $mach: the row-tiled ops' outputs differ from the 128 x 128 core's"; fi
      continue
    fi
    if r=$(near "$tmp/o/$mach/$m/output.npy" "$tmp/o/trn1/$m/output.npy" 2e-3); then ok; else
      bad "$m on $mach vs the 128 x 128 core: $r"; fi
    if r=$(near "$tmp/o/$mach/$m/output.npy" "$tmp/$m.out.npy" 2e-2); then ok; else
      bad "$m on $mach vs PyTorch: $r"; fi
  done
  # the attention still fuses on every array (the lowering tiles the heads by the array's edge)
  "$tern" compile "$tmp/gpt2_tiny.onnx" -o "$tmp/g.tern" --machine "$m_arg" > "$tmp/c.log" 2>/dev/null
  contains "$tmp/c.log" "; 2 fused attention nodes"
  eval "t_$mach=\$(time_of \"\$tmp/o/\$mach/mm.log\")"
done
echo "1024^3 MatMul (bf16), predicted: 128x128 ${t_trn1:-?} ms, 64x64 ${t_pe64:-?} ms, 256x256 ${t_pe256:-?} ms," \
     "128x64 ${t_pe128x64:-?} ms, 32x32 ${t_pe32:-?} ms"
if $py -c "import sys; a, b, c = map(float, sys.argv[1:]); sys.exit(0 if b > 1.5 * a and c <= a else 1)" \
     "${t_trn1:-0}" "${t_pe64:-0}" "${t_pe256:-0}"; then ok; else
  bad "MatMul time does not follow the array: 128x128 ${t_trn1:-?}, 64x64 ${t_pe64:-?}, 256x256 ${t_pe256:-?} ms"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
