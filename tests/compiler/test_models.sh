#!/usr/bin/env bash
# Models exported from PyTorch (scripts/gen_models.py: MLP, GPT-2 style decoder, BERT style encoder; random
# weights) compiled and run on a simulated trn1 core with `tern run`, compared with PyTorch's outputs:
#  - FP32 matmuls: max |tern - torch| <= 2e-4 x max|torch| (fp32 arithmetic in a different order);
#  - BF16 matmuls (the default auto-cast): <= 2e-2 x max|torch| (bf16 operands carry 8 significant bits; errors
#    of ~2^-9 per product accumulate over contractions of 64-256 and through two to three layers).
tern=$1
data=${TERN_TEST_DATA:-build/testdata}/models
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # name dtype tol input
  local name=$1 dt=$2 tol=$3 in=$4
  if ! "$tern" run "$data/$name.onnx" --dtype "$dt" --input "$in=$data/$name.in.npy" --output-dir "$tmp" > "$tmp/log" 2>&1; then
    echo "NOT OK: $name ($dt): tern run failed"; cat "$tmp/log"; fail=$((fail+1)); return
  fi
  if $py - "$tmp/output.npy" "$data/$name.out.npy" "$tol" <<'PY'
import sys, numpy as np
a, b, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
err = float(np.abs(a.astype(np.float64) - b).max()) if a.shape == b.shape else float("inf")
scale = float(np.abs(b).max())
ok = err <= tol * scale
print(("ok" if ok else "NOT OK") + f": max error {err:.3g} vs scale {scale:.3g} (tolerance {tol} x scale)")
sys.exit(0 if ok else 1)
PY
  then pass=$((pass+1)); else echo "NOT OK: $name ($dt)"; fail=$((fail+1)); fi
}
for dt in fp32 bf16; do
  tol=2e-4; [ $dt = bf16 ] && tol=2e-2
  check mlp $dt $tol x
  check gpt2_tiny $dt $tol input_ids
  check bert_tiny $dt $tol input_ids
  check linear_bigk $dt $tol x   # K = 12000: past the fused linear kernel, the HBM route
done
# The executable route (compile, then run the .tern) gives the same outputs as running the .onnx.
mkdir -p "$tmp/x"
if "$tern" compile "$data/gpt2_tiny.onnx" -o "$tmp/g.tern" > /dev/null &&
   "$tern" run "$tmp/g.tern" --input "input_ids=$data/gpt2_tiny.in.npy" --output-dir "$tmp/x" > /dev/null &&
   "$tern" run "$data/gpt2_tiny.onnx" --input "input_ids=$data/gpt2_tiny.in.npy" --output-dir "$tmp" > /dev/null &&
   cmp -s "$tmp/x/output.npy" "$tmp/output.npy"; then
  pass=$((pass+1))
else
  echo "NOT OK: the compiled .tern and the .onnx runs differ (or one failed)"; fail=$((fail+1))
fi
# The tanh-GELU that torch exports (x*x*x, not Pow), attention (with the head split and merge), the residual
# adds after linear layers and the layer norms after those (the final one as the only reader, the blocks' pre-LN
# ones next to the next residual add) fuse: 155 ONNX nodes become 14 (18 without the layer-norm fusion, 22
# without the residual fusion either, 48 without the attention fusion, 66 without the GELU one).
out=$("$tern" compile "$data/gpt2_tiny.onnx" -o "$tmp/g2.tern" 2>/dev/null)
case "$out" in *"155 nodes (14 after optimisation)"*) pass=$((pass+1)) ;;
  *) echo "NOT OK: gpt2_tiny optimisation: $out"; fail=$((fail+1)) ;; esac
