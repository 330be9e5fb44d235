#!/bin/bash
# The digits check of test_train_digits.sh for a small CNN (Conv 3x3 + ReLU + MaxPool 2, Conv 3x3 + ReLU +
# AveragePool 2, Linear; the model reshapes the 64 pixels to 1x8x8 itself): 200 AdamW steps against PyTorch fp32,
# loss per step within 1e-4 relative, test accuracy within 1 point, the trained ONNX run by `tern run` and loaded
# back into PyTorch. And an MLP with Dropout in training mode (p = 0.2, exported with TrainingMode.TRAINING):
# tern's seeded masks (docs/training.md), which the reference applies in PyTorch; the trained model's Dropout is
# in inference mode.
set -u
TERN=${1:?usage: test_train_digits_cnn.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/digits_lib.sh"

run_case adamw_cnn adamw 3e-3 cnn
run_case adamw_dropout adamw 3e-3 dropout
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
