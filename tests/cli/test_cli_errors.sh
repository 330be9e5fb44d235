#!/usr/bin/env bash
# The errors a user hit, each reproduced: the message must name the thing, the rule and the value. Exit codes as
# commands.h defines them: 1 when the work fails (a directory given as the model or an input, an unsupported .npy
# dtype, an input whose shape differs from the model's, a compile error), 2 for usage errors (an option missing its
# value, a number that is not one). Also: a compile error raised while the progress counter is on screen starts a
# line of its own. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_cli_errors.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' || { echo "NOT OK: cannot make the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, TensorProto as TP, numpy_helper
d = sys.argv[1]
def save(name, nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, name, ins, outs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/{name}.onnx")
vi = helper.make_tensor_value_info
save("relu", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [2, 8])], [vi("y", TP.FLOAT, [2, 8])])
# 60 lowered nodes (progress shows from 50), then one the lowering refuses: Dropout in training mode
nodes, prev = [], "x"
for i in range(60):
    nodes.append(helper.make_node("Abs" if i % 2 else "Neg", [prev], [f"t{i}"]))
    prev = f"t{i}"
nodes.append(helper.make_node("Dropout", [prev, "r", "tm"], ["y"]))
save("late_error", nodes, [vi("x", TP.FLOAT, [4, 8])], [vi("y", TP.FLOAT, [4, 8])],
     [numpy_helper.from_array(np.array(0.5, np.float32), "r"), numpy_helper.from_array(np.array(True), "tm")])
np.save(f"{d}/c64.npy", np.zeros((2, 8), np.complex64))
np.save(f"{d}/be.npy", np.zeros((2, 8), ">f4"))
np.save(f"{d}/x23.npy", np.zeros((2, 3), np.float32))
np.save(f"{d}/x28.npy", np.ones((2, 8), np.float32))
PY
mkdir -p "$tmp/adir.onnx" "$tmp/adir"
expect 0 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/relu.tern"

# A directory as the model (it used to read as 'out of memory for 9223372036854775807 bytes'), or as an input.
expect 1 "$TERN" compile "$tmp/adir.onnx" -o "$tmp/x.tern"
contains "$tmp/err" "adir.onnx' is a directory"
grep -q "out of memory" "$tmp/err" && bad "directory reported as out of memory" || ok
expect 1 "$TERN" run "$tmp/adir"
contains "$tmp/err" "adir' is a directory"
expect 1 "$TERN" run "$tmp/relu.tern" --input "x=$tmp/adir"
contains "$tmp/err" "input file '$tmp/adir' is a directory"

# Unsupported .npy dtypes are named as numpy writes them, not as the bytes after the key.
expect 1 "$TERN" run "$tmp/relu.tern" --input "x=$tmp/c64.npy"
contains "$tmp/err" "c64.npy: dtype '<c8' not supported"
expect 1 "$TERN" run "$tmp/relu.tern" --input "x=$tmp/be.npy"
contains "$tmp/err" "be.npy: dtype '>f4' not supported"
grep -q "fortran\|', '" "$tmp/err" && bad "garbled dtype token: $(cat "$tmp/err")" || ok

# An input of another shape: both shapes in the message.
expect 1 "$TERN" run "$tmp/relu.tern" --input "x=$tmp/x23.npy"
contains "$tmp/err" "x23.npy: shape [2, 3] does not match input 'x' of shape [2, 8]"
expect 0 "$TERN" run "$tmp/relu.tern" --input "x=$tmp/x28.npy"
contains "$tmp/out" "output y: fp32 [2, 8] mean 1"

