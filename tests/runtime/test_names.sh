#!/usr/bin/env bash
# Input and output names of any length and any character ONNX allows, end to end: a model (made here with
# onnx's helper) whose input name is 90 characters and whose two outputs are 80+ characters sharing a 60-character
# prefix, with '/', ':', a space and non-ASCII text. It must compile (no "declared twice" from names cut at 47),
# save and load as a .tern, take its input under the full name, print the full output names, and write each
# output as DIR/<escaped name>.npy (percent-escaping, docs/runtime.md) with the right values (Relu(x) and
# x * 2, exact in fp32). Also: escaped file names never create directories, and a version-2 file is what is saved.
set -u
TERN=${1:?usage: test_names.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$py - "$tmp" <<'PY' || { echo "NOT OK: could not make the model"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as T
d = sys.argv[1]
prefix = "model/encoder/layer_0:attention/self/output/dense/projection"  # 60 characters
assert len(prefix) == 60
xin = "inputs/token embeddings:0/" + "x" * 64                             # 90 characters, '/', ':', ' '
o1 = prefix + ":relu branch/value:0 ünïcode"                                 # 87 characters
o2 = prefix + ":double branch/value:0 ünïcode"
assert len(xin) >= 80 and len(o1) >= 80 and len(o2) >= 80
two = helper.make_tensor("two", T.FLOAT, [], [2.0])
g = helper.make_graph(
    [helper.make_node("Relu", [xin], [o1]), helper.make_node("Mul", [xin, "two"], [o2])], "names",
    [helper.make_tensor_value_info(xin, T.FLOAT, [2, 3])],
    [helper.make_tensor_value_info(o1, T.FLOAT, [2, 3]), helper.make_tensor_value_info(o2, T.FLOAT, [2, 3])],
    [two])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, f"{d}/names.onnx")
x = np.array([[-1.5, 0.0, 2.25], [3.0, -4.0, 0.5]], np.float32)
np.save(f"{d}/x.npy", x)
open(f"{d}/names.txt", "w", encoding="utf-8").write("\n".join([xin, o1, o2]) + "\n")
PY
xin=$(sed -n 1p "$tmp/names.txt")
o1=$(sed -n 2p "$tmp/names.txt")
o2=$(sed -n 3p "$tmp/names.txt")

# The escaping documented in docs/runtime.md, computed independently.
esc() { $py -c 'import sys
s = sys.argv[1].encode()
print("".join(chr(b) if (chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_-" or (chr(b) == "." and i > 0))) else "%%%02X" % b
              for i, b in enumerate(s)))' "$1"; }
f1=$(esc "$o1").npy
f2=$(esc "$o2").npy

if "$TERN" compile "$tmp/names.onnx" -o "$tmp/names.tern" >"$tmp/log" 2>&1; then ok; else bad "compile: $(cat "$tmp/log")"; fi
$py -c 'import sys,struct; b=open(sys.argv[1],"rb").read(12); sys.exit(0 if b[:8]==b"TERNEXE1" and struct.unpack("<I",b[8:12])[0]==2 else 1)' \
    "$tmp/names.tern" && ok || bad "the saved executable is not format version 2"

for model in "$tmp/names.tern" "$tmp/names.onnx"; do
    out="$tmp/out_$(basename "$model" | tr . _)"
    if "$TERN" run "$model" --input "$xin=$tmp/x.npy" --output-dir "$out" >"$tmp/log" 2>&1; then ok; else
        bad "run $(basename "$model"): $(cat "$tmp/log")"; continue; fi
    grep -qF "output $o1: fp32 [2, 3]" "$tmp/log" && ok || bad "$(basename "$model"): the full name of output 1 is not printed: $(cat "$tmp/log")"
    grep -qF "output $o2: fp32 [2, 3]" "$tmp/log" && ok || bad "$(basename "$model"): the full name of output 2 is not printed"
    grep -q "random" "$tmp/log" && bad "$(basename "$model"): the input given by its full name was filled at random" || ok
    [ -f "$out/$f1" ] && ok || bad "$(basename "$model"): $out/$f1 missing (have: $(ls "$out"))"
    [ -f "$out/$f2" ] && ok || bad "$(basename "$model"): $out/$f2 missing"
    # exactly two plain files, no directory made from a '/'
    [ "$(find "$out" -mindepth 1 | wc -l)" -eq 2 ] && [ -z "$(find "$out" -mindepth 1 -type d)" ] && ok ||
        bad "$(basename "$model"): $out holds more than the two files: $(find "$out" -mindepth 1)"
    $py - "$tmp/x.npy" "$out/$f1" "$out/$f2" <<'PY' && ok || bad "$(basename "$model"): output values"
import sys, numpy as np
x = np.load(sys.argv[1])
a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
ok = np.array_equal(a, np.maximum(x, 0)) and np.array_equal(b, x * 2)
print("ok" if ok else f"NOT OK: relu {a.tolist()} double {b.tolist()}")
sys.exit(0 if ok else 1)
PY
done

# An unknown input name is refused with the name as given.
"$TERN" run "$tmp/names.tern" --input "${xin}y=$tmp/x.npy" >"$tmp/log" 2>&1
[ $? -ne 0 ] && grep -qF "${xin}y" "$tmp/log" && ok || bad "an unknown long input name: $(cat "$tmp/log")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
