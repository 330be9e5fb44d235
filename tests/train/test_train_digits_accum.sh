#!/bin/bash
# The digits check of test_train_digits.sh (loss per step within 1e-4 relative of PyTorch fp32, test accuracy
# within 1 point, trained ONNX run and reloaded) with gradient accumulation: --accumulate 2 micro-batches of 16
# rows per step, against PyTorch's loss / 2 per micro-batch with the gradients summed before one AdamW update.
set -u
TERN=${1:?usage: test_train_digits_accum.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/digits_lib.sh"

BATCH=16 run_case adamw_accum2 adamw 3e-3 accum:2 --accumulate 2
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