# An option missing its value names the option (it used to read "unknown option '-o'"), in every command;
# a following option is not taken as the value.
expect 2 "$TERN" compile "$tmp/relu.onnx" -o
contains "$tmp/err" "tern compile: -o needs a value"
expect 2 "$TERN" compile "$tmp/relu.onnx" -o --machine trn2
contains "$tmp/err" "tern compile: -o needs a value"
contains "$tmp/err" "got the option '--machine'"
expect 2 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/x.tern" --machine
contains "$tmp/err" "tern compile: --machine needs a value"
expect 2 "$TERN" run "$tmp/relu.tern" --output-dir
contains "$tmp/err" "tern run: --output-dir needs a value"
expect 2 "$TERN" run "$tmp/relu.tern" --seed --profile
contains "$tmp/err" "tern run: --seed needs a value"
expect 2 "$TERN" run "$tmp/relu.tern" --input
contains "$tmp/err" "tern run: --input needs a value (NAME=FILE.npy)"
expect 2 "$TERN" run "$tmp/relu.onnx" --dim
contains "$tmp/err" "tern run: --dim needs a value"
expect 2 "$TERN" kernel gemm --m 128 --n 128 --k 128 -o
contains "$tmp/err" "tern kernel: -o needs a value"
expect 2 "$TERN" profile "$tmp/none.tprog" --seed
contains "$tmp/err" "tern profile: --seed needs a value"
expect 2 "$TERN" asm "$tmp/none.s" -o
contains "$tmp/err" "tern asm: -o needs a value"
expect 2 "$TERN" info --machine
contains "$tmp/err" "tern info: --machine needs a value"

# Numbers are read strictly: the whole word, in range (these were taken as 2 and 0).
expect 2 "$TERN" run "$tmp/relu.onnx" --dim 2abc
contains "$tmp/err" "tern run: --dim"
contains "$tmp/err" "got '2abc'"
expect 2 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/x.tern" --dim 0
contains "$tmp/err" "got '0'"
expect 2 "$TERN" run "$tmp/relu.tern" --seed abc
contains "$tmp/err" "tern run: --seed expects an integer in [0, 18446744073709551615], got 'abc'"
expect 2 "$TERN" run "$tmp/relu.tern" --seed -1
contains "$tmp/err" "got '-1'"
expect 2 "$TERN" run "$tmp/relu.onnx" --cores 2x
contains "$tmp/err" "tern run: --cores expects an integer in [1, 128], got '2x'"
expect 2 "$TERN" kernel gemm --m 12q --n 128 --k 128 -o "$tmp/g.tprog"
contains "$tmp/err" "tern kernel: --m expects an integer in [1, 16777216], got '12q'"
expect 2 "$TERN" kernel layernorm --rows 4 --cols 4 --eps 1e-5x -o "$tmp/l.tprog"
contains "$tmp/err" "--eps expects a number"
expect 2 "$TERN" kernel mlp --rows 4 --cols 4 -o "$tmp/m.tprog"
contains "$tmp/err" "tern kernel mlp: --hidden is required"
expect 2 "$TERN" kernel mlp --rows 4 --cols 4 --hidden 8 --act silu -o "$tmp/m.tprog"
contains "$tmp/err" "tern kernel mlp: --act must be gelu, gelu_tanh, relu or none, not 'silu'"
expect 2 "$TERN" kernel mlp --rows 4 --cols 4 --hidden 8 --m 3 -o "$tmp/m.tprog"
contains "$tmp/err" "tern kernel mlp: unknown option '--m'"
expect 0 "$TERN" kernel gemm --m 128 --n 128 --k 128 -o "$tmp/g.tprog"
expect 2 "$TERN" profile "$tmp/g.tprog" --seed 1.5
contains "$tmp/err" "tern profile: --seed expects an integer"
expect 2 "$TERN" profile "$tmp/g.tprog" --model-flops lots
contains "$tmp/err" "tern profile: --model-flops expects a number"

# A compile error while the progress counter is on screen starts its own line.
expect 1 "$TERN" compile "$tmp/late_error.onnx" -o "$tmp/x.tern"
contains "$tmp/err" "compiling: 50/61 nodes"
grep -q "nodestern" "$tmp/err" && bad "error glued to the progress line: $(cat -A "$tmp/err" | head -c 300)" || ok
grep -q "^tern compile: .*late_error.onnx: node \"Dropout_60\" (Dropout #60): Dropout in training mode" "$tmp/err" \
    && ok || bad "compile error not on its own line: $(cat -A "$tmp/err" | head -c 400)"
expect 1 "$TERN" run "$tmp/late_error.onnx"
grep -q "^tern compile: .*Dropout in training mode" "$tmp/err" && ok || bad "run: error not on its own line"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
