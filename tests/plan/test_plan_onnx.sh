#!/usr/bin/env bash
# `tern plan --model X.onnx`: a transformer exported from PyTorch is planned exactly like its config.json. For a
# GPT-2-style (fused QKV, tied head, GELU MLP whose width equals the vocabulary), a Llama-style (RMSNorm, rotary,
# 4 query heads on 2 K/V heads, SwiGLU, untied head) and a BERT-style model (post-LN, no mask, a pooler) made by
# plan_onnx_models.py, the config recovered from the graph equals the generator's config.json field by field,
# and the plan JSON (every plan, layout, step time, memory, cost and the GPU rows) equals the config.json's plan
# but for the host time. A CNN is refused as not a transformer, naming its ops; a truncated file and one of
# random bytes are refused naming the byte and the field; --config-out writes a config.json tern plan takes.
set -u
TERN=${1:?usage: test_plan_onnx.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

if $PY "$(dirname "$0")/plan_onnx_models.py" "$tmp" >"$tmp/gen.log" 2>&1; then ok; else bad "export: $(tail -5 "$tmp/gen.log")"; fi
JOB="--cluster trn1.32xlarge --seq 128 --global-batch 32 --top 100 --json --quiet"
for m in gpt2s llamas berts; do
    expect 0 "$TERN" plan --model "$tmp/$m.onnx" $JOB
    cp "$tmp/out" "$tmp/$m.onnx.json"
    expect 0 "$TERN" plan --model "$tmp/$m.json" $JOB
    cp "$tmp/out" "$tmp/$m.cfg.json"
    if $PY - "$tmp/$m.onnx.json" "$tmp/$m.cfg.json" "$tmp/$m.json" <<'PY'; then ok; else bad "$m: the ONNX plan differs from the config.json's"; fi
import json, sys
a, b, want = (json.load(open(p)) for p in sys.argv[1:4])
rec, frm = a.pop("recovered_config"), a.pop("recovered_from")
for k, v in want.items():
    assert rec.get(k) == v, f"recovered {k} = {rec.get(k)}, the config.json says {v}"
for k in ("hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
          "max_position_embeddings"):
    assert k in frm, f"no note of where {k} came from: {frm}"
assert "recovered_config" not in b
a.pop("host_s"), b.pop("host_s")
assert a["plans"] and a["plans"][0]["fits"], a["plans"][:1]
assert a == b, (json.dumps(a)[:600], json.dumps(b)[:600])
print(f"{sys.argv[3].rsplit('/', 1)[1]}: recovered {rec}; best step_s {a['plans'][0]['step_s']} equal in {len(a['plans'])} plans")
PY
done
# a symbolic batch and no constant folding (tests/train/llama_ref.py's export)
expect 0 "$TERN" plan --model "$tmp/llama_dyn.onnx" --cluster trn1.32xlarge --seq 16 --global-batch 32 --top 100 --json --quiet
cp "$tmp/out" "$tmp/dyn.onnx.json"
expect 0 "$TERN" plan --model "$tmp/llama_dyn.json" --cluster trn1.32xlarge --seq 16 --global-batch 32 --top 100 --json --quiet
if $PY - "$tmp/dyn.onnx.json" "$tmp/out" "$tmp/llama_dyn.json" <<'PY'; then ok; else bad "llama_dyn: the ONNX plan differs"; fi
import json, sys
a, b, want = (json.load(open(p)) for p in sys.argv[1:4])
rec, frm = a.pop("recovered_config"), a.pop("recovered_from")
assert all(rec.get(k) == v for k, v in want.items()), (rec, want)
assert "symbolic_dims" in frm, frm
a.pop("host_s"), b.pop("host_s")
assert a == b
PY
expect 1 "$TERN" plan --model "$tmp/gpt_dynseq.onnx" $JOB
contains "$tmp/err" "has a symbolic dim 'seq' at axis 1; only the batch (axis 0) may be symbolic"
# the recovered config as a file: planned like the ONNX model
expect 0 "$TERN" plan --model "$tmp/llamas.onnx" --config-out "$tmp/llamas.rec.json" $JOB
expect 0 "$TERN" plan --model "$tmp/llamas.rec.json" $JOB
if $PY -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); [d.pop('host_s') for d in (a,b)]; sys.exit(a['plans']!=b['plans'])" \
    "$tmp/out" "$tmp/llamas.cfg.json"; then ok; else bad "--config-out's config plans differently"; fi
# the table names the recovered config
expect 0 "$TERN" plan --model "$tmp/gpt2s.onnx" --cluster trn1.32xlarge --seq 128 --global-batch 32 --quiet
contains "$tmp/out" '"n_head":4'

# not a transformer
expect 1 "$TERN" plan --model "$tmp/cnn.onnx" $JOB
contains "$tmp/err" "not a transformer: no scaled dot-product attention"
contains "$tmp/err" "6 Conv"
# a mask that is neither causal nor absent (T5's relative position bias)
expect 1 "$TERN" plan --model "$tmp/t5.onnx" $JOB
contains "$tmp/err" "has a mask that is not a constant causal (lower-triangular) one"
# malformed files: the byte and the field
head -c 5000 "$tmp/gpt2s.onnx" >"$tmp/trunc.onnx"
expect 1 "$TERN" plan --model "$tmp/trunc.onnx" $JOB
contains "$tmp/err" "ModelProto.graph[0].node["
contains "$tmp/err" "before the end of the file at byte 5000"
printf '\x08' >"$tmp/junk.onnx"
expect 1 "$TERN" plan --model "$tmp/junk.onnx" $JOB
contains "$tmp/err" "at byte 0: ModelProto.ir_version, a varint, is cut off"
expect 1 "$TERN" plan --model "$tmp/missing.onnx" $JOB
contains "$tmp/err" "missing.onnx"
# --config-out needs an ONNX model
expect 2 "$TERN" plan --model "$tmp/gpt2s.json" --config-out "$tmp/x.json" $JOB

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
