#!/bin/bash
# Real check of `tern train`: the scikit-learn digits data set, a small MLP exported from PyTorch, 200 steps
# with the same initialisation, data order and hyper-parameters in PyTorch fp32 (tests/train/digits_ref.py).
# Per step tern's loss must be within 1e-4 relative of PyTorch's (and the gradient norm within 1e-3); the trained
# model tern writes must run under `tern run` with the model's own input and output names, give the test
# accuracy within 1 point of PyTorch's, and hold initializers that, loaded into the PyTorch module with
# onnx.numpy_helper, give tern's test logits. Three configurations: AdamW + ReLU/Tanh MLP; SGD with Nesterov
# momentum and weight decay; Adam on Linear/LayerNorm/GELU with label smoothing.
set -u
TERN=${1:?usage: test_train_digits.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

source "$here/digits_lib.sh"

run_case adamw_relu_tanh adamw 3e-3 ""
run_case sgd_nesterov sgd 0.05 "" --momentum 0.9 --nesterov --weight-decay 1e-4
run_case adam_gelu_ln adam 2e-3 gelu-ln --label-smoothing 0.1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
