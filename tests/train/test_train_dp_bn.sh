#!/bin/bash
# BatchNormalization in training mode under data parallelism (docs/training.md, "Data parallelism"), as PyTorch
# DistributedDataParallel's default: every rank normalises with its own rows' batch statistics (its 1/N of the
# batch), the gradients are averaged, and the running statistics kept (written to the trained ONNX) are rank 0's.
# The digits BatchNorm CNN of test_train_digits_bn.sh, 20 SGD steps of batch 32 on trn1.32xlarge:
# - --cores 2 and --cores 4 against digits_ref.py's ddp:2 / ddp:4 (PyTorch with 2 / 4 replicas): the loss of every
#   step within 1e-5 relative, the running statistics in the trained ONNX within 1e-5;
# - --cores 2 --accumulate 2 (each rank's micro-batches: two momentum updates of rank 0's statistics per step)
#   against ddp:2,accum:2 within 1e-5;
# - the losses on 2 ranks differ from the one-core run's (the statistics really are per rank: 16 rows, not 32);
# - the fixed reduction tree (--dp-exact --dp-chunks 4: every chunk its own statistics, chunk 0's running
#   statistics) gives the same trained model, byte for byte, on 1, 2 and 4 ranks;
# - a 2-rank checkpoint after 10 steps, resumed to 20, gives the 20-step model byte for byte (rank 0's running
#   statistics travel in the checkpoint).
set -u
TERN=${1:?usage: test_train_dp_bn.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

S=20
M=trn1.32xlarge
ref() { # ref DIR EXTRA [BATCH]: the PyTorch reference into DIR
    mkdir -p "$1"
    if ! "$PY" "$here/digits_ref.py" "$1" $S "${3:-32}" sgd 0.05 "$2" >"$1/ref.txt" 2>&1; then
        bad "the PyTorch reference $2 failed: $(tail -3 "$1/ref.txt")"
        return 1
    fi
}
train() { # train DIR NAME [flags]: tern's run of DIR's model into DIR/NAME.json and DIR/NAME.onnx
    local d=$1 n=$2
    shift 2
    expect 0 "$TERN" train "$d/mlp.onnx" --data "$d/x.npy" --labels "$d/y.npy" --optimizer sgd --lr 0.05 \
        --momentum 0.9 --nesterov --weight-decay 1e-4 --steps "${STEPS:-$S}" --clip-norm 1 --precision fp32 --machine $M \
        --json -o "$d/$n.onnx" "$@"
    cp "$tmp/out" "$d/$n.json"
}
compare() { # compare DIR NAME LABEL: NAME's losses and running statistics against DIR's PyTorch reference
    "$PY" "$here/bn_compare.py" "$1" "$2" "$3"
}
for n in 2 4; do
    d="$tmp/ddp$n"
    ref "$d" cnn-bn,ddp:$n || continue
    train "$d" r$n --batch 32 --cores $n
    if compare "$d" r$n "BatchNorm CNN, $n ranks vs PyTorch DDP with $n replicas"; then ok; else
        bad "tern's $n-rank BatchNorm run differs from PyTorch DDP's (above)"
    fi
done
# one core normalises over all 32 rows: its losses are not the 2-rank run's
d="$tmp/ddp2"
train "$d" r1 --batch 32
if "$PY" - "$d" <<'EOF'; then ok; else bad "the 2-rank BatchNorm losses do not differ from one core's (above)"; fi
import json, sys
import numpy as np
d = sys.argv[1]
L = lambda n: np.array([s["loss"] for s in json.load(open(f"{d}/{n}.json"))["steps"]])
one, two = L("r1"), L("r2")
diff = float((np.abs(one - two) / np.abs(one)).max())
print(f"1 core vs 2 ranks: max loss rel difference {diff:.2e} (per-rank batch statistics)")
sys.exit(0 if len(one) == len(two) and diff > 1e-4 else 1)
EOF
# accumulation: two micro-batches of 16 rows, 8 per rank
a="$tmp/ddp2acc"
if ref "$a" cnn-bn,ddp:2,accum:2 16; then
    train "$a" r2 --batch 16 --accumulate 2 --cores 2
    if compare "$a" r2 "BatchNorm CNN, 2 ranks, --accumulate 2 vs PyTorch DDP"; then ok; else
        bad "tern's accumulated 2-rank BatchNorm run differs from PyTorch DDP's (above)"
    fi
fi
# the fixed reduction tree: chunk statistics whatever the rank count, the same bytes on 1, 2 and 4 ranks
d="$tmp/ddp4"
train "$d" x1 --batch 32 --cores 1 --dp-exact --dp-chunks 4
train "$d" x2 --batch 32 --cores 2 --dp-exact --dp-chunks 4
train "$d" x4 --batch 32 --cores 4 --dp-exact --dp-chunks 4
for n in 1 2; do
    if cmp -s "$d/x$n.onnx" "$d/x4.onnx"; then ok; else bad "--dp-exact --dp-chunks 4: the $n- and 4-rank models differ"; fi
done
if compare "$d" x4 "BatchNorm CNN, --dp-exact --dp-chunks 4 on 4 ranks vs PyTorch DDP with 4 replicas"; then ok; else
    bad "--dp-exact on 4 ranks differs from PyTorch DDP with 4 replicas (above)"
fi
# checkpoint and resume on 2 ranks: the running statistics are rank 0's, saved with the weights
d="$tmp/ddp2"
STEPS=10 train "$d" half --batch 32 --cores 2 --checkpoint "$d/ck"
train "$d" resumed --batch 32 --cores 2 --resume "$d/ck"
if cmp -s "$d/r2.onnx" "$d/resumed.onnx"; then ok; else bad "2 ranks: the run resumed at step 10 differs from r2"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
