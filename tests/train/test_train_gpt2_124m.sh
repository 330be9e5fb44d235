#!/bin/bash
# GPT-2 124M (scripts/gen_models.py's GPT: vocab 50,257, width 768, 12 layers, tied embeddings; GPT-2's
# initialisation) trained by `tern train` on token rows of sequence 128, batch 1, AdamW with clipping: the
# embedding gradient of the real vocabulary goes through the row scatter-add (src/compiler/lower_scatter_add.c)
# and the long reductions (lower_reduce_long.c). Three functional steps against the same run in PyTorch fp32
# (scripts/gpt2_train.py): the loss of every step within 1e-4 relative. Labelled long (minutes on 2 cores).
set -u
TERN=${1:?usage: test_train_gpt2_124m.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
gen="$here/../../scripts/gpt2_train.py"

if ! "$PY" "$gen" export "$tmp" 128 3 >"$tmp/gen.txt" 2>&1 || ! "$PY" "$gen" ref "$tmp" 128 3 1e-4 >>"$tmp/gen.txt" 2>&1
then
    echo "NOT OK: the PyTorch reference failed: $(tail -3 "$tmp/gen.txt")" >&2
    exit 1
fi
expect 0 "$TERN" train "$tmp/gpt2.onnx" --data input_ids="$tmp/x.npy" --labels "$tmp/y.npy" --batch 1 --steps 3 \
    --optimizer adamw --lr 1e-4 --clip-norm 1 --precision fp32 --json
cp "$tmp/out" "$tmp/tern.json"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "tern's GPT-2 124M losses differ from PyTorch's (above)"; fi
import json, sys
import numpy as np
d = sys.argv[1]
a = np.array(json.load(open(f"{d}/ref.json"))["losses"])
got = json.load(open(f"{d}/tern.json"))
b = np.array([s["loss"] for s in got["steps"]])
rel = np.abs(a - b) / np.abs(a)
print(f"gpt2_124m: losses PyTorch {a.round(6).tolist()} tern {b.round(6).tolist()}, max rel {rel.max():.2e}, "
      f"predicted step {got['steps'][-1]['step_ms']:.1f} ms")
sys.exit(0 if len(b) == 3 and rel.max() <= 1e-4 else 1)
PYEOF
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
