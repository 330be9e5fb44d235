#!/usr/bin/env bash
# `tern plan` end to end on small jobs: the JSON shape the issue asks for (plans best first, every knob named,
# fits, step and throughput, HBM per core, cost), a search of at least 20 layouts, a fixed layout giving exactly
# its plan, a layout that fits nowhere exiting 1 with the bytes of each part, and the bad-input errors (TP not
# dividing the heads, PP not dividing the layers, an unknown cluster, an unknown architecture, a missing field,
# a malformed price file), each naming the value and the rule. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_plan_cli.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
M=data/models

expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --top 100 --json --quiet
cp "$tmp/out" "$tmp/search.json"
if $PY - "$tmp/search.json" <<'PY'; then ok; else bad "search JSON: $(head -c 300 "$tmp/search.json")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
plans = d["plans"]
assert d["searched"] >= 20, d["searched"]
assert d["ranks"] == 32 and d["instances"] == 1
keys = {"layout", "fits", "step_s", "seq_per_s", "tokens_per_s", "mfu", "hbm_gib_per_core", "cost_per_step_usd",
        "comm_exposed_s", "comm_overlapped_s"}
fit = [p for p in plans if p["fits"]]
assert fit, "no fitting plan"
for p in plans:
    assert {"tp", "pp", "dp", "microbatch", "zero", "recompute", "vpp"} <= set(p["layout"]), p
    assert p["layout"]["recompute"] in ("none", "full", "selective"), p
    assert p["layout"]["vpp"] == 1 or (p["layout"]["pp"] > 1 and 12 % (p["layout"]["pp"] * p["layout"]["vpp"]) == 0), p
    assert p["layout"]["tp"] * p["layout"]["pp"] * p["layout"]["dp"] == 32, p
    assert 12 % p["layout"]["tp"] == 0 and 12 % p["layout"]["pp"] == 0, p
for p in fit:
    assert keys <= set(p), set(p) ^ keys
    assert p["step_s"] > 0 and 0 < p["mfu"] < 1, p
    assert abs(p["seq_per_s"] * p["step_s"] - 64) < 1e-3 * 64, p
    assert abs(p["tokens_per_s"] - 1024 * p["seq_per_s"]) < 1e-3 * p["tokens_per_s"], p
    assert p["cost_per_step_usd"] > 0 and abs(p["cost_per_step_usd"] - p["step_s"] / 3600 * d["price_usd_per_hour"]) < 1e-4 * p["cost_per_step_usd"], p
    assert p["hbm_gib_per_core"] <= p["memory_gib"]["capacity"] + 1e-9, p
steps = [p["step_s"] for p in fit]
assert steps == sorted(steps), "fitting plans not best first"
assert plans[:len(fit)] == fit, "a non-fitting plan before a fitting one"
assert len(d["gpus"]) == 2 and d["gpus"][0]["instance"] == "p4d.24xlarge" and d["gpus"][1]["instance"] == "p5.48xlarge"
PY

# a fixed layout gives its own plan, and the same figures as in the search
best=$($PY -c "import json,sys; p=json.load(open('$tmp/search.json'))['plans'][0]['layout']; print('tp=%d,pp=%d,dp=%d,mb=%d,zero=%d,recompute=%s,vpp=%d' % (p['tp'],p['pp'],p['dp'],p['microbatch'],p['zero'],p['recompute'],p['vpp']))")
expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout "$best" --json --quiet
if $PY - "$tmp/out" "$tmp/search.json" <<'PY'; then ok; else bad "fixed layout $best: $(head -c 300 "$tmp/out")"; fi
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
assert a["searched"] == 1 and len(a["plans"]) == 1, a["searched"]
assert a["plans"][0] == b["plans"][0], (a["plans"][0], b["plans"][0])
PY
expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=1 --tokens 1e9 --quiet
contains "$tmp/out" "tp=4 pp=1 vpp=1 dp=8"
contains "$tmp/out" "job:"
contains "$tmp/out" "assumed MFU 40%"
contains "$tmp/out" "assumptions:"

