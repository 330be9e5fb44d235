#!/usr/bin/env bash
# Text (ONNX string) tensors end to end: models made here with onnx.helper cast float32 to text and back; they are
# compiled and run with `tern run` (directly and through a saved .tern, with the batch split over two cores), the
# inputs and outputs are numpy text arrays ('<U'), and the results must equal numpy's exactly:
#  - Cast float -> string: numpy's str(np.float32) (astype(np.str_)) for random, tiny, huge, integral, signed-zero,
#    infinite and NaN values;
#  - Cast string -> float: numpy's astype(np.float32) of Python float() texts (signs, exponents, underscores,
#    surrounding spaces, inf/nan spellings), bit for bit;
#  - a float -> string -> float chain inside one model round-trips every value;
#  - bad input is an error naming the thing: text that is not a number (at run time, naming the cell), a text too
#    long for a device cell, a numeric .npy for a text input, an unsupported cast (string to int32) and a string
#    input to an op other than Cast.
# Gets build/tern as $1.
set -u
tern=${1:?usage: test_text.sh path/to/tern}
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass+1)); }
bad() { echo "NOT OK: $*"; fail=$((fail+1)); }

$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
F, S, I32 = TensorProto.FLOAT, TensorProto.STRING, TensorProto.INT32
vi = helper.make_tensor_value_info
def save(name, nodes, ins, outs, opset=13):
    g = helper.make_graph(nodes, name, ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{d}/{name}.onnx")
save("to_text", [helper.make_node("Cast", ["x"], ["s"], to=S)], [vi("x", F, ["N", 7])], [vi("s", S, ["N", 7])])
save("from_text", [helper.make_node("Cast", ["s"], ["y"], to=F)], [vi("s", S, [3, 4])], [vi("y", F, [3, 4])])
save("round_trip", [helper.make_node("Cast", ["x"], ["s"], to=S), helper.make_node("Cast", ["s"], ["y"], to=F)],
     [vi("x", F, [300])], [vi("y", F, [300]), vi("s", S, [300])])
save("to_int", [helper.make_node("Cast", ["s"], ["y"], to=I32)], [vi("s", S, [2])], [vi("y", I32, [2])])
save("add_text", [helper.make_node("Add", ["s", "s"], ["y"])], [vi("s", S, [2])], [vi("y", S, [2])])
rng = np.random.default_rng(11)
x = np.concatenate([rng.random(40, dtype=np.float32), rng.standard_normal(40).astype(np.float32) * 1e6,
                    np.array([0.0, -0.0, 1.0, 100.0, 1e16, 1.5e16, 9.9e-5, 1e-4, 1e-45, 3.4028235e38, -1e-40,
                              16777216.0, 123456789.0, np.inf, -np.inf, np.nan, 0.1, -2.5], np.float32),
                    (rng.integers(0, 2**32, 42, dtype=np.uint64).astype(np.uint32)).view(np.float32)])
np.save(f"{d}/x.npy", x.reshape(20, 7))
np.save(f"{d}/x300.npy", np.concatenate([x, rng.standard_normal(160).astype(np.float32)]))
texts = np.array([["0.47892547", "NaN", "INF", "+INF"], ["-INF", " 1_000.5 ", "1e-50", "-0"],
                  ["3.4028236e38", "16777217", "  -7.25e-3", "infinity"]])
np.save(f"{d}/s.npy", texts)
np.save(f"{d}/s_bytes.npy", texts.astype("S"))
np.save(f"{d}/s_bad.npy", np.array([["1", "2", "3", "4"], ["5", "six", "7", "8"], ["9", "0", "1", "2"]]))
np.save(f"{d}/s_long.npy", np.array([["1" * 65] * 4] * 3))
np.save(f"{d}/f34.npy", np.zeros((3, 4), np.float32))
PY

# check NAME PYTHON-EXPR: runs the expression with np and the output directory as d; it must be true.
check() {
  if $py -c "import sys, numpy as np; d = sys.argv[1]; sys.exit(0 if ($2) else 1)" "$tmp/$1" 2> "$tmp/pyerr"; then ok
  else bad "$1: $2"; cat "$tmp/pyerr"; fi
}
EQ_TEXT="np.load(d + '/s.npy').dtype.kind == 'U' and np.array_equal(np.load(d + '/s.npy'), np.load(d + '/../x.npy').astype(np.str_))"

# float -> text, straight from the .onnx, batch split over the two cores of trn1.
mkdir -p "$tmp/a"
if "$tern" run "$tmp/to_text.onnx" --dim 20 --cores 2 --input "x=$tmp/x.npy" --output-dir "$tmp/a" > "$tmp/log" 2>&1; then
  ok
  check a "$EQ_TEXT"
  grep -q "^output s: text \[20, 7\] first \['" "$tmp/log" && ok || bad "to_text summary: $(cat "$tmp/log")"
else
  bad "to_text: tern run failed"; cat "$tmp/log"
fi
# ... and through a saved .tern on trn2.
mkdir -p "$tmp/b"
if "$tern" compile "$tmp/to_text.onnx" --dim 20 --machine trn2 -o "$tmp/t.tern" > "$tmp/log" 2>&1 &&
   "$tern" run "$tmp/t.tern" --input "x=$tmp/x.npy" --output-dir "$tmp/b" > "$tmp/log" 2>&1; then
  ok
  check b "$EQ_TEXT"
else
  bad "to_text: the .tern route"; cat "$tmp/log"
fi

# text -> float, from '<U' and from '|S' arrays.
for f in s s_bytes; do
  mkdir -p "$tmp/c_$f"
  if "$tern" run "$tmp/from_text.onnx" --input "s=$tmp/$f.npy" --output-dir "$tmp/c_$f" > "$tmp/log" 2>&1; then
    ok
    check "c_$f" "np.array_equal(np.load(d + '/y.npy').view(np.uint32), np.load(d + '/../s.npy').astype(np.float32).view(np.uint32))"
  else
    bad "from_text $f: tern run failed"; cat "$tmp/log"
  fi
done

# float -> text -> float in one model; random text inputs are numbers too.
mkdir -p "$tmp/r"
if "$tern" run "$tmp/round_trip.onnx" --input "x=$tmp/x300.npy" --output-dir "$tmp/r" > "$tmp/log" 2>&1; then
  ok
  check r "np.array_equal(np.load(d + '/y.npy'), np.load(d + '/../x300.npy'), equal_nan=True) and np.array_equal(np.load(d + '/s.npy'), np.load(d + '/../x300.npy').astype(np.str_))"
else
  bad "round_trip: tern run failed"; cat "$tmp/log"
fi
if "$tern" run "$tmp/from_text.onnx" > "$tmp/log" 2>&1 && grep -q "^input s: text \[3, 4\] random" "$tmp/log"; then ok
else bad "from_text with a random text input"; cat "$tmp/log"; fi

# Bad input.
out=$("$tern" run "$tmp/from_text.onnx" --input "s=$tmp/s_bad.npy" 2>&1); rc=$?
case "$rc:$out" in 1:*"text_parse"*"partition 0, element 5"*'"six" is not a number'*) ok ;;
  *) bad "text that is not a number: $rc $out" ;; esac
out=$("$tern" run "$tmp/from_text.onnx" --input "s=$tmp/s_long.npy" 2>&1); rc=$?
case "$rc:$out" in 1:*"input 's'"*"element 0 is longer than a device text cell (64 bytes"*) ok ;;
  *) bad "a text too long for a cell: $rc $out" ;; esac
out=$("$tern" run "$tmp/from_text.onnx" --input "s=$tmp/f34.npy" 2>&1); rc=$?
case "$rc:$out" in 1:*"input 's' is text"*"<f4"*) ok ;; *) bad "a numeric .npy for a text input: $rc $out" ;; esac
out=$("$tern" compile "$tmp/to_int.onnx" -o "$tmp/i.tern" 2>&1); rc=$?
case "$rc:$out" in 1:*"Cast"*"cast from string to int32: text converts only to and from float"*) ok ;;
  *) bad "string to int32: $rc $out" ;; esac
out=$("$tern" compile "$tmp/add_text.onnx" -o "$tmp/i.tern" 2>&1); rc=$?
case "$rc:$out" in 1:*"Add"*'input 0 "s" is a string tensor; only Cast and CastLike take strings'*) ok ;;
  *) bad "Add of strings: $rc $out" ;; esac

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
