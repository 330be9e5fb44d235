#!/bin/bash
# Data-parallel training (docs/training.md, "Data parallelism") on the scikit-learn digits MLP, trn1.32xlarge:
# - 2 and 4 ranks (16 and 8 rows each) follow PyTorch's one-process run (digits_ref.py, batch 32, AdamW, clip 1)
#   within 1e-4 per step and the 1-rank tern run within 1e-5 (fp32 summation order only);
# - the fixed reduction tree (--dp-exact --dp-chunks 4) gives the same trained model, byte for byte, on 1, 2 and
#   4 ranks; TERN_THREADS 1 and 2 give the same bytes too;
# - ZeRO-1 gives byte-identical models to the unsharded update (AdamW, SGD with momentum, Adam with L2 decay) and a
#   per-rank optimizer state of 1/N; with clipping by the global norm, weights within 1e-6 of the unsharded run's
#   (LAMB, with its per-tensor trust ratio across shards: 5e-6);
#   a checkpoint resumes bit-exactly with and without ZeRO-1;
# - cross-entropy with ignore_index rows spread unevenly over the ranks and MSE (the 1/N scale) match 1 rank;
# - gradient accumulation on 2 and 4 ranks (the latter with ZeRO-1 and clipping) follows the 1-rank accumulated run;
# - a timing-only 32-core step prints the exposed all-reduce; bad --cores values fail with clear messages.
set -u
TERN=${1:?usage: test_train_dp.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

d="$tmp/mlp"
mkdir -p "$d"
if ! "$PY" "$here/digits_ref.py" "$d" 200 32 adamw 3e-3 "" >"$d/ref.txt" 2>&1; then
    bad "the PyTorch reference failed: $(tail -3 "$d/ref.txt")"
    echo "$pass passed, $fail failed"
    exit 1
fi
M=trn1.32xlarge
train() { # train OUT.json [flags]: 200 steps of the digits MLP, JSON and the trained model OUT.onnx
    local out=$1
    shift
    expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer adamw --lr 3e-3 \
        --steps "${STEPS:-200}" --batch 32 --precision fp32 --machine $M --json -o "${out%.json}.onnx" "$@"
    cp "$tmp/out" "$out"
}
train "$d/r1.json" --clip-norm 1
train "$d/r2.json" --clip-norm 1 --cores 2
train "$d/r4.json" --clip-norm 1 --cores 4
if "$PY" - "$d" <<'EOF'; then ok; else bad "data-parallel runs differ from PyTorch or from one rank (above)"; fi
import json, sys
import numpy as np
from onnx import load, numpy_helper
d = sys.argv[1]
ref = np.array(json.load(open(f"{d}/ref.json"))["losses"])
L = lambda n: np.array([s["loss"] for s in json.load(open(f"{d}/{n}.json"))["steps"]])
W = lambda n: {i.name: numpy_helper.to_array(i) for i in load(f"{d}/{n}.onnx").graph.initializer}
one, w1, bad = L("r1"), W("r1"), []
for n in ("r2", "r4"):
    got = L(n)
    rp, r1 = np.abs(got - ref) / np.abs(ref), np.abs(got - one) / np.abs(one)
    w = W(n)
    wd = max(float(np.abs(w[k] - w1[k]).max() / max(1e-30, np.abs(w1[k]).max())) for k in w1)
    print(f"{n}: loss vs PyTorch max rel {rp.max():.2e}, vs 1 rank {r1.max():.2e}; weights after 200 steps vs 1 rank "
          f"max rel {wd:.2e}; ranks {json.load(open(f'{d}/{n}.json'))['ranks']}, "
          f"all-reduce {json.load(open(f'{d}/{n}.json'))['dp_algorithm']}")
    if not (rp.max() <= 1e-4 and r1.max() <= 1e-5 and wd <= 1e-4 and len(got) == 200):
        bad.append(n)
sys.exit(1 if bad else 0)
EOF
contains "$d/r4.json" '"ranks":4'
# the step is the slowest rank's gradient program + the exposed all-reduce + the update
if "$PY" - "$d/r4.json" <<'EOF'; then ok; else bad "step time is not compute + all-reduce + update"; fi
import json, sys
j = json.load(open(sys.argv[1]))
s = j["steps"][-1]["step_ms"]
parts = j["dp_compute_ms"] + j["dp_comm_ms"] + j["dp_update_ms"]
print(f"4 ranks: step {s:.4f} ms = {j['dp_compute_ms']:.4f} + {j['dp_comm_ms']:.4f} + {j['dp_update_ms']:.4f}")
# within the JSON's printing: step_ms has 6 significant digits, the parts 6 decimals each
sys.exit(0 if abs(s - parts) <= 2e-6 + 1e-6 * s and j["dp_comm_ms"] > 0.05 else 1)
EOF

# the fixed reduction tree: 1, 2 and 4 ranks, the same bytes; and whatever the host thread count
STEPS=50 train "$d/e1.json" --clip-norm 1 --dp-exact --dp-chunks 4
STEPS=50 train "$d/e2.json" --clip-norm 1 --dp-exact --dp-chunks 4 --cores 2
STEPS=50 train "$d/e4.json" --clip-norm 1 --dp-exact --cores 4
for n in e2 e4; do
    if cmp -s "$d/e1.onnx" "$d/$n.onnx"; then ok; else bad "--dp-exact: $n's trained model differs from 1 rank's"; fi
done
if "$PY" -c "import json,sys; L=lambda f:[(s['loss'],s['grad_norm']) for s in json.load(open(f))['steps']]; sys.exit(L(sys.argv[1])!=L(sys.argv[2]))" \
    "$d/e1.json" "$d/e4.json"; then ok; else bad "--dp-exact: losses or norms of 1 and 4 ranks differ"; fi
contains "$d/e4.json" '"dp_algorithm":"rdh"'
STEPS=50 TERN_THREADS=1 train "$d/t1.json" --clip-norm 1 --cores 4
STEPS=50 TERN_THREADS=2 train "$d/t2.json" --clip-norm 1 --cores 4
if cmp -s "$d/t1.onnx" "$d/t2.onnx" && cmp -s "$d/t1.json" "$d/t2.json"; then ok; else
    bad "4 ranks: TERN_THREADS=1 and 2 give different results"
fi

# pure BF16 with stochastic rounding: every rank draws the same rounding (seeded by step and chunk), so the fixed
# tree gives the same bytes on 1 and 2 ranks; against the one-graph trainer (other seeds) within 1 % per step
for n in 1 2; do
    STEPS=20 train "$d/sr$n.json" --clip-norm 1 --precision bf16-sr --dp-exact --dp-chunks 2 --cores $n
done
if cmp -s "$d/sr1.onnx" "$d/sr2.onnx"; then ok; else bad "bf16-sr --dp-exact: 1 and 2 ranks differ"; fi
STEPS=20 train "$d/sr0.json" --clip-norm 1 --precision bf16-sr
if "$PY" - "$d" <<'EOF'; then ok; else bad "bf16-sr: 2 ranks vs the one-graph trainer (above)"; fi
import json, sys
d = sys.argv[1]
L = lambda n: [s["loss"] for s in json.load(open(f"{d}/{n}.json"))["steps"]]
worst = max(abs(a - b) / a for a, b in zip(L("sr0"), L("sr2")))
print(f"bf16-sr: 2 ranks (fixed tree) vs 1-rank trainer over 20 steps: max rel {worst:.2e}")
sys.exit(0 if worst <= 1e-2 else 1)
EOF

# ZeRO-1: the same bytes as the unsharded update; the optimizer state per rank 1/N
for cfg in "adamw" "sgd --momentum 0.9 --nesterov" "adam --weight-decay 0.01"; do
    set -- $cfg
    STEPS=50 train "$d/z0.json" --cores 4 --optimizer "$@"
    STEPS=50 train "$d/z1.json" --cores 4 --zero 1 --optimizer "$@"
    if cmp -s "$d/z0.onnx" "$d/z1.onnx"; then ok; else bad "ZeRO-1 ($cfg): trained model differs from no ZeRO"; fi
    if "$PY" - "$d" <<'EOF'; then ok; else bad "ZeRO-1 ($cfg): losses, norms or state bytes (above)"; fi
import json, sys
d = sys.argv[1]
a, b = json.load(open(f"{d}/z0.json")), json.load(open(f"{d}/z1.json"))
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
gn = max(abs(x["grad_norm"] - y["grad_norm"]) / x["grad_norm"] for x, y in zip(a["steps"], b["steps"]))
per, tot = b["state_bytes_per_rank"], b["state_bytes_total"]
print(f"ZeRO-1: losses equal {la == lb}, grad norm max rel {gn:.2e} (the norm's summation order), state per rank "
      f"{per} of {tot} bytes (no ZeRO {a['state_bytes_per_rank']})")
ok = la == lb and gn <= 1e-5 and a["state_bytes_per_rank"] == tot and tot // 4 <= per <= tot // 4 + 32
sys.exit(0 if ok else 1)
EOF
done
expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --steps 1 --batch 32 --machine $M \
    --cores 4 --zero 1
contains "$tmp/out" "optimizer state: 0.050 MiB in all, 0.013 MiB per rank"

# ZeRO-1 with clipping by the global norm: the shards' sums of squares are gathered before the shard update, so
# the clip is the unsharded run's up to the norm's summation order (the coefficient's last bits): weights and losses
# within 1e-6 relative of no ZeRO, and the clip acts (the weights move away from the unclipped run's)
# ZeRO-1 with LAMB (two shard passes around an all-gather of the per-tensor sums of p^2 and r^2) is checked the same
# way (with clipping, as the others), weights within 5e-6 (the trust ratio's norms are summed in another order too)
for cfg in "4 adamw" "2 sgd --momentum 0.9" "2 lamb" "4 lamb --weight-decay 0.01"; do
    set -- $cfg
    nc=$1
    shift
    STEPS=50 train "$d/zc0.json" --cores $nc --clip-norm 0.25 --optimizer "$@"
    STEPS=50 train "$d/zc1.json" --cores $nc --clip-norm 0.25 --zero 1 --optimizer "$@"
    STEPS=50 train "$d/zcn.json" --cores $nc --zero 1 --optimizer "$@"
    if "$PY" - "$d" "$cfg" <<'EOF'; then ok; else bad "ZeRO-1 with clipping ($cfg): differs from no ZeRO (above)"; fi
import json, sys
import numpy as np
from onnx import load, numpy_helper
d, cfg = sys.argv[1], sys.argv[2]
W = lambda n: {i.name: numpy_helper.to_array(i) for i in load(f"{d}/{n}.onnx").graph.initializer}
rel = lambda a, b: max(float(np.abs(a[k] - b[k]).max() / max(1e-30, np.abs(a[k]).max())) for k in a)
J = lambda n: json.load(open(f"{d}/{n}.json"))
a, b = J("zc0"), J("zc1")
wd, wn = rel(W("zc0"), W("zc1")), rel(W("zc0"), W("zcn"))
ld = max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a["steps"], b["steps"]))
clipped = sum(s["grad_norm"] > 0.25 for s in a["steps"])
print(f"ZeRO-1 + clip 0.25 ({cfg}): weights vs no ZeRO max rel {wd:.2e}, losses {ld:.2e}; {clipped} of 50 steps "
      f"clipped, unclipped run's weights {wn:.2e} away; step {a['steps'][-1]['step_ms']:.4f} -> "
      f"{b['steps'][-1]['step_ms']:.4f} ms (update {b['dp_update_ms']:.4f} ms, collectives {b['dp_comm_ms']:.4f} ms)")
