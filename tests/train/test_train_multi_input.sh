#!/bin/bash
# `tern train` on models with several data inputs (--data NAME=FILE, repeatable; docs/training.md):
# - a model over two float inputs (x [N, 8] and z [N, 4]: Concat, MLP, and a skip from z) trained 25 steps with
#   AdamW (--shuffle: one permutation for both inputs) and with SGD + momentum (consecutive rows, wrapping) follows
#   PyTorch fp32 (same weights, rows and hyper-parameters) within 1e-4 relative per step; the trained ONNX keeps
#   both input names, `tern run` runs it with both inputs, and its initializers in PyTorch give tern's outputs;
# - a checkpoint after 10 steps resumes to the same 25-step run bit for bit (the data position of both inputs);
# - --cores 2 (each rank half the rows of both inputs) agrees with one core within 1e-5 per step;
# - a language-model-style model taking token ids and targets as two int64 inputs and computing its own loss
#   (--loss-output) follows PyTorch's cross-entropy within 1e-4 per step;
# - a missing input, row counts that differ, a wrong dtype or shape, an unknown name, a name given twice and an
#   unnamed --data for a two-input model are each refused, naming the input and the file.
set -u
TERN=${1:?usage: test_train_multi_input.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" - "$tmp" <<'EOF' || { echo "NOT OK: generating the models and the PyTorch references failed" >&2; exit 1; }
import json, sys
import numpy as np, onnx, torch
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
torch.set_num_threads(1)
r = np.random.default_rng(11)
N, STEPS, B = 50, 25, 8
x = r.standard_normal((N, 8)).astype(np.float32)
z = r.standard_normal((N, 4)).astype(np.float32)
y = r.integers(0, 3, N).astype(np.int64)
np.save(f"{d}/x.npy", x); np.save(f"{d}/z.npy", z); np.save(f"{d}/y.npy", y)
np.save(f"{d}/z40.npy", z[:40]); np.save(f"{d}/zi.npy", np.ones((N, 4), np.int64))
np.save(f"{d}/z5.npy", r.standard_normal((N, 5)).astype(np.float32))
W = {"w1": r.standard_normal((12, 16)) * 0.3, "b1": r.standard_normal(16) * 0.1, "w2": r.standard_normal((16, 3)) * 0.3,
     "b2": r.standard_normal(3) * 0.1, "w3": r.standard_normal((4, 3)) * 0.3}
W = {k: v.astype(np.float32) for k, v in W.items()}
nodes = [helper.make_node("Concat", ["x", "z"], ["xz"], axis=1), helper.make_node("MatMul", ["xz", "w1"], ["h0"]),
         helper.make_node("Add", ["h0", "b1"], ["h1"]), helper.make_node("Relu", ["h1"], ["h"]),
         helper.make_node("MatMul", ["h", "w2"], ["o0"]), helper.make_node("Add", ["o0", "b2"], ["o1"]),
         helper.make_node("MatMul", ["z", "w3"], ["s"]), helper.make_node("Add", ["o1", "s"], ["logits"])]
g = helper.make_graph(nodes, "two_inputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
                                            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
                      [numpy_helper.from_array(v, k) for k, v in W.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, f"{d}/two.onnx")

def fwd(P, xb, zb):
    h = torch.relu(torch.cat([xb, zb], 1) @ P["w1"] + P["b1"])
    return h @ P["w2"] + P["b2"] + zb @ P["w3"]

def splitmix_perm(n, seed):  # tern train --shuffle SEED (docs/training.md)
    M = (1 << 64) - 1
    s, p = seed, list(range(n))
    for i in range(n - 1, 0, -1):
        s = (s + 0x9E3779B97F4A7C15) & M
        q = s
        q = ((q ^ (q >> 30)) * 0xBF58476D1CE4E5B9) & M
        q = ((q ^ (q >> 27)) * 0x94D049BB133111EB) & M
        q ^= q >> 31
        j = q % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p

def run(opt_name, lr, perm):
    P = {k: torch.tensor(v, requires_grad=True) for k, v in W.items()}
    opt = (torch.optim.AdamW(P.values(), lr=lr, weight_decay=0.01, foreach=False) if opt_name == "adamw" else
           torch.optim.SGD(P.values(), lr=lr, momentum=0.9, foreach=False))
    losses, pos = [], 0
    for s in range(STEPS):
        idx = [perm[(pos + b) % N] for b in range(B)]
        pos = (pos + B) % N
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(fwd(P, torch.from_numpy(x[idx]), torch.from_numpy(z[idx])),
                                                 torch.from_numpy(y[idx]))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses

ref = {"adamw": run("adamw", 1e-2, splitmix_perm(N, 3)), "sgd": run("sgd", 0.05, list(range(N)))}

# token ids and targets as two inputs; the model computes its own mean cross-entropy: -mean(onehot(t) * logp)
V, T, D, NL = 11, 6, 8, 40
ids = r.integers(0, V, (NL, T)).astype(np.int64)
tgt = (ids * 3 + 1) % V  # a learnable next token
np.save(f"{d}/ids.npy", ids); np.save(f"{d}/tgt.npy", tgt)
E = {"emb": (r.standard_normal((V, D)) * 0.5).astype(np.float32), "proj": (r.standard_normal((D, V)) * 0.3).astype(np.float32),
     "pb": np.zeros(V, np.float32)}
consts = [numpy_helper.from_array(np.array(V, np.int64), "depth"), numpy_helper.from_array(np.array([0, 1], np.int64), "onoff"),
          numpy_helper.from_array(np.array([-1], np.int64), "last")]
nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"]), helper.make_node("MatMul", ["e", "proj"], ["l0"]),
         helper.make_node("Add", ["l0", "pb"], ["logits"]), helper.make_node("LogSoftmax", ["logits"], ["logp"], axis=-1),
         helper.make_node("OneHot", ["targets", "depth", "onoff"], ["hot"], axis=-1),
         helper.make_node("Cast", ["hot"], ["hotf"], to=TensorProto.FLOAT),  # int64 on/off values: no weight
         helper.make_node("Mul", ["hotf", "logp"], ["picked"]),
         helper.make_node("ReduceSum", ["picked", "last"], ["tok"], keepdims=0),
         helper.make_node("ReduceMean", ["tok"], ["mean"], keepdims=0), helper.make_node("Neg", ["mean"], ["loss"])]
g = helper.make_graph(nodes, "lm_two_inputs", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", T]),
                                               helper.make_tensor_value_info("targets", TensorProto.INT64, ["batch", T])],
                      [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                      [numpy_helper.from_array(v, k) for k, v in E.items()] + consts)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
onnx.save(m, f"{d}/lm.onnx")
P = {k: torch.tensor(v, requires_grad=True) for k, v in E.items()}
opt = torch.optim.AdamW(P.values(), lr=3e-2, weight_decay=0.01, foreach=False)
lm, pos = [], 0
for s in range(20):
    idx = [(pos + b) % NL for b in range(4)]
    pos = (pos + 4) % NL
    opt.zero_grad()
    logits = P["emb"][torch.from_numpy(ids[idx])] @ P["proj"] + P["pb"]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(tgt[idx]).reshape(-1))
    loss.backward()
    opt.step()
    lm.append(float(loss))
