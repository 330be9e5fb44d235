#!/usr/bin/env bash
# `tern plan` on every kind of cluster for every model family, each with a fixed layout so it stays quick:
# trn1.32xlarge clusters (NxINSTANCE), trn2.48xlarge (LNC=2: a rank is two physical cores), the Trn2 UltraServer
# (a system of 4 instances) and 2 x trn2.48xlarge, for Llama, GPT-2, BERT and Mixtral; each plan fits, names its
# layout and has a positive step. Mixtral also with expert parallelism (ep=): the all-to-alls are timed
# (ep_comm_s > 0), the expert weights shrink by ep, and ep that does not divide the experts is an error.
# Gets build/tern as $1.
set -u
TERN=${1:?usage: test_plan_clusters.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
M=data/models

check_plan() { # file tp pp
    if $PY - "$1" "$2" "$3" <<'PY'; then ok; else bad "$4: $(head -c 400 "$1")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
p = d["plans"][0]
assert p["fits"] and p["step_s"] > 0 and 0 < p["mfu"] < 1, p
assert p["layout"]["tp"] == int(sys.argv[2]) and p["layout"]["pp"] == int(sys.argv[3]), p["layout"]
assert p["layout"]["tp"] * p["layout"]["pp"] * p["layout"]["dp"] == d["ranks"], (p["layout"], d["ranks"])
PY
}

for cl in 2xtrn1.32xlarge trn2.48xlarge trn2-ultraserver 2xtrn2.48xlarge; do
    for m in llama-3.1-8b gpt2 bert-base mixtral-8x7b; do
        seq=1024; lay="tp=4,pp=2,mb=1,zero=1,recompute=full,vpp=1"
        [ $m = bert-base ] && seq=512
        [ $m = gpt2 ] && lay="tp=4,pp=2,mb=1,zero=0,recompute=none,vpp=1"
        [ $m = mixtral-8x7b ] && lay="tp=4,pp=8,mb=1,zero=1,recompute=full,vpp=1,ep=2"
        pp=$(echo "$lay" | sed 's/.*,pp=\([0-9]*\).*/\1/')
        expect 0 "$TERN" plan --model $M/$m.json --cluster $cl --seq $seq --global-batch 64 --layout "$lay" --json --quiet
        check_plan "$tmp/out" 4 "$pp" "$cl $m $lay"
    done
done

# expert parallelism for Mixtral: ep=4 vs ep=1 on the same layout
expect 0 "$TERN" plan --model $M/mixtral-8x7b.json --cluster 4xtrn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=8,dp=4,mb=1,zero=1,recompute=full,vpp=1,ep=1 --json --quiet
cp "$tmp/out" "$tmp/ep1.json"
expect 0 "$TERN" plan --model $M/mixtral-8x7b.json --cluster 4xtrn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=8,dp=4,mb=1,zero=1,recompute=full,vpp=1,ep=4 --json --quiet
if $PY - "$tmp/ep1.json" "$tmp/out" <<'PY'; then ok; else bad "ep=4 vs ep=1: $(head -c 400 "$tmp/out")"; fi
import json, sys
a = json.load(open(sys.argv[1]))["plans"][0]
b = json.load(open(sys.argv[2]))["plans"][0]
assert a["layout"]["ep"] == 1 and b["layout"]["ep"] == 4
assert a["ep_comm_s"] == 0 and b["ep_comm_s"] > 0, (a["ep_comm_s"], b["ep_comm_s"])
assert b["memory_gib"]["weights"] < 0.5 * a["memory_gib"]["weights"], (a["memory_gib"], b["memory_gib"])
PY
expect 1 "$TERN" plan --model $M/mixtral-8x7b.json --cluster 4xtrn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=8,ep=3 --quiet
contains "$tmp/err" "ep=3 must divide the experts (num_local_experts 8"
expect 1 "$TERN" plan --model $M/llama-3.1-8b.json --cluster 4xtrn1.32xlarge --seq 1024 --global-batch 64 --layout tp=4,pp=8,ep=2 --quiet
contains "$tmp/err" "ep=2 must divide the experts"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