tol = 5e-6 if "lamb" in cfg else 1e-6  # LAMB: the per-tensor norms of the trust ratio are summed in another order too
sys.exit(0 if wd <= tol and ld <= 1e-6 and clipped >= 10 and wn >= 1e-3 and len(b["steps"]) == 50 else 1)
EOF
done

# data parallelism with gradient accumulation: each rank sums its micro-batches' gradients on the device (the
# micro-step graph's gacc + g), one all-reduce per step; 2 micro-batches of 16 rows on 2 ranks, and 4 of 8 rows on
# 4 ranks with ZeRO-1 and clipping, against the 1-rank accumulated run (2 x 16 rows): weights within 1e-5 relative
# after 50 steps (the summation order of ranks and micro-batches), the first step's loss and norm within 1e-6
STEPS=50 train "$d/acc1.json" --batch 16 --accumulate 2 --clip-norm 1
STEPS=50 train "$d/acc2.json" --batch 16 --accumulate 2 --clip-norm 1 --cores 2
STEPS=50 train "$d/acc4.json" --batch 8 --accumulate 4 --clip-norm 1 --cores 4 --zero 1
if "$PY" - "$d" <<'EOF'; then ok; else bad "data parallelism with accumulation differs from 1 rank (above)"; fi
import json, sys
import numpy as np
from onnx import load, numpy_helper
d = sys.argv[1]
W = lambda n: {i.name: numpy_helper.to_array(i) for i in load(f"{d}/{n}.onnx").graph.initializer}
J = lambda n: json.load(open(f"{d}/{n}.json"))
rel = lambda a, b: max(float(np.abs(a[k] - b[k]).max() / max(1e-30, np.abs(a[k]).max())) for k in a)
one, w1, good = J("acc1"), W("acc1"), True
for n in ("acc2", "acc4"):
    j = J(n)
    wd = rel(w1, W(n))
    l0 = abs(j["steps"][0]["loss"] - one["steps"][0]["loss"]) / one["steps"][0]["loss"]
    g0 = abs(j["steps"][0]["grad_norm"] - one["steps"][0]["grad_norm"]) / one["steps"][0]["grad_norm"]
    lm = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one["steps"], j["steps"]))
    print(f"{n} ({j['ranks']} ranks, zero {j['zero']}): weights vs 1 rank max rel {wd:.2e}, step 1 loss {l0:.1e} "
          f"norm {g0:.1e}, losses max rel {lm:.2e}; step {j['steps'][-1]['step_ms']:.4f} ms "
          f"(1 rank {one['steps'][-1]['step_ms']:.4f}), {j['steps'][-1]['samples_per_s']:.0f} samples/s")
    good = good and wd <= 1e-5 and l0 <= 1e-6 and g0 <= 1e-6 and lm <= 1e-5 and len(j["steps"]) == 50
    good = good and abs(j["steps"][-1]["samples_per_s"] * j["steps"][-1]["step_ms"] / 1e3 - 32) < 1e-3
