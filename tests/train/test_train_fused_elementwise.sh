#!/bin/bash
# Elementwise fusion (src/compiler/fuse_elementwise.c, docs/compiler.md "Elementwise fusion"): chains of
# elementwise nodes computed in one pass over SBUF tiles give the node-by-node program's bits. Training: the small
# GPT of test_train_gpt.sh (layer norms written out, tanh GELU, cross-entropy, its backward) and the BERT-style
# model of test_train_attention_mask.sh (a padding mask, post-LN), 4 steps each, with and without
# --no-fuse-elementwise: the losses, gradient norms, trained ONNX files and checkpoints (weights and optimizer
# state) are byte-identical, in fp32 and bf16 with AdamW and clipping, with the node-by-node optimizer (its dozen
# elementwise nodes per weight fuse), LAMB, SGD with momentum, pure BF16 with round-to-nearest-even, under
# activation recomputation and gradient accumulation. The fused steps predict less time. (The data-parallel
# trainer's graphs, compiled by data_parallel.c, are fused without a switch to compare.)
# Inference: LLaMA- and T5-style models (RMSNorm and rotary embeddings as elementwise nodes) and a small ResNet,
# on trn1 and trn2 in bf16 and fp32: the outputs are byte-identical and the fused program is not slower. Under
# bf16-sr the rounding draws follow each instruction's sequence number, so there the values legitimately differ:
# both runs finish and stay within the stochastic-rounding noise of each other.
set -u
TERN=${1:?usage: test_train_fused_elementwise.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "NOT OK: /usr/share/common-licenses/GPL-3 is missing" >&2; exit 1; }

