#!/usr/bin/env bash
# Scatters from PyTorch, which expand into OneHot/MatMul/Where nodes (src/graph/expand_scatter.c), compiled with FP32
# matmuls and run on a simulated trn1 core with `tern run`, against PyTorch's outputs (cosine >= 0.9999 and
# max |diff| <= 1e-5: the scattered values are copies or short sums):
#  - Tensor.scatter along axis 1 with distinct indices per row (ScatterElements, reduction none), with updates
#    smaller than the data (torch refuses negative indices; the conformance cases cover them);
#  - Tensor.scatter_add along axis 0 with repeated indices (ScatterElements, reduction add);
#  - index_put with a tensor of row indices (ScatterND), plain and accumulating (reduction add).
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_scatter_models.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' >"$tmp/gen.log" 2>&1 || { echo "NOT OK: cannot make the models"; cat "$tmp/gen.log"; exit 1; }
import sys, warnings, numpy as np, torch, torch.nn as nn, onnx
warnings.filterwarnings("ignore")
d = sys.argv[1]
torch.manual_seed(0)
def export(name, model, args, in_names, want):
    with torch.no_grad():
        out = model(*[a.clone() for a in args])
    torch.onnx.export(model, args, f"{d}/{name}.onnx", input_names=in_names, output_names=["y"], opset_version=16)
    ops = {n.op_type for n in onnx.load(f"{d}/{name}.onnx").graph.node}
    assert want in ops, (name, ops)
    for n, a in zip(in_names, args):
        np.save(f"{d}/{name}.{n}.npy", a.numpy())
    np.save(f"{d}/{name}.ref.y.npy", out.numpy())
    print(f"{name}|{' '.join(in_names)}")
class Sc(nn.Module):
    def forward(s, x, i, u):
        return x.scatter(1, i, u)
idx = torch.stack([torch.randperm(9)[:4] for _ in range(5)])
export("scatter", Sc(), (torch.randn(6, 9), idx, torch.randn(5, 4)), ["x", "i", "u"], "ScatterElements")
class ScAdd(nn.Module):
    def forward(s, x, i, u):
        return x.scatter_add(0, i, u)
export("scatter_add", ScAdd(), (torch.randn(4, 7), torch.randint(0, 4, (10, 7)), torch.randn(10, 7)),
       ["x", "i", "u"], "ScatterElements")
class Put(nn.Module):
    def __init__(s, acc):
        super().__init__(); s.acc = acc
    def forward(s, x, i, v):
        return x.index_put((i,), v, accumulate=s.acc)
export("index_put", Put(False), (torch.randn(8, 5), torch.tensor([6, 1, 3]), torch.randn(3, 5)), ["x", "i", "v"],
       "ScatterND")
export("index_put_acc", Put(True), (torch.randn(8, 5), torch.tensor([6, 1, 6, 2]), torch.randn(4, 5)),
       ["x", "i", "v"], "ScatterND")
PY

while IFS='|' read -r name ins; do
    args=()
    for i in $ins; do args+=(--input "$i=$tmp/$name.$i.npy"); done
    expect 0 "$TERN" run "$tmp/$name.onnx" --dtype fp32 "${args[@]}" --output-dir "$tmp/o_$name"
    if close_to_ref "$name" "$tmp/$name.ref.y.npy" "$tmp/o_$name/y.npy" 1e-5; then ok; else bad "$name differs from PyTorch"; fi
done < <(grep '^[a-z0-9_]*|' "$tmp/gen.log")

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
