#!/bin/bash
# A LLaMA-style decoder (scripts/gen_models.py's Llama: RMSNorm, rotary embeddings - rotate_half's Slices of the
# head dim in halves, ends INT64_MAX - grouped-query heads, the additive causal-mask buffer, SwiGLU; vocab 64,
# width 32, 4 query / 2 K/V heads, 2 layers, 16 positions) trained by `tern train` 20 AdamW steps in fp32 on
# /usr/share/common-licenses/GPL-3 against the same run in PyTorch (tests/train/llama_ref.py):
#   - the loss of every step within 1e-4 relative of PyTorch's;
#   - the causal mask buffer (blocks.0.mask: 0 / float32 minimum before the Softmax; the export keeps one
#     initializer for the blocks' equal buffers) is constant by default and the rotary tables are frozen by
#     --freeze globs (buffers, not parameters, in PyTorch): the run names them as constant initializers, the
#     trained ONNX keeps the three byte for byte, every other weight changed, and its trained weights match
#     PyTorch's trained parameters (max |diff| <= 1e-4 of the tensor's largest magnitude);
#   - both attention blocks take the fused backward;
#   - 2 data-parallel ranks keep the same constants and train the same weights as one core (3 steps, 1e-5);
#   - tp=2 (tensor parallelism: rotary attention and SwiGLU split per block) keeps them too and follows one core,
#     as does tp=4 (one query head a rank and the key/value head it reads, each K/V head replicated over 2 ranks);
#   - --freeze of an unknown name is an error naming it; --no-auto-freeze trains the masks (listed no more).
set -u
TERN=${1:?usage: test_train_llama.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

if ! "$PY" "$here/llama_ref.py" "$tmp" 20 4 3e-3 >"$tmp/ref.txt" 2>&1; then
    echo "NOT OK: the PyTorch reference failed: $(tail -3 "$tmp/ref.txt")" >&2
    exit 1
fi
args=("$tmp/llama.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 4 --lr 3e-3 --optimizer adamw
      --weight-decay 0.01 --precision fp32 --freeze 'blocks.*.cos' --freeze 'blocks.*.sin')
expect 0 "$TERN" train "${args[@]}" --steps 20 -o "$tmp/trained.onnx"
cp "$tmp/out" "$tmp/text.txt"
contains "$tmp/text.txt" "attention: 2 blocks with the fused backward (tern.AttentionGrad), 0 node by node"
contains "$tmp/text.txt" "blocks.0.mask (attention mask)"
contains "$tmp/text.txt" "blocks.0.cos (--freeze)"
contains "$tmp/text.txt" "blocks.0.sin (--freeze)"
contains "$tmp/text.txt" "training $tmp/llama.onnx: 21 weight tensors"
expect 0 "$TERN" train "${args[@]}" --steps 20 --json
cp "$tmp/out" "$tmp/tern.json"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "tern's LLaMA run differs from PyTorch's (above)"; fi
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
ref, got = json.load(open(f"{d}/ref.json")), json.load(open(f"{d}/tern.json"))
a = np.array(ref["losses"]); b = np.array([s["loss"] for s in got["steps"]])
rel = np.abs(a - b) / np.abs(a)
init = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/llama.onnx").graph.initializer}
trained = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/trained.onnx").graph.initializer}
tp = np.load(f"{d}/trained_ref.npz")
fail = len(b) != 20 or not rel.max() <= 1e-4
want = [{"name": "blocks.0.cos", "why": "--freeze"}, {"name": "blocks.0.sin", "why": "--freeze"},
        {"name": "blocks.0.mask", "why": "attention mask"}]
if got.get("constants") != want or got.get("weights") != 21:
    print(f"NOT OK: --json constants {got.get('constants')}, weights {got.get('weights')}"); fail = True
# torch.onnx.export keeps one initializer for equal buffers: blocks.1's are blocks.0's
bufs = [n for n in ref["buffers"] if n in init]
fail = fail or sorted(bufs) != ["blocks.0.cos", "blocks.0.mask", "blocks.0.sin"]
for n in bufs:
    if n not in trained or trained[n].tobytes() != init[n].tobytes():
        print(f"NOT OK: buffer {n} changed or missing in the trained ONNX"); fail = True
werr = 0.0
for n in tp.files:
    e = float(np.abs(trained[n] - tp[n]).max() / np.abs(tp[n]).max())
    werr = max(werr, e)
    if not np.abs(trained[n] - init[n]).max() > 0:
        print(f"NOT OK: weight {n} was not trained"); fail = True
fail = fail or not werr <= 1e-4
print(f"llama: max loss rel {rel.max():.2e}, loss {a[0]:.5f} -> {b[-1]:.5f}, trained weights within {werr:.2e} "
      f"of PyTorch's, {len(bufs)} buffers unchanged, predicted step {got['steps'][-1]['step_ms']:.3f} ms")
sys.exit(1 if fail else 0)
PYEOF
# data parallelism (2 ranks of trn1.32xlarge) keeps the same constants and trains the same weights (3 steps)
expect 0 "$TERN" train "${args[@]}" --steps 3 --machine trn1.32xlarge --cores 2 -o "$tmp/dp.onnx"
contains "$tmp/out" "blocks.0.sin (--freeze), blocks.0.mask (attention mask)"
expect 0 "$TERN" train "${args[@]}" --steps 3 -o "$tmp/one.onnx"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "2 ranks differ from 1 (above)"; fi
import sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
a, b, c = ({i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{f}.onnx").graph.initializer}
           for f in ("dp", "one", "llama"))
err = max(float(np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-30)) for k in b)
same = all(a[k].tobytes() == c[k].tobytes() for k in ("blocks.0.mask", "blocks.0.cos", "blocks.0.sin"))
print(f"llama: 2 ranks vs 1: weights within {err:.2e}, buffers unchanged: {same}")
sys.exit(0 if err <= 1e-5 and same else 1)
PYEOF
# an unknown --freeze name is an error naming it
expect 1 "$TERN" train "${args[@]}" --steps 1 --freeze blocks.0.nothing
contains "$tmp/err" "--freeze 'blocks.0.nothing' names no initializer"
# tensor parallelism (tp=2) with the same constants: each block's attention (rotary embeddings, 2 of the 4 query
# heads and 1 of the 2 K/V heads per rank) and SwiGLU MLP split, 4 pairs; 20 steps follow one core's losses within
# 1e-5 relative (measured 1.1e-7), the trained weights one core's within 1e-4 of their largest value, buffers kept.
# tp=4: 1 query head a rank and its K/V head, replicated over 2 ranks whose gradients are summed (kv_ms); measured
# 1.3e-7 and weights within 1.1e-6. Both split the 64-token vocabulary of the embedding and the (untied) LM head.
for n in 2 4; do
    expect 0 "$TERN" train "${args[@]}" --steps 20 --machine trn1.32xlarge --layout tp=$n --json -o "$tmp/tp$n.onnx"
    cp "$tmp/out" "$tmp/tp$n.json"
done
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "tp=2 or tp=4 differs from one core (above)"; fi
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
fail = False
for n in (2, 4):
    one, tp = json.load(open(f"{d}/tern.json")), json.load(open(f"{d}/tp{n}.json"))
    a, b = np.array([s["loss"] for s in one["steps"]]), np.array([s["loss"] for s in tp["steps"]])
    rel = float(np.max(np.abs(a - b) / np.abs(a))) if len(a) == len(b) == 20 else 1.0
    w1, w2, w0 = ({i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{f}.onnx").graph.initializer}
                  for f in ("trained", f"tp{n}", "llama"))
    err = max(float(np.abs(w1[k] - w2[k]).max() / max(np.abs(w1[k]).max(), 1e-30)) for k in w1)
    same = all(w2[k].tobytes() == w0[k].tobytes() for k in ("blocks.0.mask", "blocks.0.cos", "blocks.0.sin"))
    pairs, kv = tp["layout"]["pairs"], tp["layout"].get("kv_ms", 0)
    print(f"llama tp={n}: {pairs} pairs, loss rel {rel:.2e}, trained weights within {err:.2e} of one core's, "
          f"buffers unchanged: {same}, constants {tp.get('constants') == one.get('constants')}, K/V all-reduce {kv} ms")
    voc = (tp["layout"].get("vocab"), tp["layout"].get("vocab_head"))  # the embedding and untied head split
    fail |= not (pairs == 4 and rel <= 1e-5 and err <= 1e-4 and same and tp.get("constants") == one.get("constants")
                 and (kv > 0) == (n == 4) and voc == (64, 1))
sys.exit(1 if fail else 0)
PYEOF
# --no-auto-freeze: the mask is a trained weight again (22 tensors), only the --freeze ones listed
expect 0 "$TERN" train "${args[@]}" --steps 1 --no-auto-freeze
contains "$tmp/out" "training $tmp/llama.onnx: 22 weight tensors"
if grep -q "(attention mask)" "$tmp/out"; then bad "--no-auto-freeze still lists a mask: $(grep constant "$tmp/out")"; else ok; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
