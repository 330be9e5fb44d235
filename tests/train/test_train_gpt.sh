#!/bin/bash
# A GPT-2-style transformer (scripts/gen_models.py's: tied embeddings, causal attention with a Where mask,
# pre-LN blocks, tanh GELU, Split of the fused QKV projection) trained by `tern train` as a byte-level language
# model on /usr/share/common-licenses/GPL-3 (Debian's base-files), 200 AdamW steps, against the same run in
# PyTorch fp32 (tests/train/gpt_ref.py): the loss of every step within 1e-4 relative, and the held-out
# perplexity of the trained ONNX model under `tern run` within 1 % of PyTorch's.
set -u
TERN=${1:?usage: test_train_gpt.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

if ! "$PY" "$here/gpt_ref.py" "$tmp" 200 2 1e-3 >"$tmp/ref.txt" 2>&1; then
    echo "NOT OK: the PyTorch reference failed: $(tail -3 "$tmp/ref.txt")" >&2
    exit 1
fi
expect 0 "$TERN" train "$tmp/gpt.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 2 --steps 200 --lr 1e-3 \
    --clip-norm 1 --precision fp32 --json -o "$tmp/trained.onnx"
cp "$tmp/out" "$tmp/tern.json"
expect 0 "$TERN" run "$tmp/trained.onnx" --dtype fp32 --input input_ids="$tmp/x_test.npy" --output-dir "$tmp/run"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "tern's language-model run differs from PyTorch's (above)"; fi
import json, math, sys
import numpy as np
d = sys.argv[1]
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/tern.json"))
a = np.array(ref["losses"]); b = np.array([s["loss"] for s in got["steps"]])
rel = np.abs(a - b) / np.abs(a)
logits = np.load(f"{d}/run/logits.npy").astype(np.float64)
y = np.load(f"{d}/y_test.npy")
z = logits - logits.max(-1, keepdims=True)
logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
ppl = math.exp(-np.take_along_axis(logp, y[..., None], -1).mean())
print(f"gpt: max loss rel {rel.max():.2e}, loss {a[0]:.5f} -> {b[-1]:.5f}, held-out perplexity tern {ppl:.4f} "
      f"PyTorch {ref['test_perplexity']:.4f}, predicted step {got['steps'][-1]['step_ms']:.3f} ms")
fail = len(b) != 200 or not rel.max() <= 1e-4 or not abs(ppl / ref["test_perplexity"] - 1) <= 0.01
sys.exit(1 if fail else 0)
PYEOF
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