# the searched knobs include the interleaved schedule and selective recomputation
if $PY - "$tmp/search.json" <<'PY'; then ok; else bad "vpp / selective not searched"; fi
import json, sys
plans = json.load(open(sys.argv[1]))["plans"]
assert any(p["layout"]["vpp"] > 1 for p in plans), "no interleaved layout"
assert any(p["layout"]["recompute"] == "selective" for p in plans), "no selective recomputation"
PY

# interleaving: same layout, vpp=2 vs vpp=1 -- a smaller bubble, twice the sends, more activations in flight
expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=4,dp=2,mb=1,zero=0,recompute=none,vpp=1 --json --quiet
cp "$tmp/out" "$tmp/v1.json"
expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=4,dp=2,mb=1,zero=0,recompute=none,vpp=3 --json --quiet
if $PY - "$tmp/v1.json" "$tmp/out" <<'PY'; then ok; else bad "vpp=3 vs vpp=1: $(head -c 400 "$tmp/out")"; fi
import json, sys
a = json.load(open(sys.argv[1]))["plans"][0]
b = json.load(open(sys.argv[2]))["plans"][0]
assert a["layout"]["vpp"] == 1 and b["layout"]["vpp"] == 3
assert b["bubble_s"] < a["bubble_s"], (a["bubble_s"], b["bubble_s"])
assert abs(b["pp_comm_s"] - 3 * a["pp_comm_s"]) < 1e-3 * b["pp_comm_s"] + 1e-12 or b["pp_comm_s"] > a["pp_comm_s"], (a["pp_comm_s"], b["pp_comm_s"])
assert b["memory_gib"]["activations"] > a["memory_gib"]["activations"]
assert abs(b["layer_fwd_s"] - a["layer_fwd_s"]) < 1e-12  # the same layer graph
PY
expect 1 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=4,vpp=5 --quiet
contains "$tmp/err" "pp x vpp = 4 x 5 must divide the layers (num_hidden_layers 12)"
expect 1 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=1,vpp=2 --quiet
contains "$tmp/err" "vpp=2 needs pp > 1"

# selective recomputation: less memory than none, more than full; its backward pays the attention core again
for rc in none selective full; do
    expect 0 "$TERN" plan --model $M/llama-3.1-8b.json --cluster trn1.32xlarge --seq 8192 --global-batch 32 --layout tp=32,mb=1,zero=0,recompute=$rc --json --quiet
    cp "$tmp/out" "$tmp/rc_$rc.json"
done
if $PY - "$tmp" <<'PY'; then ok; else bad "selective recompute: $(head -c 400 "$tmp/rc_selective.json")"; fi
import json, sys
r = {k: json.load(open("%s/rc_%s.json" % (sys.argv[1], k)))["plans"][0] for k in ("none", "selective", "full")}
act = {k: v["memory_gib"]["activations"] for k, v in r.items()}
assert act["full"] < act["selective"] < act["none"], act
step = {k: v["step_s"] for k, v in r.items()}
assert step["none"] < step["selective"] < step["full"], step
assert r["selective"]["layout"]["recompute"] == "selective"
PY
# Llama-3.1-70B at TP=32 PP=8 fits with selective recomputation (it needed full before)
expect 0 "$TERN" plan --model $M/llama-3.1-70b.json --cluster 32xtrn1.32xlarge --seq 8192 --global-batch 1024 --layout tp=32,pp=8,mb=1,zero=1,recompute=selective,vpp=1 --json --quiet
if $PY -c "import json; p=json.load(open('$tmp/out'))['plans'][0]; assert p['fits'] and p['layout']['recompute']=='selective', p"; then ok; else bad "70B selective: $(head -c 400 "$tmp/out")"; fi

