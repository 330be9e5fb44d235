#!/bin/bash
# A tiny 3-D CNN end to end against PyTorch fp32 (the 3-D gradient rules of src/train/grad_conv.c and the 3-D
# lowerings of src/compiler/lower_cnn.c in one training step graph): Conv3d 3x3x3 pad 1 + ReLU + MaxPool3d 2,
# a grouped Conv3d with strides (1, 2, 1) + ReLU, AvgPool3d 3x2x3 stride 2 pads (1, 0, 1) not counted, Linear,
# on seeded random 2x6x8x6 volumes with 5 classes: 8 AdamW steps of 16 rows (clipped to norm 1) by tern and by
# PyTorch, every step's loss within 1e-6 relative and its gradient norm within 1e-5, then the trained ONNX under
# `tern run` against the PyTorch module with tern's trained weights (logits within 1e-5).
set -u
TERN=${1:?usage: test_train_cnn3d.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

d="$tmp/cnn3d"
mkdir -p "$d"
cat >"$d/model.py" <<'EOF'
import torch
nn = torch.nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
                         nn.Conv3d(4, 6, 3, stride=(1, 2, 1), padding=1, groups=2), nn.ReLU(),
                         nn.AvgPool3d((3, 2, 3), stride=2, padding=(1, 0, 1), count_include_pad=False), nn.Flatten(),
                         nn.Linear(24, 5))
EOF
if ! "$PY" - "$d" >"$d/ref.txt" 2>&1 <<'EOF'; then bad "the PyTorch reference failed: $(tail -3 "$d/ref.txt")"; fi
import json, sys
import numpy as np, torch
d = sys.argv[1]
sys.path.insert(0, d)
from model import build
torch.set_num_threads(1)
m = build()
rng = np.random.default_rng(7)
x = rng.standard_normal((64, 2, 6, 8, 6)).astype(np.float32)
y = rng.integers(0, 5, 64).astype(np.int64)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/y.npy", y)
torch.onnx.export(m, torch.zeros(16, 2, 6, 8, 6), f"{d}/cnn3d.onnx", input_names=["vol"], output_names=["logits"],
                  dynamic_axes={"vol": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17)
opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01, foreach=False)
losses, norms = [], []
for s in range(8):
    idx = [(s * 16 + b) % 64 for b in range(16)]
    m.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(torch.from_numpy(x[idx])), torch.from_numpy(y[idx]))
    loss.backward()
    norms.append(float(torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)))
    opt.step()
    losses.append(float(loss))
json.dump({"losses": losses, "grad_norms": norms}, open(f"{d}/ref.json", "w"))
EOF
expect 0 "$TERN" train "$d/cnn3d.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer adamw --lr 3e-3 \
    --steps 8 --batch 16 --clip-norm 1 --precision fp32 --json -o "$d/trained.onnx"
cp "$tmp/out" "$d/tern.json"
expect 0 "$TERN" run "$d/trained.onnx" --dtype fp32 --input vol="$d/x.npy" --output-dir "$d/out"
if "$PY" - "$d" <<'EOF'; then ok; else bad "tern's 3-D CNN run differs from PyTorch's (above)"; fi
import json, sys
import numpy as np, onnx, torch
from onnx import numpy_helper
d = sys.argv[1]
sys.path.insert(0, d)
from model import build
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/tern.json"))
a, b = np.array(ref["losses"]), np.array([s["loss"] for s in got["steps"]])
ga, gb = np.array(ref["grad_norms"]), np.array([s["grad_norm"] for s in got["steps"]])
fail = []
if len(b) != 8:
    fail.append(f"{len(b)} steps, expected 8")
else:
    rel, grel = np.abs(a - b) / np.abs(a), np.abs(ga - gb) / np.abs(ga)
    if not rel.max() <= 1e-6:
        fail.append(f"loss of step {rel.argmax() + 1}: tern {b[rel.argmax()]:.9g}, PyTorch {a[rel.argmax()]:.9g}")
    if not grel.max() <= 1e-5:
        fail.append(f"grad norm of step {grel.argmax() + 1}: tern {gb[grel.argmax()]:.9g}, "
                    f"PyTorch {ga[grel.argmax()]:.9g}")
    print(f"cnn3d: max loss rel {rel.max():.2e}, max grad-norm rel {grel.max():.2e}, loss {a[0]:.6f} -> {b[-1]:.6f}")
state = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in onnx.load(f"{d}/trained.onnx").graph.initializer}
m = build()
m.load_state_dict(state)
m.eval()
with torch.no_grad():
    tl = m(torch.from_numpy(np.load(f"{d}/x.npy"))).numpy()
logits = np.load(f"{d}/out/logits.npy")
err = float(np.abs(tl - logits).max())
print(f"cnn3d: trained model under tern run vs PyTorch: max |diff| {err:.2e}")
if not err <= 1e-5 * max(1.0, float(np.abs(tl).max())):
    fail.append(f"PyTorch with the trained initializers differs from tern run by {err:.3g}")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
EOF
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
