# Shared by tests/train/test_train_digits*.sh (sourced after lib.sh, with TERN, PY and here set): run_case trains
# one configuration on the digits data with tern and with PyTorch (digits_ref.py) and compares the runs: the loss
# of every step within LOSS_TOL relative (default 1e-4), the gradient norm within GN_TOL (1e-3).
run_case() { # name optimizer lr extra tern-flags...
    local name=$1 opt=$2 lr=$3 extra=$4
    shift 4
    local d="$tmp/$name"
    mkdir -p "$d"
    if ! "$PY" "$here/digits_ref.py" "$d" 200 "${BATCH:-32}" "$opt" "$lr" "$extra" >"$d/ref.txt" 2>&1; then
        bad "$name: the PyTorch reference failed: $(tail -3 "$d/ref.txt")"
        return
    fi
    expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer "$opt" --lr "$lr" \
        --steps 200 --batch "${BATCH:-32}" --clip-norm 1 --precision fp32 --json -o "$d/trained.onnx" "$@"
    cp "$tmp/out" "$d/tern.json"
    expect 0 "$TERN" run "$d/trained.onnx" --dtype fp32 --input pixels="$d/x_test.npy" --output-dir "$d/out"
    if LOSS_TOL=${LOSS_TOL:-1e-4} GN_TOL=${GN_TOL:-1e-3} "$PY" - "$d" "$name" "$extra" "$here" <<'EOF'; then ok; else bad "$name: tern's run differs from PyTorch's (above)"; fi
import json, os, sys
import numpy as np, onnx, torch
from onnx import numpy_helper
d, name, extra = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4])
from digits_models import build
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/tern.json"))
a = np.array(ref["losses"]); b = np.array([s["loss"] for s in got["steps"]])
ga = np.array(ref["grad_norms"]); gb = np.array([s["grad_norm"] for s in got["steps"]])
fail = []
if len(b) != 200:
    fail.append(f"{len(b)} steps")
rel = np.abs(a - b) / np.abs(a)
grel = np.abs(ga - gb) / np.abs(ga)
ltol, gtol = float(os.environ["LOSS_TOL"]), float(os.environ["GN_TOL"])
if not rel.max() <= ltol:
    fail.append(f"loss of step {rel.argmax() + 1}: tern {b[rel.argmax()]:.9g}, PyTorch {a[rel.argmax()]:.9g}")
if not grel.max() <= gtol:
    fail.append(f"grad norm of step {grel.argmax() + 1}: tern {gb[grel.argmax()]:.9g}, PyTorch {ga[grel.argmax()]:.9g}")
logits = np.load(f"{d}/out/logits.npy")
y = np.load(f"{d}/y_test.npy")
acc = float((logits.argmax(1) == y).mean())
if abs(acc - ref["test_accuracy"]) > float(os.environ.get("ACC_TOL", "0.01")):
    fail.append(f"test accuracy tern {acc:.4f}, PyTorch {ref['test_accuracy']:.4f}")
m = onnx.load(f"{d}/trained.onnx")
if [i.name for i in m.graph.input] != ["pixels"] or [o.name for o in m.graph.output] != ["logits"]:
    fail.append("trained model's input/output names changed")
if m.graph.input[0].type.tensor_type.shape.dim[0].dim_param != "batch":
    fail.append("trained model lost its dynamic batch axis")
# the trained initializers in the same PyTorch module give tern's logits
state = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in m.graph.initializer}
mod = build(next((e for e in extra.split(",") if e in ("gelu-ln", "cnn", "dropout")), ""))
mod.load_state_dict(state)
mod.eval()
with torch.no_grad():
    tl = mod(torch.from_numpy(np.load(f"{d}/x_test.npy"))).numpy()
if not np.abs(tl - logits).max() <= 1e-4 * max(1.0, float(np.abs(tl).max())):
    fail.append(f"PyTorch with the trained initializers differs from tern run by {np.abs(tl - logits).max():.3g}")
print(f"{name}: max loss rel {rel.max():.2e}, max grad-norm rel {grel.max():.2e}, loss {a[0]:.5f} -> {b[-1]:.5f}, "
      f"test accuracy tern {acc * 100:.2f}% PyTorch {ref['test_accuracy'] * 100:.2f}%, "
      f"predicted step {got['steps'][-1]['step_ms']:.4f} ms")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
EOF
}