# the TP reduce-scatters' dtype (NxD's reduce_dtype: fp32 by default, bf16 for a job with XLA_DOWNCAST_BF16=1) and
# the ring's channels: fp32 reduce-scatters move twice the bytes (more TP time, same compute); the single ring
# (--ring-channels 1) takes longer than the default channels; the JSON names the dtype
for v in fp32 bf16 ring1; do
    opt="--tp-reduce $v"
    [ $v = ring1 ] && opt="--tp-reduce fp32 --ring-channels 1"
    # shellcheck disable=SC2086
    expect 0 "$TERN" plan --model $M/llama-3.1-8b.json --cluster trn1.32xlarge --seq 8192 --global-batch 32 --layout tp=32,mb=1,zero=0,recompute=selective $opt --json --quiet
    cp "$tmp/out" "$tmp/red_$v.json"
done
if $PY - "$tmp" <<'PY'; then ok; else bad "--tp-reduce / --ring-channels: $(head -c 400 "$tmp/red_bf16.json")"; fi
import json, sys
d = {k: json.load(open("%s/red_%s.json" % (sys.argv[1], k))) for k in ("fp32", "bf16", "ring1")}
assert d["fp32"]["tp_reduce"] == "fp32" and d["bf16"]["tp_reduce"] == "bf16", d["bf16"]["tp_reduce"]
p = {k: v["plans"][0] for k, v in d.items()}
assert p["bf16"]["tp_comm_s"] < p["fp32"]["tp_comm_s"] < p["ring1"]["tp_comm_s"], p
assert p["bf16"]["layer_fwd_s"] == p["fp32"]["layer_fwd_s"] and p["bf16"]["step_s"] < p["fp32"]["step_s"], p
PY
expect 2 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 512 --global-batch 32 --tp-reduce fp16
contains "$tmp/err" "--tp-reduce fp16: use fp32 or bf16"
expect 2 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 512 --global-batch 32 --ring-channels 0
contains "$tmp/err" "--ring-channels '0': expected an integer in [1, 8]"

# --svg: the best plan's schedule, well-formed, one bar per scheduled op (2 x micro-batches x vpp per stage)
expect 0 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 1024 --global-batch 16 --layout tp=4,pp=4,dp=2,mb=1,vpp=3,zero=0,recompute=none --svg "$tmp/t.svg" --json --quiet
if $PY - "$tmp/t.svg" "$tmp/out" <<'PY'; then ok; else bad "svg: $(head -c 300 "$tmp/t.svg")"; fi
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
p = json.load(open(sys.argv[2]))["plans"][0]
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
rects = root.iter(ns + "rect")
ops = [r for r in root.iter(ns + "rect") if r.get("class", "").split()[0] == "op"]
M, v, P = p["micro_batches"], p["layout"]["vpp"], p["layout"]["pp"]
assert M == 8 and v == 3 and P == 4, (M, v, P)
assert len(ops) == 2 * M * v * P, len(ops)
assert sum(1 for r in ops if "fwd" in r.get("class")) == M * v * P
sends = [r for r in root.iter(ns + "rect") if r.get("class") == "comm send"]
assert len(sends) == 2 * M * (v * P - 1), len(sends)
assert any(r.get("class") == "comm tp" for r in root.iter(ns + "rect"))
for r in ops:
    assert float(r.get("width")) > 0 and float(r.get("x")) >= 0
PY

# a layout that fits nowhere: exit 1, the bytes of each part
expect 1 "$TERN" plan --model $M/llama-3.1-70b.json --cluster trn1.32xlarge --seq 8192 --global-batch 32 --layout tp=32,pp=1 --quiet
contains "$tmp/err" "no layout with the fixed knobs fits"
contains "$tmp/err" "optimizer"
contains "$tmp/out" "needs"