ref["lm"] = lm
json.dump(ref, open(f"{d}/ref.json", "w"))
EOF

cmp_losses() { # cmp_losses KEY TERN.json TOL
    if "$PY" - "$tmp/ref.json" "$@" <<'EOF'; then ok; else bad "$1: tern's losses differ from PyTorch's (above)"; fi
import json, sys
import numpy as np
ref, key, got, tol = json.load(open(sys.argv[1])), sys.argv[2], json.load(open(sys.argv[3])), float(sys.argv[4])
a, b = np.array(ref[key]), np.array([s["loss"] for s in got["steps"]])
rel = np.abs(a - b) / np.abs(a) if len(a) == len(b) else np.array([np.inf])
print(f"{key}: {len(b)} steps, loss {a[0]:.6f} -> {a[-1]:.6f}, max rel vs PyTorch {rel.max():.2e}")
sys.exit(0 if rel.max() <= tol else 1)
EOF
}
D2="--data x=$tmp/x.npy --data z=$tmp/z.npy"
A="$TERN train $tmp/two.onnx $D2 --labels $tmp/y.npy --batch 8 --precision fp32"

# (1) two float inputs against PyTorch: AdamW with --shuffle, SGD with momentum
expect 0 $A --optimizer adamw --lr 1e-2 --shuffle 3 --steps 25 --json -o "$tmp/adamw.onnx"
cp "$tmp/out" "$tmp/adamw.json"
cmp_losses adamw "$tmp/adamw.json" 1e-4
expect 0 $A --optimizer sgd --lr 0.05 --momentum 0.9 --steps 25 --json -o "$tmp/sgd.onnx"
cp "$tmp/out" "$tmp/sgd.json"
cmp_losses sgd "$tmp/sgd.json" 1e-4
# the trained model keeps both inputs, runs under `tern run`, and its initializers give the same outputs in PyTorch
expect 0 $TERN run "$tmp/adamw.onnx" --dtype fp32 --input x="$tmp/x.npy" --input z="$tmp/z.npy" --output-dir "$tmp/run"
if "$PY" - "$tmp" <<'EOF'; then ok; else bad "the trained two-input model (above)"; fi
import sys
import numpy as np, onnx, torch
from onnx import numpy_helper
d = sys.argv[1]
m = onnx.load(f"{d}/adamw.onnx")
names = [i.name for i in m.graph.input]
P = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in m.graph.initializer}
x, z = torch.from_numpy(np.load(f"{d}/x.npy")), torch.from_numpy(np.load(f"{d}/z.npy"))
want = (torch.relu(torch.cat([x, z], 1) @ P["w1"] + P["b1"]) @ P["w2"] + P["b2"] + z @ P["w3"]).numpy()
got = np.load(f"{d}/run/logits.npy")
err = float(np.abs(want - got).max())
print(f"trained model: inputs {names}, dynamic batch {m.graph.input[1].type.tensor_type.shape.dim[0].dim_param!r}, "
      f"tern run vs PyTorch max |diff| {err:.2e}")