sys.exit(0 if good else 1)
EOF

# checkpoints: 10 steps + resume = 20 steps, byte for byte, with and without ZeRO-1 (the whole state gathered)
for z in 0 1; do
    zf=(); [ $z = 1 ] && zf=(--zero 1)
    rm -rf "$d/ck"
    STEPS=20 train "$d/ckfull.json" --cores 2 "${zf[@]}"
    STEPS=10 train "$d/ckhalf.json" --cores 2 "${zf[@]}" --checkpoint "$d/ck"
    STEPS=20 train "$d/ckres.json" --cores 2 "${zf[@]}" --resume "$d/ck"
    if cmp -s "$d/ckfull.onnx" "$d/ckres.onnx"; then ok; else bad "2 ranks, ZeRO $z: resumed run differs"; fi
done

# cross-entropy with ignored rows (uneven over the ranks: the global 1/count) and MSE (a mean per rank, 1/N)
"$PY" - "$d" <<'EOF'
import sys
import numpy as np
d = sys.argv[1]
y = np.load(f"{d}/y.npy")
yi = y.copy()
yi[(np.arange(len(y)) % 32) < 5] = -100  # rows 0..4 of every batch: all on rank 0 of 2 or 4
np.save(f"{d}/y_ign.npy", yi)
np.save(f"{d}/y_mse.npy", np.eye(10, dtype=np.float32)[y])
EOF
for loss in ce mse; do
    if [ $loss = ce ]; then lf=(--labels "$d/y_ign.npy"); else lf=(--labels "$d/y_mse.npy" --loss mse); fi
    for n in 1 2 4; do
        expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" "${lf[@]}" --steps 30 --batch 32 --machine $M \
            --clip-norm 1 --lr 3e-3 --cores $n --json
        cp "$tmp/out" "$d/$loss$n.json"
    done
    if "$PY" - "$d" $loss <<'EOF'; then ok; else bad "$loss: 2 or 4 ranks differ from 1 (above)"; fi