# The residual add in the linear layer's epilogue is the Add node's arithmetic: the same bits without the fusion,
# for GPT-2 (pre-LN), BERT (post-LN) and the long-contraction route (K = 12000, an MLP on it: Linear + Add).
for m in gpt2_tiny:input_ids bert_tiny:input_ids; do
  name=${m%%:*} in=${m#*:}
  mkdir -p "$tmp/r1" "$tmp/r2"
  if "$tern" run "$data/$name.onnx" --input "$in=$data/$name.in.npy" --output-dir "$tmp/r1" > /dev/null &&
     "$tern" run "$data/$name.onnx" --input "$in=$data/$name.in.npy" --output-dir "$tmp/r2" --no-fuse-residual \
       > /dev/null && cmp -s "$tmp/r1/output.npy" "$tmp/r2/output.npy"; then
    pass=$((pass+1)); else echo "NOT OK: $name: the residual fusion changed the outputs"; fail=$((fail+1)); fi
  # the layer norm in the epilogue is tern_lib_layernorm's instruction sequence: the same bits, on trn1 and trn2
  for mach in trn1 trn2; do
    if "$tern" run "$data/$name.onnx" --machine $mach --input "$in=$data/$name.in.npy" --output-dir "$tmp/r1" \
         > /dev/null &&
       "$tern" run "$data/$name.onnx" --machine $mach --input "$in=$data/$name.in.npy" --output-dir "$tmp/r2" \
         --no-fuse-layernorm > /dev/null && cmp -s "$tmp/r1/output.npy" "$tmp/r2/output.npy"; then
      pass=$((pass+1)); else echo "NOT OK: $name on $mach: the layer-norm fusion changed the outputs"; fail=$((fail+1)); fi
    # the FFN's two layers as one kernel with the middle on chip (tern_lib_linear_pair): the same bits
    if "$tern" run "$data/$name.onnx" --machine $mach --input "$in=$data/$name.in.npy" --output-dir "$tmp/r2" \
         --no-keep-on-chip > /dev/null && cmp -s "$tmp/r1/output.npy" "$tmp/r2/output.npy"; then
      pass=$((pass+1)); else echo "NOT OK: $name on $mach: the linear pairs changed the outputs"; fail=$((fail+1)); fi
  done
done
# Kept on chip (the default): the FFN's middle and the attention's output, each stored and loaded again with
# --no-keep-on-chip, so the run moves fewer HBM bytes.
hbm() { "$tern" run "$data/bert_tiny.onnx" --input "input_ids=$data/bert_tiny.in.npy" --profile "$@" |
  awk '/MBU/ { for (i = 1; i < NF; i++) if ($i == "(HBM") { v = $(i + 1); u = $(i + 2) } }
       END { m = u == "MB" ? 1e6 : u == "kB" ? 1e3 : 1; printf "%.0f\n", v * m }'; }
h1=$(hbm) h2=$(hbm --no-keep-on-chip)
if [ -n "$h1" ] && [ -n "$h2" ] && [ "$h1" -gt 0 ] && [ "$h1" -lt "$h2" ]; then pass=$((pass+1))
else echo "NOT OK: bert_tiny HBM bytes $h1 kept on chip, $h2 with --no-keep-on-chip"; fail=$((fail+1)); fi
out=$("$tern" compile "$data/bert_tiny.onnx" -o "$tmp/b.tern" 2>/dev/null)
out2=$("$tern" compile "$data/bert_tiny.onnx" -o "$tmp/b2.tern" --no-fuse-layernorm 2>/dev/null)
case "$out|$out2" in *"("*" after optimisation)"*"|"*) pass=$((pass+1)) ;; *) echo "NOT OK: bert_tiny compile: $out $out2"; fail=$((fail+1)) ;; esac
n1=$(echo "$out" | sed -n 's/.*nodes (\([0-9]*\) after optimisation).*/\1/p')
n2=$(echo "$out2" | sed -n 's/.*nodes (\([0-9]*\) after optimisation).*/\1/p')
if [ -n "$n1" ] && [ -n "$n2" ] && [ $((n2 - n1)) -eq 4 ]; then pass=$((pass+1))
else echo "NOT OK: bert_tiny: the two post-LN layers' four layer norms should fuse ($n2 -> $n1 nodes)"; fail=$((fail+1)); fi
# --output-dir is created when missing; one that cannot be is an error naming it.
if "$tern" run "$data/mlp.onnx" --output-dir "$tmp/new" > /dev/null && [ -f "$tmp/new/y.npy" -o -n "$(ls "$tmp/new")" ]; then
  pass=$((pass+1)); else echo "NOT OK: --output-dir not created"; fail=$((fail+1)); fi
out=$("$tern" run "$data/mlp.onnx" --output-dir /nonexistent/a/b 2>&1 >/dev/null); rc=$?
case "$rc:$out" in 1:*"--output-dir /nonexistent/a/b: cannot create the directory"*) pass=$((pass+1)) ;;
  *) echo "NOT OK: bad --output-dir: $rc $out"; fail=$((fail+1)) ;; esac
# A batch split over the two cores of a trn1 chip gives the outputs of one core, bit for bit; a fixed batch is
# refused with the reason.
mkdir -p "$tmp/c1" "$tmp/c2"
if "$tern" run "$data/mlp_batch.onnx" --dim 8 --input "x=$data/mlp_batch.in.npy" --output-dir "$tmp/c1" > /dev/null &&
   "$tern" run "$data/mlp_batch.onnx" --dim 8 --cores 2 --input "x=$data/mlp_batch.in.npy" --output-dir "$tmp/c2" \
     > "$tmp/c2.log" && grep -q "(2 cores)" "$tmp/c2.log" && cmp -s "$tmp/c1/output.npy" "$tmp/c2/output.npy" &&
   $py -c "import sys, numpy as np; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); \
sys.exit(0 if a.shape == b.shape and np.abs(a - b).max() <= 2e-2 * np.abs(b).max() else 1)" \
     "$tmp/c2/output.npy" "$data/mlp_batch.out.npy"; then
  pass=$((pass+1)); else echo "NOT OK: --cores 2 differs from one core (or failed)"; fail=$((fail+1)); fi
out=$("$tern" run "$data/mlp.onnx" --cores 2 2>&1 >/dev/null); rc=$?
case "$rc:$out" in 1:*"fixed batch of 8; --cores 2 splits only a symbolic batch"*) pass=$((pass+1)) ;;
  *) echo "NOT OK: fixed batch split: $rc $out"; fail=$((fail+1)) ;; esac
# Errors: a missing file, a bad option, an input of the wrong shape.
"$tern" run /nonexistent.onnx > /dev/null 2>&1; [ $? -eq 1 ] && pass=$((pass+1)) || { echo "NOT OK: missing model exit code"; fail=$((fail+1)); }
"$tern" run "$data/mlp.onnx" --bogus > /dev/null 2>&1; [ $? -eq 2 ] && pass=$((pass+1)) || { echo "NOT OK: bad option exit code"; fail=$((fail+1)); }
out=$("$tern" run "$data/mlp.onnx" --input "x=$data/gpt2_tiny.in.npy" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "does not match input 'x'"; then pass=$((pass+1)); else echo "NOT OK: wrong-shape input: $out"; fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
