#!/usr/bin/env bash
# `tern plan --dump-graphs DIR`: the per-rank graphs the planner simulates, written as ONNX. For one fixed
# layout of the 2-layer GPT-2-shaped model on one trn1.32xlarge: the six kinds are written under their names
# (rows/attn/head x fwd/bwd, tp, micro-batch, sequence), each loads as ONNX with onnx.checker, and each one
# replayed by `tern run --timing-only` gives the time the plan composed from it (chunks x the rows forward +
# block pairs x the attention forward is the plan's layer forward). A directory that cannot be created is an error naming it.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_plan_dump.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
M=data/models

D="$tmp/graphs"
expect 0 "$TERN" plan --model $M/gpt2-tiny.json --cluster trn1.32xlarge --seq 512 --global-batch 32 \
    --layout tp=2,pp=1,dp=16,mb=1,zero=0,recompute=none --json --quiet --dump-graphs "$D"
cp "$tmp/out" "$tmp/plan.json"
for k in rows_fwd rows_bwd attn_fwd attn_bwd head_fwd head_bwd; do
    n=$(ls "$D" 2>/dev/null | grep -c "^${k}_tp2_mb[0-9]*_seq[0-9]*\.onnx$")
    if [ "$n" -ge 1 ]; then ok; else bad "no $k graph in $D: $(ls "$D" 2>/dev/null | tr '\n' ' ')"; fi
done
if $PY - "$D" <<'PY'; then ok; else bad "dumped graphs do not check as ONNX"; fi
import onnx, os, sys
d = sys.argv[1]
fs = sorted(f for f in os.listdir(d) if f.endswith(".onnx"))
assert len(fs) >= 6, fs
for f in fs:
    m = onnx.load(os.path.join(d, f))
    onnx.checker.check_model(m)
    assert len(m.graph.node) > 0, f
PY

# the rows and attention forward graphs replayed by `tern run`: chunks x rows + block pairs x attention is the
# plan's layer forward (same compile options, same machine; gpt2-tiny is causal)
RF=$(ls "$D"/rows_fwd_tp2_*.onnx | head -1)
AF=$(ls "$D"/attn_fwd_tp2_*.onnx | head -1)
expect 0 "$TERN" run "$RF" --machine trn1.32xlarge --timing-only
cp "$tmp/out" "$tmp/rf.txt"
expect 0 "$TERN" run "$AF" --machine trn1.32xlarge --timing-only
cp "$tmp/out" "$tmp/af.txt"
if $PY - "$tmp/plan.json" "$tmp/rf.txt" "$tmp/af.txt" "$RF" "$AF" <<'PY'; then ok; else bad "replayed graphs do not give the plan's layer forward"; fi
import json, re, sys
p = json.load(open(sys.argv[1]))["plans"][0]
def ms(f):
    return float(re.search(r"predicted device time on .*?: ([0-9.]+) ms", open(f).read()).group(1)) * 1e-3
def seq(f):
    return int(re.search(r"_seq(\d+)\.onnx$", f).group(1))
rf, af = ms(sys.argv[2]), ms(sys.argv[3])
chunks = 512 // seq(sys.argv[4])
nb = 512 // seq(sys.argv[5])
pairs = nb * (nb + 1) // 2
lf = p["layer_fwd_s"]
got = chunks * rf + pairs * af
print(f"rows_fwd {rf:.6g} s x {chunks} + attn_fwd {af:.6g} s x {pairs} = {got:.6g} s; plan layer_fwd_s {lf:.6g}")
assert rf > 0 and af > 0
assert abs(got - lf) <= 1e-6 * (chunks + pairs) + 1e-4 * lf, (got, lf)
PY

expect 1 "$TERN" plan --model $M/gpt2-tiny.json --cluster trn1.32xlarge --seq 512 --global-batch 32 \
    --layout tp=2,pp=1,dp=16,mb=1,zero=0,recompute=none --quiet --dump-graphs /proc/nonexistent/graphs
contains "$tmp/err" "--dump-graphs /proc/nonexistent/graphs"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
