#!/usr/bin/env bash
# CLI test for `tern inspect`: on executables compiled here from ONNX models made with onnx's helper (one on one
# core, one split over 2 cores, one with long names) it prints the format version, the machine and its code
# fingerprint, the I/O table (full names, dtype, shape, split, bytes), instructions per core and engine that add
# up to what the compiler reported, the constants (count and bytes, checked against the weights' size), and with
# --disasm the same text `tern disasm` prints for the program; --json parses and holds the same facts. Exit 1
# for a file that is not an executable, 2 for usage errors.
set -u
TERN=${1:?usage: test_inspect.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
expect() { # CODE CMD...: stdout in $tmp/out, stderr in $tmp/err
    local want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want: $(head -c 400 "$tmp/err")"; fi
}
has() { grep -qF -- "$1" "$tmp/out" && ok || bad "output lacks '$1': $(head -c 1500 "$tmp/out")"; }

$py - "$tmp" <<'PY' || { echo "NOT OK: could not make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(3)
w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")   # 512 bytes of fp32
b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
                      "lin", [helper.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])], [w, b])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 8
onnx.save(m, f"{d}/lin.onnx")
long = "decoder/block.3/mlp:output 0/" + "z" * 40
g = helper.make_graph([helper.make_node("Relu", ["in:0"], [long])], "names",
                      [helper.make_tensor_value_info("in:0", T.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info(long, T.FLOAT, [2, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 8
onnx.save(m, f"{d}/names.onnx")
open(f"{d}/long.txt", "w").write(long + "\n")
PY
long=$(cat "$tmp/long.txt")

expect 0 "$TERN" compile "$tmp/lin.onnx" -o "$tmp/lin.tern" --machine trn1 --dtype fp32
instrs=$(sed -n 's/.* \([0-9][0-9]*\) instructions per core.*/\1/p' "$tmp/out")
expect 0 "$TERN" inspect "$tmp/lin.tern"
has "tern executable, format version 2"
has "machine: trn1.2xlarge, code fingerprint "
has "cores: 1"
has "inputs (1):"
has "outputs (1):"
$py - "$tmp/out" "$instrs" <<'PY' && ok || bad "inspect's tables: $(cat "$tmp/out")"
import re, sys
t = open(sys.argv[1]).read()
want = int(sys.argv[2])
rows = {l.split()[0]: l.split() for l in t.splitlines() if l.startswith("  ") and len(l.split()) >= 5}
x, y = rows["x"], rows["y"]
assert x[1:3] == ["fp32", "[4,"] and x[3] == "16]" and x[4] == "-" and x[5] == str(4 * 16 * 4), x
assert y[1] == "fp32" and y[5] == str(4 * 8 * 4), y
core = [l.split() for l in t.splitlines() if re.match(r"^  0 ", l)][0]
engines = list(map(int, core[1:6]))
assert sum(engines) == int(core[6]) == want, (core, want)
assert engines[0] > 0, "a matmul runs on the tensor engine"
m = re.search(r"constants: (\d+), (\d+) bytes", t)
assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 16 * 8 * 4 + 8 * 4, m and m.groups()
PY
has "metadata: {"
fp=$(sed -n 's/.*code fingerprint \([0-9a-f]\{8\}\).*/\1/p' "$tmp/out")

# --disasm: the program text is what `tern disasm` prints for it
expect 0 "$TERN" inspect "$tmp/lin.tern" --disasm
has "; ---- core 0 ----"
sed -n '/^; ---- core 0 ----$/,$p' "$tmp/out" | tail -n +2 > "$tmp/inspect.s"
expect 0 "$TERN" asm "$tmp/inspect.s" -o "$tmp/p.tprog"
expect 0 "$TERN" disasm "$tmp/p.tprog"
cmp -s "$tmp/out" "$tmp/inspect.s" && ok || bad "inspect --disasm differs from tern disasm of the same program"

# --json: parses, the same facts
expect 0 "$TERN" inspect "$tmp/lin.tern" --json --disasm
$py - "$tmp/out" "$instrs" "$fp" <<'PY' && ok || bad "inspect --json: $(head -c 800 "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format_version"] == 2 and d["machine_name"] == "trn1.2xlarge" and d["fingerprint"] == sys.argv[3], d
assert d["inputs"][0] == {"name": "x", "tensor": "x", "dtype": "fp32", "shape": [4, 16], "split_batch": False, "bytes": 256}
assert d["outputs"][0]["shape"] == [4, 8] and d["outputs"][0]["bytes"] == 128
p = d["programs"][0]
assert p["total"] == sum(p["instructions"].values()) == int(sys.argv[2]), p
assert p["disasm"].count("\n") >= p["total"]
c = d["constants"]
assert c["count"] == len(c["list"]) and c["bytes"] == sum(k["bytes"] for k in c["list"])
json.loads(d["metadata"])
PY

# Two cores: one program row each, the batch split shown
$py - "$tmp" <<'PY'
import sys, onnx
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "r", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["N", 8])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 8
onnx.save(m, sys.argv[1] + "/relu.onnx")
PY
expect 0 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/relu2.tern" --cores 2 --dim 2
expect 0 "$TERN" inspect "$tmp/relu2.tern"
has "cores: 2"
grep -qE '^  1 +[0-9]' "$tmp/out" && ok || bad "no program row for core 1"
grep -qE '^  x +fp32 +\[2, 8\] +batch +64' "$tmp/out" && ok || bad "the split input row: $(cat "$tmp/out")"

# Long names with '/', ':' and spaces in full, and the program tensor they map to
expect 0 "$TERN" compile "$tmp/names.onnx" -o "$tmp/names.tern"
expect 0 "$TERN" inspect "$tmp/names.tern"
has "$long"
has "(program tensor "
expect 0 "$TERN" inspect "$tmp/names.tern" --json
$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["outputs"][0]["name"]==sys.argv[2] and d["inputs"][0]["name"]=="in:0", d' \
    "$tmp/out" "$long" && ok || bad "long names in --json"

# Errors
printf 'not an executable' > "$tmp/bad.tern"
expect 1 "$TERN" inspect "$tmp/bad.tern"
grep -qF "not a tern executable" "$tmp/err" && ok || bad "bad file message: $(cat "$tmp/err")"
expect 1 "$TERN" inspect "$tmp/missing.tern"
expect 2 "$TERN" inspect
expect 2 "$TERN" inspect "$tmp/lin.tern" --bogus
expect 0 "$TERN" inspect --help

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