import json, sys
import numpy as np
d, loss = sys.argv[1:3]
L = lambda n: np.array([s["loss"] for s in json.load(open(f"{d}/{loss}{n}.json"))["steps"]])
worst = max(float((np.abs(L(n) - L(1)) / np.abs(L(1))).max()) for n in (2, 4))
print(f"{loss}: 2 and 4 ranks vs 1 over 30 steps: max rel {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
EOF
done

# timing-only on all 32 cores of the instance
expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --steps 2 --batch 256 --machine $M \
    --cores 32 --timing-only
contains "$tmp/out" "data parallel: 32 ranks on trn1.32xlarge, 8 rows each"
contains "$tmp/out" "gradient collectives"

# bad --cores values and unsupported combinations
base=("$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --steps 1 --batch 32 --machine $M)
expect 2 "$TERN" train "${base[@]}" --cores 0
contains "$tmp/err" "--cores expects an integer in [1,"
expect 1 "$TERN" train "${base[@]}" --cores 64
contains "$tmp/err" "64 data-parallel ranks (--cores): 'trn1.32xlarge' has 32 NeuronCores"
expect 1 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --steps 1 --batch 32 --cores 4
contains "$tmp/err" "'trn1.2xlarge' has 2 NeuronCores"
expect 1 "$TERN" train "${base[@]}" --cores 3
contains "$tmp/err" "batch 32 does not split over 3 data-parallel ranks (10 rows and 2 over)"
expect 1 "$TERN" train "${base[@]}" --cores 2 --dp-exact --dp-chunks 6
contains "$tmp/err" "power-of-two rank count and chunk count"
expect 1 "$TERN" train "${base[@]}" --cores 2 --dp-chunks 4
contains "$tmp/err" "need the fixed reduction tree (--dp-exact)"
expect 1 "$TERN" train "${base[@]}" --zero 1
contains "$tmp/err" "ZeRO-1 shards the optimizer state over ranks: 1 rank"
expect 1 "$TERN" train "${base[@]}" --cores 2 --zero 1 --precision bf16-sr
contains "$tmp/err" "ZeRO-1 with pure BF16 weights"
expect 1 "$TERN" train "${base[@]}" --cores 2 --dp-exact --accumulate 2
contains "$tmp/err" "gradient accumulation (2 micro-batches) with the fixed reduction tree (--dp-exact)"

# a non-finite loss stops the run at its step, with and without ZeRO-1 (row 40 is in step 2's batch)
"$PY" -c "import numpy as np, sys; x = np.load(sys.argv[1]); x[40] = np.nan; np.save(sys.argv[2], x)" "$d/x.npy" "$d/xnan.npy"
for z in "" "--zero 1"; do
    expect 1 "$TERN" train "$d/mlp.onnx" --data "$d/xnan.npy" --labels "$d/y.npy" --steps 3 --batch 32 --machine $M \
        --cores 2 $z
    contains "$tmp/err" "step 2: the loss is not finite (nan)"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