sys.exit(0 if names == ["x", "z"] and m.graph.input[1].type.tensor_type.shape.dim[0].dim_param == "batch"
         and err <= 1e-4 else 1)
EOF

# checkpoint after 10 steps, resume to 25: the same run bit for bit
expect 0 $A --optimizer adamw --lr 1e-2 --shuffle 3 --steps 10 --checkpoint "$tmp/ck"
expect 0 $A --optimizer adamw --lr 1e-2 --shuffle 3 --steps 25 --resume "$tmp/ck" --json -o "$tmp/resumed.onnx"
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/adamw.json" | tail -15 >"$tmp/straight_tail"
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$tmp/out" >"$tmp/resumed_all"
if [ -s "$tmp/resumed_all" ] && cmp -s "$tmp/straight_tail" "$tmp/resumed_all"; then ok; else
    bad "resumed two-input run differs: $(diff "$tmp/straight_tail" "$tmp/resumed_all" | head -4)"; fi
if cmp -s "$tmp/adamw.onnx" "$tmp/resumed.onnx"; then ok; else bad "the resumed run's trained model differs"; fi

# (4) data parallelism: 2 cores, each half the rows of both inputs, against one core
expect 0 $A --optimizer adamw --lr 1e-2 --shuffle 3 --steps 25 --cores 2 --json
cp "$tmp/out" "$tmp/dp2.json"
if "$PY" - "$tmp" <<'EOF'; then ok; else bad "--cores 2 differs from one core (above)"; fi
import json, sys
import numpy as np
d = sys.argv[1]
L = lambda n: np.array([s["loss"] for s in json.load(open(f"{d}/{n}.json"))["steps"]])
one, two = L("adamw"), L("dp2")
rel = np.abs(one - two) / np.abs(one) if len(one) == len(two) else np.array([np.inf])
print(f"--cores 2 vs 1 core: max loss rel {rel.max():.2e}, ranks {json.load(open(f'{d}/dp2.json'))['ranks']}")
sys.exit(0 if rel.max() <= 1e-5 and json.load(open(f"{d}/dp2.json"))["ranks"] == 2 else 1)
EOF

# (2) token ids and targets as two inputs, the model's own loss
expect 0 $TERN train "$tmp/lm.onnx" --data "input_ids=$tmp/ids.npy" --data "targets=$tmp/tgt.npy" --loss-output loss \
    --optimizer adamw --lr 3e-2 --steps 20 --batch 4 --precision fp32 --json
cp "$tmp/out" "$tmp/lm.json"
cmp_losses lm "$tmp/lm.json" 1e-4

# (3) bad bindings: each refused, naming the input and the file
expect 1 $TERN train "$tmp/two.onnx" --data "x=$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "the model's input 'z' has no data"
expect 1 $TERN train "$tmp/two.onnx" --data "x=$tmp/x.npy" --data "z=$tmp/z40.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "data '$tmp/z40.npy' has 40 rows, data '$tmp/x.npy' 50"
expect 1 $TERN train "$tmp/two.onnx" --data "x=$tmp/x.npy" --data "z=$tmp/zi.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "data '$tmp/zi.npy': dtype <i8, the model's input 'z' takes float32 values"
expect 1 $TERN train "$tmp/two.onnx" --data "x=$tmp/x.npy" --data "z=$tmp/z5.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "input 'z': dim 1 is 4 in the model, 5 in the data"
expect 1 $TERN train "$tmp/two.onnx" $D2 --data "w=$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "data for 'w': the model '$tmp/two.onnx' has no such input (its data inputs: 'x', 'z')"
expect 2 $TERN train "$tmp/two.onnx" --data "x=$tmp/x.npy" --data "x=$tmp/z.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "input 'x' is given twice ('$tmp/x.npy' and '$tmp/z.npy')"
expect 1 $TERN train "$tmp/two.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --steps 1 --batch 8
contains "$tmp/err" "has 2 data inputs ('x', 'z'): give each its data by name"
expect 2 $TERN train "$tmp/two.onnx" --data "$tmp/x.npy" --data "z=$tmp/z.npy" --labels "$tmp/y.npy" --steps 1
contains "$tmp/err" "several data inputs are each named"
expect 1 $TERN train "$tmp/two.onnx" $D2 --labels "$tmp/ids.npy" --steps 1 --batch 8
contains "$tmp/err" "labels '$tmp/ids.npy': 40 rows, the data has 50"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
