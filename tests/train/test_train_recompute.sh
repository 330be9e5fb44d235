#!/bin/bash
# Activation recomputation (--recompute, --recompute-segments N): the forward is cut into segments, only their
# inputs are kept, and each segment but the last runs again just before its backward. Against the same run
# without it, on scripts/gen_models.py's GPT (the language model of test_train_gpt.sh, 20 AdamW steps) and on
# the digits MLP (test_train_digits.sh's, batch 256): every step's loss and gradient norm and the trained ONNX
# file are identical bit for bit (the copies are the same ops on the same inputs), the step's HBM footprint
# (tern_train_hbm_bytes, the JSON's hbm_bytes) is lower, and the predicted step time is longer (a second forward
# of every segment but the last).
set -u
TERN=${1:?usage: test_train_recompute.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

compare() { # compare LABEL BASE_DIR RC_DIR: bit-identical steps and model, less HBM, more time
    if "$PY" - "$@" <<'PYEOF'; then ok; else bad "$1: recomputation changed the run or saved nothing (above)"; fi
import json, sys
label, a, b = sys.argv[1:4]
ja, jb = json.load(open(f"{a}/run.json")), json.load(open(f"{b}/run.json"))
fail = []
sa = [(s["loss"], s["grad_norm"]) for s in ja["steps"]]
sb = [(s["loss"], s["grad_norm"]) for s in jb["steps"]]
if sa != sb:
    k = next((i for i in range(min(len(sa), len(sb))) if sa[i] != sb[i]), min(len(sa), len(sb)))
    fail.append(f"step {k + 1} differs: {sa[k] if k < len(sa) else None} vs {sb[k] if k < len(sb) else None}")
if open(f"{a}/m.onnx", "rb").read() != open(f"{b}/m.onnx", "rb").read():
    fail.append("the trained models differ")
ha, hb = ja["hbm_bytes"], jb["hbm_bytes"]
ta, tb = ja["steps"][-1]["step_ms"], jb["steps"][-1]["step_ms"]
if not hb < ha:
    fail.append(f"HBM {hb} bytes with recomputation, {ha} without")
if not tb > ta:
    fail.append(f"step {tb} ms with recomputation, {ta} ms without")
print(f"{label}: {len(sa)} steps identical; HBM {ha / 1048576:.3f} -> {hb / 1048576:.3f} MiB, "
      f"step {ta:.4f} -> {tb:.4f} ms, graph {ja['graph_nodes']} -> {jb['graph_nodes']} nodes")
for f in fail:
    print("  " + f)
sys.exit(1 if fail else 0)
PYEOF
}

# the GPT language model
mkdir -p "$tmp/gpt"
if ! "$PY" "$here/gpt_ref.py" "$tmp/gpt" 1 2 1e-3 >"$tmp/gpt_ref.txt" 2>&1; then
    echo "NOT OK: generating the GPT failed: $(tail -3 "$tmp/gpt_ref.txt")" >&2
    exit 1
fi
# batch 4: at batch 2 this GPT's activations (64 tokens of width 64) are a few KiB beside its weights and Adam
# state, and the plain step's peak (3.20 MiB, weight gradients' batch sums as views and (W^T)^T folded) is below
# what the recomputing step keeps (3.26 MiB): nothing for recomputation to save
G="$TERN train $tmp/gpt/gpt.onnx --data $tmp/gpt/x.npy --labels $tmp/gpt/y.npy --batch 4 --steps 20 --lr 1e-3 --clip-norm 1 --json"
for r in base rc rc2; do
    mkdir -p "$tmp/gpt/$r"
    flags=""
    [ $r = rc ] && flags="--recompute"
    [ $r = rc2 ] && flags="--recompute-segments 2"
    expect 0 $G $flags -o "$tmp/gpt/$r/m.onnx"
    cp "$tmp/out" "$tmp/gpt/$r/run.json"
done
compare "gpt --recompute" "$tmp/gpt/base" "$tmp/gpt/rc"
compare "gpt --recompute-segments 2" "$tmp/gpt/base" "$tmp/gpt/rc2"

# the digits MLP (AdamW, ReLU/Tanh), a batch whose activations outweigh the weights
mkdir -p "$tmp/mlp"
if ! "$PY" "$here/digits_ref.py" "$tmp/mlp" 1 32 adamw 3e-3 "" >"$tmp/mlp_ref.txt" 2>&1; then
    echo "NOT OK: generating the MLP failed: $(tail -3 "$tmp/mlp_ref.txt")" >&2
    exit 1
fi
M="$TERN train $tmp/mlp/mlp.onnx --data $tmp/mlp/x.npy --labels $tmp/mlp/y.npy --batch 256 --steps 20 --lr 3e-3 --clip-norm 1 --json"
for r in base rc; do
    mkdir -p "$tmp/mlp/$r"
    flags=""
    [ $r = rc ] && flags="--recompute"
    expect 0 $M $flags -o "$tmp/mlp/$r/m.onnx"
    cp "$tmp/out" "$tmp/mlp/$r/run.json"
done
compare "digits MLP --recompute" "$tmp/mlp/base" "$tmp/mlp/rc"

expect 2 $TERN train "$tmp/mlp/mlp.onnx" --data "$tmp/mlp/x.npy" --labels "$tmp/mlp/y.npy" --recompute-segments 1
contains "$tmp/err" "--recompute-segments"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