"$PY" "$here/gpt_ref.py" "$tmp" 1 2 1e-3 >"$tmp/ref.txt" 2>&1 || { echo "NOT OK: gpt_ref.py failed" >&2; exit 1; }
steps_of() { grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$1"; }
ms_of() { grep -o '"step_ms":[0-9.]*' "$1" | tail -1 | cut -d: -f2; }
n=0
compare() { # LABEL ARGS...: fused and --no-fuse-elementwise agree bit for bit, and the fused step is shorter
    local label=$1
    shift
    n=$((n + 1))
    expect 0 "$TERN" train "$@" --json -o "$tmp/f$n.onnx" --checkpoint "$tmp/cf$n"
    steps_of "$tmp/out" >"$tmp/f$n.log"
    local fms
    fms=$(ms_of "$tmp/out")
    expect 0 "$TERN" train "$@" --no-fuse-elementwise --json -o "$tmp/u$n.onnx" --checkpoint "$tmp/cu$n"
    steps_of "$tmp/out" >"$tmp/u$n.log"
    local ums
    ums=$(ms_of "$tmp/out")
    if [ -s "$tmp/f$n.log" ] && cmp -s "$tmp/f$n.log" "$tmp/u$n.log"; then ok; else
        bad "$label: losses differ: $(diff "$tmp/f$n.log" "$tmp/u$n.log" | head -3)"; fi
    if cmp -s "$tmp/f$n.onnx" "$tmp/u$n.onnx"; then ok; else bad "$label: the trained models differ"; fi
    if cmp -s "$tmp/cf$n/checkpoint.tck" "$tmp/cu$n/checkpoint.tck"; then ok; else
        bad "$label: the checkpoints (weights, optimizer state) differ"; fi
    if awk -v f="$fms" -v u="$ums" 'BEGIN { exit !(f > 0 && f < u) }'; then ok; else
        bad "$label: the fused step predicts $fms ms, not below the unfused $ums ms"; fi
}
G=("$tmp/gpt.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 2 --steps 4 --lr 1e-3)
compare "gpt fp32 adamw clip" "${G[@]}" --clip-norm 1 --precision fp32
compare "gpt bf16 adamw clip" "${G[@]}" --clip-norm 1 --precision bf16
compare "gpt fp32 node-by-node optimizer" "${G[@]}" --clip-norm 1 --precision fp32 --no-fused-optimizer
compare "gpt fp32 lamb" "${G[@]}" --optimizer lamb --precision fp32
compare "gpt fp32 sgd momentum" "${G[@]}" --optimizer sgd --momentum 0.9 --precision fp32
compare "gpt bf16-rne" "${G[@]}" --precision bf16-rne
compare "gpt fp32 recompute" "${G[@]}" --precision fp32 --recompute
compare "gpt fp32 accumulate 2" "${G[@]}" --precision fp32 --accumulate 2
compare "gpt fp32 node-by-node attention" "${G[@]}" --precision fp32 --no-fused-attention

# the BERT-style encoder with a padding mask (its data and model from test_train_attention_mask.sh's generator)
"$PY" - "$tmp" <<'PYEOF' || { bad "generating the BERT-style model failed"; echo "$pass passed, $fail failed"; exit 1; }
import sys
import numpy as np, torch
d = sys.argv[1]
torch.manual_seed(0)
N, S, E, H = 16, 12, 16, 2
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(E, E) for _ in range(4))
        self.ln = torch.nn.LayerNorm(E)
    def forward(self, x, am):
        b = x.shape[0]
        sp = lambda t: t.view(b, S, H, E // H).transpose(1, 2)
        q, k, v = sp(self.q(x)), sp(self.k(x)), sp(self.v(x))
        s = q @ k.transpose(-2, -1) / 2.8284271247461903 + (1.0 - am[:, None, None, :]) * -10000.0
        c = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, S, E)
        return self.ln(x + self.o(c))
class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b1, self.b2 = Block(), Block()
        self.head = torch.nn.Linear(E, 4)
    def forward(self, x, attention_mask):
        return self.head(self.b2(self.b1(x, attention_mask), attention_mask).mean(1))
rng = np.random.default_rng(0)
x = rng.standard_normal((N, S, E)).astype(np.float32)
lens = rng.integers(3, S + 1, N)
am = (np.arange(S)[None, :] < lens[:, None]).astype(np.float32)
np.save(f"{d}/bx.npy", x); np.save(f"{d}/am.npy", am)
np.save(f"{d}/by.npy", rng.standard_normal((N, 4)).astype(np.float32))
torch.onnx.export(Bert(), (torch.zeros(4, S, E), torch.ones(4, S)), f"{d}/bert.onnx",
                  input_names=["x", "attention_mask"], output_names=["y"], opset_version=14,
                  dynamic_axes={"x": {0: "batch"}, "attention_mask": {0: "batch"}, "y": {0: "batch"}})
PYEOF
BE=("$tmp/bert.onnx" --data "x=$tmp/bx.npy" --data "attention_mask=$tmp/am.npy" --labels "$tmp/by.npy" --loss mse
    --batch 4 --steps 4)
compare "bert fp32 sgd" "${BE[@]}" --optimizer sgd --lr 0.05 --precision fp32
compare "bert bf16 adamw clip" "${BE[@]}" --lr 0.01 --precision bf16 --clip-norm 0.5

# bf16-sr: stochastic rounding draws per instruction, so the fused program rounds differently (unbiased either
# way); both runs train, and their losses stay within a few percent of each other over 4 steps
expect 0 "$TERN" train "${G[@]}" --precision bf16-sr --json
steps_of "$tmp/out" >"$tmp/srf.log"
expect 0 "$TERN" train "${G[@]}" --precision bf16-sr --json --no-fuse-elementwise
steps_of "$tmp/out" >"$tmp/sru.log"
if paste -d' ' "$tmp/srf.log" "$tmp/sru.log" | sed 's/"[a-z_]*"://g; s/,/ /g' |
    awk 'NF != 6 { e = 1 } { d = $2 - $5; if (d < 0) d = -d; if (d > 0.05 * $5) e = 1 } END { exit e + (NR != 4) }'; then
    ok
else
    bad "bf16-sr: the fused and unfused losses are not within 5 %: $(paste "$tmp/srf.log" "$tmp/sru.log" | head -4)"
fi

# inference: the same output bytes, and the fused program is not slower
gen="$here/../../scripts/gen_models.py"
"$PY" "$gen" "$tmp/m" llama_tiny t5_tiny resnet_tiny >/dev/null 2>&1 || bad "gen_models.py failed"
for model in llama_tiny:input_ids t5_tiny:input_ids resnet_tiny:image; do
    name=${model%%:*}
    in=${model#*:}
    for machine in trn1 trn2; do
        for dt in bf16 fp32; do
            mkdir -p "$tmp/of" "$tmp/ou"
            expect 0 "$TERN" run "$tmp/m/$name.onnx" --machine $machine --dtype $dt --input "$in=$tmp/m/$name.in.npy" \
                --output-dir "$tmp/of"
            fps=$(grep -o '[0-9]* ps' "$tmp/out" | head -1 | cut -d' ' -f1)
            expect 0 "$TERN" run "$tmp/m/$name.onnx" --machine $machine --dtype $dt --input "$in=$tmp/m/$name.in.npy" \
                --output-dir "$tmp/ou" --no-fuse-elementwise
            ups=$(grep -o '[0-9]* ps' "$tmp/out" | head -1 | cut -d' ' -f1)
            same=1
            for f in "$tmp"/ou/*.npy; do cmp -s "$f" "$tmp/of/$(basename "$f")" || same=0; done
            if [ "$same" = 1 ] && [ -n "$fps" ] && [ "$fps" -le "$ups" ]; then ok; else
                bad "$name $machine $dt: outputs differ ($same) or fused $fps ps > unfused $ups ps"; fi
            rm -rf "$tmp/of" "$tmp/ou"
        done
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
