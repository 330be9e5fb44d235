#!/usr/bin/env bash
# Attention fusion (passes.c -> tern.Attention, lowered on chip by lower_attention.c):
#  - the fused lowering gives the unfused lowering's outputs bit for bit (--no-fuse-attention), on NeuronCore-v2
#    (trn1: PE transposes through an identity matmul) and v3 (trn2: transpose_pe), for the four forms: GPT-2
#    (Div, Where with the fill on true, causal), BERT (Div, no mask), attn_add (Mul, additive run-time mask, 200
#    queries = two partition tiles, 600 keys = two PSUM banks and five key blocks), attn_where (Div, Where with
#    the fill on false, a different mask per head, batch 2), bert_tiny_b4 (batch 4: the heads of each batch
#    element load as one group, four groups rotating through three slots);
#  - the outputs match PyTorch within the BF16 tolerance of test_models.sh;
#  - the fused program is faster on the simulated core, and the fusion shows in the node count;
#  - the layout form (heads read from the QKV projection, the output written in the merged layout) gives the
#    same bits as the fused node on materialised operands (--no-attention-layouts).
tern=$1
data=${TERN_TEST_DATA:-build/testdata}/models
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inputs() { # model -> --input options
  local m=$1 f n out=""
  if [ -f "$data/$m.in.npy" ]; then echo "--input input_ids=$data/$m.in.npy"; return; fi
  for f in "$data/$m".*.npy; do
    n=${f#"$data/$m".}; n=${n%.npy}
    [ "$n" = out ] || out="$out --input $n=$f"
  done
  echo "$out"
}
time_of() { sed -n 's/^predicted device time .*: \([0-9.]*\) ms.*/\1/p' "$1"; }
for m in gpt2_tiny bert_tiny bert_tiny_b4 attn_add attn_where; do
  for mach in trn1 trn2; do
    mkdir -p "$tmp/f" "$tmp/u"
    rm -f "$tmp"/f/* "$tmp"/u/*
    # shellcheck disable=SC2046
    if ! "$tern" run "$data/$m.onnx" $(inputs $m) --machine $mach --output-dir "$tmp/f" > "$tmp/f.log" 2>&1; then
      echo "NOT OK: $m on $mach: fused run failed"; cat "$tmp/f.log"; fail=$((fail+1)); continue
    fi
    # shellcheck disable=SC2046
    if ! "$tern" run "$data/$m.onnx" $(inputs $m) --machine $mach --no-fuse-attention --output-dir "$tmp/u" \
         > "$tmp/u.log" 2>&1; then
      echo "NOT OK: $m on $mach: unfused run failed"; cat "$tmp/u.log"; fail=$((fail+1)); continue
    fi
    if cmp -s "$tmp/f/output.npy" "$tmp/u/output.npy"; then pass=$((pass+1)); else
      echo "NOT OK: $m on $mach: fused and unfused outputs differ"; fail=$((fail+1)); fi
    # the fused node on materialised [B, H, S, D] operands (no layout absorption) gives the same bits too
    mkdir -p "$tmp/p"; rm -f "$tmp"/p/*
    # shellcheck disable=SC2046
    if "$tern" run "$data/$m.onnx" $(inputs $m) --machine $mach --no-attention-layouts --output-dir "$tmp/p" \
         > "$tmp/p.log" 2>&1 && cmp -s "$tmp/f/output.npy" "$tmp/p/output.npy"; then pass=$((pass+1)); else
      echo "NOT OK: $m on $mach: fused with and without layouts differ"; cat "$tmp/p.log"; fail=$((fail+1)); fi
    tf=$(time_of "$tmp/f.log") tu=$(time_of "$tmp/u.log")
    if $py -c "import sys; sys.exit(0 if float('$tf') < float('$tu') else 1)"; then pass=$((pass+1)); else
      echo "NOT OK: $m on $mach: fused $tf ms is not faster than unfused $tu ms"; fail=$((fail+1)); fi
    if $py - "$tmp/f/output.npy" "$data/$m.out.npy" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.abs(a.astype(np.float64) - b).max()) if a.shape == b.shape else float("inf")
sys.exit(0 if err <= 2e-2 * float(np.abs(b).max()) else 1)
PY
    then pass=$((pass+1)); else echo "NOT OK: $m on $mach: differs from PyTorch"; fail=$((fail+1)); fi
  done
done
# Each of gpt2_tiny's two attention blocks (MatMul, Div, Where, Softmax, MatMul) becomes one tern.Attention,
# which also takes in the head split (Split, 3 Reshape, 3 Transpose) and the head merge (Transpose, Reshape).
a=$("$tern" compile "$data/gpt2_tiny.onnx" -o "$tmp/a.tern" --no-fuse-residual 2>/dev/null)
c=$("$tern" compile "$data/gpt2_tiny.onnx" -o "$tmp/c.tern" --no-fuse-residual --no-attention-layouts 2>/dev/null)
b=$("$tern" compile "$data/gpt2_tiny.onnx" -o "$tmp/b.tern" --no-fuse-residual --no-fuse-attention 2>/dev/null)
case "$a|$c|$b" in *"(22 after optimisation)"*"|"*"(40 after optimisation)"*"|"*"(48 after optimisation)"*)
  pass=$((pass+1)) ;;
  *) echo "NOT OK: attention fusion node counts: $a / $c / $b"; fail=$((fail+1)) ;; esac
# Attention's K transpose, [B,S,H,D] -> [B,H,D,S] (the output's last dim strided in the input): lowered as
# on-chip transposes instead of element-sized DMAs, and exact on trn1 too (Inf, NaN and -0 kept bit for bit).
if $py - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 40, 3, 64])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 64, 40])
g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], "t", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/tr.onnx")
v = np.random.default_rng(3).standard_normal((2, 40, 3, 64)).astype(np.float32)
v[0, 5, 1, 7], v[1, 39, 2, 63], v[1, 0, 0, 0], v[0, 1, 2, 3] = np.inf, -np.inf, np.nan, -0.0
np.save(f"{d}/tr.in.npy", v)
np.save(f"{d}/tr.want.npy", v.transpose(0, 2, 3, 1))
PY
then
  for mach in trn1 trn2; do
    mkdir -p "$tmp/tr_$mach"
    if "$tern" run "$tmp/tr.onnx" --machine $mach --input "x=$tmp/tr.in.npy" --output-dir "$tmp/tr_$mach" > /dev/null &&
       $py -c "import sys, numpy as np; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); \
sys.exit(0 if a.tobytes() == b.tobytes() else 1)" "$tmp/tr_$mach/y.npy" "$tmp/tr.want.npy"; then
      pass=$((pass+1)); else echo "NOT OK: exact K transpose on $mach"; fail=$((fail+1)); fi
  done
else
  echo "NOT OK: transpose model generation"; fail=$((fail+1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
