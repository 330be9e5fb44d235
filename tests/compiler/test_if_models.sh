#!/usr/bin/env bash
# If, which expands into the nodes of its branches (src/graph/expand_if.c), from PyTorch's scripted control flow,
# compiled with FP32 matmuls and run on a simulated trn1 core with `tern run`, against PyTorch (cosine >= 0.9999,
# max |diff| <= 1e-5):
#  - a shape test (`if x.size(0) > 2`), constant once the input's shape is bound: only the taken branch is
#    compiled, for inputs that take each branch;
#  - a data test (`if x.sum() > 0`), a run-time condition: both branches run and Where selects, for inputs that
#    take each branch;
#  - an onnx.helper If whose constant condition picks a branch reading a value of the enclosing graph;
# and a branch reading an undefined name is refused, naming the If and the name. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_if_models.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

# torch.jit.script reads the modules' source: the generator goes to a file first
cat >"$tmp/gen.py" <<'PY'
import sys, warnings, numpy as np, torch, torch.nn as nn, onnx
from onnx import helper, numpy_helper, TensorProto as TP
warnings.filterwarnings("ignore")
d = sys.argv[1]
torch.manual_seed(0)
class ShapeIf(nn.Module):
    def __init__(s):
        super().__init__(); s.lin = nn.Linear(6, 6)
    def forward(s, x):
        if x.size(0) > 2:
            y = torch.relu(s.lin(x)) * 2.0
        else:
            y = s.lin(x) - 1.0
        return y
class DataIf(nn.Module):
    def forward(s, x):
        if bool(x.sum() > 0):
            y = x * 3.0
        else:
            y = -x
        return y
for name, mod, xs in [("shape_if", ShapeIf(), [torch.randn(4, 6), torch.randn(2, 6)]),
                      ("data_if", DataIf(), [torch.rand(3, 5) + 0.1, -torch.rand(3, 5) - 0.1])]:
    sm = torch.jit.script(mod.eval())
    for k, x in enumerate(xs):
        path = f"{d}/{name}{k}.onnx"
        # a dynamic first dim keeps the shape test in the model (tern binds it from the input, then folds it)
        torch.onnx.export(sm, (x,), path, input_names=["x"], output_names=["y"], opset_version=14,
                          dynamic_axes={"x": {0: "n"}})
        assert "If" in {n.op_type for n in onnx.load(path).graph.node}, name
        np.save(f"{d}/{name}{k}.x.npy", x.numpy())
        with torch.no_grad():
            np.save(f"{d}/{name}{k}.ref.npy", mod(x).numpy())
        print(f"{name}{k}")
# a constant condition choosing a branch that reads the enclosing graph's value "h"
def branch(nm, op, c):
    n = helper.make_node(op, ["h", "c_" + nm], ["o_" + nm])
    return helper.make_graph([n], nm, [], [helper.make_tensor_value_info("o_" + nm, TP.FLOAT, [3])],
                             [numpy_helper.from_array(np.full(3, c, np.float32), "c_" + nm)])
nodes = [helper.make_node("Abs", ["x"], ["h"]),
         helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", "Mul", 10.0),
                          else_branch=branch("else", "Add", 5.0))]
for k, c in enumerate([True, False]):
    g = helper.make_graph(nodes, "cif", [helper.make_tensor_value_info("x", TP.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [3])],
                          [numpy_helper.from_array(np.array(c), "cond")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/const_if{k}.onnx")
    x = np.array([-1.0, 2.0, -3.5], np.float32)
    np.save(f"{d}/const_if{k}.x.npy", x)
    np.save(f"{d}/const_if{k}.ref.npy", np.abs(x) * 10 if c else np.abs(x) + 5)
    print(f"const_if{k}")
bad = helper.make_graph([helper.make_node("Neg", ["nowhere"], ["o"])], "b", [],
                        [helper.make_tensor_value_info("o", TP.FLOAT, [3])])
g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=bad, else_branch=bad)], "bad",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [3])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [3])], [numpy_helper.from_array(np.array(True), "cond")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/bad_if.onnx")
PY
$PY "$tmp/gen.py" "$tmp" >"$tmp/gen.log" 2>&1 || { echo "NOT OK: cannot make the models"; cat "$tmp/gen.log"; exit 1; }

while read -r name; do
    expect 0 "$TERN" run "$tmp/$name.onnx" --dtype fp32 --input "x=$tmp/$name.x.npy" --output-dir "$tmp/o_$name"
    if close_to_ref "$name" "$tmp/$name.ref.npy" "$tmp/o_$name/y.npy" 1e-5; then ok; else bad "$name differs from the reference"; fi
done < <(grep -E '^[a-z_]+[0-9]$' "$tmp/gen.log")

expect 1 "$TERN" run "$tmp/bad_if.onnx"
contains "$tmp/err" 'If'
contains "$tmp/err" 'then branch reads "nowhere", which the enclosing graph does not define'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
