#!/usr/bin/env bash
# Einsum and ConvTranspose, which expand into MatMul/Transpose/ReduceSum and Conv nodes (src/graph/expand_einsum.c,
# expand_convt.c), compiled with FP32 matmuls and run on a simulated trn1 core with `tern run`; every output's cosine
# similarity with the reference must be at least 0.9999 (max |diff| is printed):
#  - from PyTorch: einsum attention ('bhqd,bhkd->bhqk', softmax, 'bhqk,bhkd->bhqd'), a bilinear form with three
#    operands ('bn,anm,bm->ba'); ConvTranspose2d with stride 2, padding 1, output_padding 1; with groups 2 and
#    dilation 2; ConvTranspose1d with stride 3; ConvTranspose3d with groups, per-axis strides, output_padding and
#    dilation (a sum of 2-D convolutions over the kernel depth); a small decoder (Conv, ReLU, two strided ConvTranspose2d);
#  - single Einsum nodes (onnx.helper) against numpy.einsum: batched and broadcast (ellipsis) matmuls, outer product,
#    transpose, full sum, trace and diagonal (repeated labels), implicit output, a size-1 broadcast axis;
#  - an Add of a per-channel bias [1, C, 1, 1] with C equal to the last dim;
#  - a malformed equation is refused, naming the node and the equation. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_einsum_convt.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' >"$tmp/gen.log" 2>&1 || { echo "NOT OK: cannot make the models"; cat "$tmp/gen.log"; exit 1; }
import sys, math, warnings, numpy as np, torch, torch.nn as nn, onnx, onnx.numpy_helper
from onnx import helper, TensorProto as TP
warnings.filterwarnings("ignore")
d = sys.argv[1]
torch.manual_seed(0)
def export(name, model, args, in_names, out_names, opset=14):
    model.eval()
    with torch.no_grad():
        outs = model(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    torch.onnx.export(model, args, f"{d}/{name}.onnx", input_names=in_names, output_names=out_names,
                      opset_version=opset)
    ops = {n.op_type for n in onnx.load(f"{d}/{name}.onnx").graph.node}
    assert "Einsum" in ops or "ConvTranspose" in ops, (name, ops)
    for n, a in zip(in_names, args):
        np.save(f"{d}/{name}.{n}.npy", a.numpy())
    for n, o in zip(out_names, outs):
        np.save(f"{d}/{name}.ref.{n}.npy", o.numpy())
    print(f"{name}|{' '.join(in_names)}|{' '.join(out_names)}")

class Attn(nn.Module):
    def forward(s, q, k, v):
        p = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1]), dim=-1)
        return torch.einsum("bhqk,bhkd->bhqd", p, v)
export("einsum_attn", Attn(), tuple(torch.randn(2, 4, 16, 32) for _ in range(3)), ["q", "k", "v"], ["out"])
class Bilinear(nn.Module):
    def __init__(s):
        super().__init__(); s.w = nn.Parameter(torch.randn(5, 6, 7))
    def forward(s, a, b):
        return torch.einsum("bn,anm,bm->ba", a, s.w, b)
export("einsum_bilinear", Bilinear(), (torch.randn(3, 6), torch.randn(3, 7)), ["a", "b"], ["y"])
export("convt_s2", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), (torch.randn(2, 4, 7, 9),),
       ["x"], ["y"])
export("convt_groups", nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, dilation=2, bias=False),
       (torch.randn(1, 4, 5, 6),), ["x"], ["y"])
export("convt_1d", nn.ConvTranspose1d(3, 5, 4, stride=3, padding=2), (torch.randn(2, 3, 11),), ["x"], ["y"])
export("convt_3d", nn.ConvTranspose3d(4, 6, 3, stride=(2, 1, 2), padding=1, output_padding=(1, 0, 1), groups=2,
                                      dilation=(1, 2, 1)), (torch.randn(2, 4, 4, 5, 3),), ["x"], ["y"])
decoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                        nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1), nn.ReLU(),
                        nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1))
export("convt_decoder", decoder, (torch.randn(1, 3, 8, 8),), ["x"], ["y"])

# single Einsum nodes against numpy
rng = np.random.default_rng(1)
cases = [("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]), ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),
         ("i,j->ij", [(4,), (6,)]), ("ij->ji", [(3, 7)]), ("ijk->", [(2, 3, 4)]), ("ii", [(5, 5)]),
         ("...ii->...i", [(3, 4, 4)]), ("ij,jk", [(3, 4), (4, 2)]), ("bij,bkj->bik", [(1, 4, 5), (3, 6, 5)]),
         ("ab,ab->a", [(4, 8), (4, 8)])]
for k, (eq, shapes) in enumerate(cases):
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{j}" for j in range(len(xs))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    g = helper.make_graph([node], "e", [helper.make_tensor_value_info(n, TP.FLOAT, x.shape) for n, x in zip(names, xs)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/einsum{k}.onnx")
    for n, x in zip(names, xs):
        np.save(f"{d}/einsum{k}.{n}.npy", x)
    np.save(f"{d}/einsum{k}.ref.y.npy", np.einsum(eq, *[x.astype(np.float64) for x in xs]))
    print(f"einsum{k}|{' '.join(names)}|y")
# a per-channel bias [1, C, 1, 1] whose C equals the last dim (ConvTranspose's bias add): once taken for a
# last-axis bias by lower.c's bias rule (a silent wrong answer)
x = rng.standard_normal((2, 6, 7, 6)).astype(np.float32)
bias = rng.standard_normal((1, 6, 1, 1)).astype(np.float32)
g = helper.make_graph([helper.make_node("Add", ["x0", "b"], ["y"])], "cb",
                      [helper.make_tensor_value_info("x0", TP.FLOAT, x.shape)],
                      [helper.make_tensor_value_info("y", TP.FLOAT, None)], [onnx.numpy_helper.from_array(bias, "b")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/chan_bias.onnx")
np.save(f"{d}/chan_bias.x0.npy", x)
np.save(f"{d}/chan_bias.ref.y.npy", x + bias)
print("chan_bias|x0|y")
node = helper.make_node("Einsum", ["x0", "x1"], ["y"], equation="ij,jk,kl->il")
g = helper.make_graph([node], "bad", [helper.make_tensor_value_info(n, TP.FLOAT, [2, 2]) for n in ["x0", "x1"]],
                      [helper.make_tensor_value_info("y", TP.FLOAT, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/bad_eq.onnx")
PY

compare() { # compare NAME "OUTPUTS": each of the run's outputs ($tmp/o_NAME) against the reference
    local o good=1
    for o in $2; do
        close_to_ref "$1.$o" "$tmp/$1.ref.$o.npy" "$tmp/o_$1/$o.npy" || good=0
    done
    if [ "$good" -eq 1 ]; then ok; else bad "$1 differs from the reference"; fi
}

while IFS='|' read -r name ins outs; do
    args=()
    for i in $ins; do args+=(--input "$i=$tmp/$name.$i.npy"); done
    expect 0 "$TERN" run "$tmp/$name.onnx" --dtype fp32 "${args[@]}" --output-dir "$tmp/o_$name"
    compare "$name" "$outs"
done < <(grep '^[a-z0-9_]*|' "$tmp/gen.log")

expect 1 "$TERN" run "$tmp/bad_eq.onnx"
contains "$tmp/err" 'Einsum'
contains "$tmp/err" 'equation "ij,jk,kl->il" has more terms than the 2 operands'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
