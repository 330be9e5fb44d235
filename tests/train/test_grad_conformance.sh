#!/bin/bash
# Gradient conformance: for every op with a gradient rule, tern's gradients (computed by the training-step graph
# on the simulated NeuronCore, fp32) against PyTorch autograd's on random shapes, including broadcasting, batched
# matmuls, repeated embedding indices and a 50,257-row embedding table (the row scatter-add, twice: the same bits).
# tests/train/grad_cases.py builds the cases and compares; this prints
# its per-case table ending `grad_tests: P passed, F failed` and fails on any failure.
set -u
TERN=${1:?usage: test_grad_conformance.sh TERN_BIN}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

"$PY" "$here/grad_cases.py" gen "$tmp" || { echo "NOT OK: generating the cases failed" >&2; exit 1; }
while read -r name; do
    d="$tmp/$name"
    mkdir -p "$d/tern"
    if ! "$TERN" train "$d/model.onnx" --loss-output loss --optimizer sgd --lr 0 --steps 1 --dump-grads "$d/tern" \
        >"$d/out.txt" 2>"$d/err.txt"; then
        rm -rf "$d/tern"
    fi
done <"$tmp/cases.txt"
if "$PY" "$here/grad_cases.py" check "$tmp"; then ok; else bad "gradients differ from PyTorch's (table above)"; fi
# The row scatter-add (a 50,257-row table, repeated indices) gives the same bits run after run.
d="$tmp/Gather_vocab_50257"
mkdir -p "$d/again"
"$TERN" train "$d/model.onnx" --loss-output loss --optimizer sgd --lr 0 --steps 1 --dump-grads "$d/again" >/dev/null 2>&1
if [ -s "$d/tern/a.npy" ] && cmp -s "$d/tern/a.npy" "$d/again/a.npy"; then ok
else bad "the 50,257-row embedding gradient differs between two runs"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
