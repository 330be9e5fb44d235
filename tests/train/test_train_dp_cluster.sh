#!/bin/bash
# Data-parallel training across instances (docs/training.md, "Data parallelism"): `--machine 2xtrn1.32xlarge
# --cores 64` trains on the 64 NeuronCores of two trn1.32xlarge joined by EFA (the gradient all-reduce is the
# hierarchical algorithm across the instances). A small attention block (LayerNorm, 4 heads, residual, classifier),
# batch 64, 3 AdamW steps in fp32: in the fixed-reduction-tree mode (--dp-exact --dp-chunks 64) the trained ONNX
# is byte for byte the one-core model's, on 2xtrn1.32xlarge and on 4xtrn1.32xlarge (whose ranks fill the fewest
# instances that hold them: two); the default all-reduce follows one core's losses within 1e-5 relative. More
# ranks than the cluster's cores are refused naming both.
set -u
TERN=${1:?usage: test_train_dp_cluster.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" "$here/../attention_block.py" "$tmp" 128 || { echo "NOT OK: the test model could not be made" >&2; exit 1; }
args=("$tmp/m.onnx" --data "$tmp/x.npy" --labels "$tmp/y.npy" --batch 64 --steps 3 --lr 1e-3 --optimizer adamw
      --precision fp32)
expect 0 "$TERN" train "${args[@]}" --dp-exact --dp-chunks 64 -o "$tmp/one_x.onnx"
for m in 2xtrn1.32xlarge 4xtrn1.32xlarge; do
    expect 0 "$TERN" train "${args[@]}" --machine $m --cores 64 --dp-exact --dp-chunks 64 -o "$tmp/$m.onnx"
    contains "$tmp/out" "data parallel: 64 ranks on $m, 1 rows each (64 gradient chunks, fixed reduction tree)"
    if cmp -s "$tmp/one_x.onnx" "$tmp/$m.onnx"; then ok; else bad "$m, 64 ranks, fixed tree: the trained model differs from one core's"; fi
done
expect 0 "$TERN" train "${args[@]}" --json
cp "$tmp/out" "$tmp/one.json"
expect 0 "$TERN" train "${args[@]}" --machine 2xtrn1.32xlarge --cores 64
contains "$tmp/out" "gradient collectives"
contains "$tmp/out" "(hier, exposed)"
expect 0 "$TERN" train "${args[@]}" --machine 2xtrn1.32xlarge --cores 64 --json
cp "$tmp/out" "$tmp/dp.json"
if "$PY" - "$tmp" <<'PYEOF'; then ok; else bad "64 ranks over two instances differ from one core (above)"; fi
import json, sys
d = sys.argv[1]
a = [s["loss"] for s in json.load(open(f"{d}/one.json"))["steps"]]
j = json.load(open(f"{d}/dp.json"))
b = [s["loss"] for s in j["steps"]]
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == 3 else 1.0
print(f"2xtrn1.32xlarge, 64 ranks: {j.get('ranks')} ranks, loss rel {rel:.2e} vs one core, step {j['steps'][-1]['step_ms']:.4f} ms")
sys.exit(0 if rel <= 1e-5 and j.get("ranks") == 64 else 1)
PYEOF
expect 1 "$TERN" train "${args[@]}" --machine 2xtrn1.32xlarge --cores 128 --batch 128
contains "$tmp/err" "128 data-parallel ranks (--cores): '2xtrn1.32xlarge' has 64 NeuronCores"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