# bad input
expect 1 "$TERN" plan --model $M/llama-3.1-8b.json --cluster trn1.32xlarge --seq 2048 --global-batch 32 --layout tp=3 --quiet
contains "$tmp/err" "tp=3 must divide the query heads (num_attention_heads 32)"
expect 1 "$TERN" plan --model $M/llama-3.1-8b.json --cluster trn1.32xlarge --seq 2048 --global-batch 32 --layout pp=5 --quiet
contains "$tmp/err" "pp=5 must divide the layers (num_hidden_layers 32)"
expect 1 "$TERN" plan --model $M/llama-3.1-8b.json --cluster 2xtrn9.nothing --seq 2048 --global-batch 32 --quiet
contains "$tmp/err" "trn9.nothing"
expect 1 "$TERN" plan --model $M/llama-3.1-8b.json --cluster trn1.32xlarge --seq 2048 --global-batch 32 --layout tp=8,pp=2,dp=4 --quiet
contains "$tmp/err" "tp x pp x dp = 64"
echo '{"model_type":"t5","d_model":512}' > "$tmp/t5.json"
expect 1 "$TERN" plan --model "$tmp/t5.json" --cluster trn1.32xlarge --seq 512 --global-batch 32
contains "$tmp/err" "model_type 't5' is not a known architecture"
echo '{"model_type":"llama","hidden_size":4096,"num_attention_heads":32,"num_hidden_layers":32}' > "$tmp/noffn.json"
expect 1 "$TERN" plan --model "$tmp/noffn.json" --cluster trn1.32xlarge --seq 512 --global-batch 32
contains "$tmp/err" "'intermediate_size' is missing and has no default"
echo '[]' > "$tmp/prices.json"
expect 1 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 512 --global-batch 32 --price-file "$tmp/prices.json" --quiet
contains "$tmp/err" "price file"
expect 1 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 4096 --global-batch 32 --quiet
contains "$tmp/err" "exceeds the model's max_position_embeddings (1024)"
expect 2 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 512
expect 2 "$TERN" plan --model $M/gpt2.json --cluster trn1.32xlarge --seq 512 --global-batch 32 --layout tp=x

# a user's price file overrides; an instance without a price says so
echo '{"instances":{"trn1.32xlarge":{"usd_per_hour":10,"source":"test"}}}' > "$tmp/p10.json"
expect 0 "$TERN" plan --model $M/bert-base.json --cluster trn1.32xlarge --seq 512 --global-batch 64 --layout tp=1,pp=1,mb=2,zero=1,recompute=0 --price-file "$tmp/p10.json" --json --quiet
if $PY -c "import json,sys; d=json.load(open('$tmp/out')); p=d['plans'][0]; assert d['price_usd_per_hour']==10; assert abs(p['cost_per_step_usd']-p['step_s']/360)<1e-4*p['cost_per_step_usd']"; then ok; else bad "price override: $(head -c 300 "$tmp/out")"; fi
echo '{"instances":{}}' > "$tmp/none.json"
expect 0 "$TERN" plan --model $M/bert-base.json --cluster trn1.32xlarge --seq 512 --global-batch 64 --layout tp=1,pp=1,mb=2,zero=1,recompute=0 --price-file "$tmp/none.json" --quiet
contains "$tmp/out" "no published on-demand price"

# micro-batches: a fixed one of any size (BERT's published phase-1 micro-batch 16); the search goes 1, 2, 4, ... while a
# micro-batch holds at most 16,384 tokens (at sequence 128: up to 64)
expect 0 "$TERN" plan --model $M/bert-base.json --cluster trn1.32xlarge --seq 128 --global-batch 2048 --layout tp=1,pp=1,mb=16 --json --quiet
if $PY -c "import json; d=json.load(open('$tmp/out')); assert d['plans'] and all(p['layout']['microbatch']==16 for p in d['plans'])"; then ok; else bad "mb=16 fixed: $(head -c 300 "$tmp/out")"; fi
expect 0 "$TERN" plan --model $M/bert-base.json --cluster trn1.32xlarge --seq 128 --global-batch 2048 --layout tp=1,pp=1,zero=1,recompute=0 --top 20 --json --quiet
if $PY -c "import json; d=json.load(open('$tmp/out')); m=sorted({p['layout']['microbatch'] for p in d['plans']}); assert m==[1,2,4,8,16,32,64], m"; then ok; else bad "the micro-batch search at sequence 128: $(head -c 300 "$tmp/out")"; fi
expect 1 "$TERN" plan --model $M/bert-base.json --cluster trn1.32xlarge --seq 128 --global-batch 2048 --layout tp=1,pp=1,dp=32,mb=3 --quiet
contains "$tmp/err" "global batch 2048 is not divisible by dp x microbatch = 32 x 3"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
