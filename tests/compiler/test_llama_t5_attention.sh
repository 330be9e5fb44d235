#!/usr/bin/env bash
# The attention fusion on LLaMA-style and T5-style models exported from PyTorch (scripts/gen_models.py, seeded):
#  - llama_tiny (2 blocks: RMSNorm, rotary embeddings from cos/sin tables, 4 query heads sharing 2 K/V heads
#    through repeat_kv's Unsqueeze/Expand/Reshape, the additive causal mask of the float32 minimum, softmax in
#    float32 (fp32-to-fp32 Casts), SwiGLU), llama_where (1 block, batch 2, the causal mask by masked_fill(-inf):
#    a Where), llama_norope (llama_where without rotary: Q, K and V straight from their projections, so the heads of
#    a batch element load as one group, two query heads per K/V column block) and t5_tiny (2 blocks: unscaled scores plus the relative position bias, softmax(x.float()));
#  - `tern compile` reports one fused tern.Attention per block, none with --no-fuse-attention;
#  - the layout form takes in the head split, repeat_kv (the repeated K and V are never materialised) and the
#    head merge: exact node counts with and without --no-attention-layouts;
#  - on trn1 and trn2, fused (layout form), fused on materialised operands and unfused give the same bits;
#  - against PyTorch: cosine >= 0.9999 with fp32 matmuls (--dtype fp32) and, with the bf16 default, within the
#    tolerance test_attention.sh uses (2e-2 of the output's largest magnitude);
#  - the fused program's predicted time is below the unfused one's (both printed).
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_llama_t5_attention.sh path/to/tern}
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)

$py "$src/scripts/gen_models.py" "$tmp" llama_tiny llama_where llama_norope t5_tiny > /dev/null ||
  { echo "NOT OK: cannot make the models"; exit 1; }
time_of() { sed -n 's/^predicted device time .*: \([0-9.]*\) ms.*/\1/p' "$1"; }
# close OUT WANT MODE: MODE fp32 (cosine >= 0.9999) or bf16 (max error <= 2e-2 * max |want|, cosine >= 0.999)
close() {
  $py - "$@" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
if a.shape != b.shape:
    print(f"shape {a.shape} vs {b.shape}"); sys.exit(1)
cos = float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
err = float(np.abs(a - b).max())
ok = cos >= 0.9999 if sys.argv[3] == "fp32" else (cos >= 0.999 and err <= 2e-2 * float(np.abs(b).max()))
print(f"cosine {cos:.7f}, max error {err:.3g}")
sys.exit(0 if ok else 1)
PY
}

# model, attention blocks, nodes after optimisation: layout form, materialised operands, unfused
for spec in "llama_tiny 2 99 121 133" "llama_where 1 54 65 71" "llama_norope 1 36 51 57" "t5_tiny 2 56 72 80"; do
  set -- $spec
  m=$1 blocks=$2 nl=$3 np=$4 nu=$5
  in="--input input_ids=$tmp/$m.in.npy"
  "$tern" compile "$tmp/$m.onnx" -o "$tmp/$m.tern" > "$tmp/c.log" 2>/dev/null
  "$tern" compile "$tmp/$m.onnx" -o "$tmp/$m.p.tern" --no-attention-layouts > "$tmp/cp.log" 2>/dev/null
  "$tern" compile "$tmp/$m.onnx" -o "$tmp/$m.u.tern" --no-fuse-attention > "$tmp/cu.log" 2>/dev/null
  word=nodes; [ "$blocks" = 1 ] && word=node
  contains "$tmp/c.log" "($nl after optimisation)"
  contains "$tmp/c.log" "; $blocks fused attention $word (tern.Attention)"
  contains "$tmp/cp.log" "($np after optimisation)"
  contains "$tmp/cp.log" "; $blocks fused attention $word (tern.Attention)"
  contains "$tmp/cu.log" "($nu after optimisation)"
  if grep -q "fused attention" "$tmp/cu.log"; then bad "$m: --no-fuse-attention still fuses: $(cat "$tmp/cu.log")"; else ok; fi
  for mach in trn1 trn2; do
    for v in f p u; do
      opt=""; [ $v = p ] && opt=--no-attention-layouts; [ $v = u ] && opt=--no-fuse-attention
      mkdir -p "$tmp/$v"; rm -f "$tmp/$v"/*
      # shellcheck disable=SC2086
      if "$tern" run "$tmp/$m.onnx" $in --machine $mach $opt --output-dir "$tmp/$v" > "$tmp/$v.log" 2>&1; then ok; else
        bad "$m on $mach $opt: run failed: $(head -c 300 "$tmp/$v.log")"; fi
    done
    if cmp -s "$tmp/f/output.npy" "$tmp/u/output.npy" && cmp -s "$tmp/f/output.npy" "$tmp/p/output.npy"; then ok; else
      bad "$m on $mach: fused, fused on materialised operands and unfused outputs differ"; fi
    if r=$(close "$tmp/f/output.npy" "$tmp/$m.out.npy" bf16); then ok; else bad "$m on $mach (bf16) vs PyTorch: $r"; fi
    tf=$(time_of "$tmp/f.log") tp=$(time_of "$tmp/p.log") tu=$(time_of "$tmp/u.log")
    echo "$m on $mach (bf16): $r; predicted ${tf} ms fused, ${tp} ms fused on materialised operands, ${tu} ms unfused"
    if $py -c "import sys; sys.exit(0 if 0 < float('$tf') < float('$tu') else 1)"; then ok; else
      bad "$m on $mach: fused $tf ms is not faster than unfused $tu ms"; fi
  done
  mkdir -p "$tmp/d"; rm -f "$tmp/d"/*
  # shellcheck disable=SC2086
  if "$tern" run "$tmp/$m.onnx" $in --dtype fp32 --output-dir "$tmp/d" > "$tmp/d.log" 2>&1 &&
     r=$(close "$tmp/d/output.npy" "$tmp/$m.out.npy" fp32); then ok; echo "$m on trn1 (fp32): $r"; else
    bad "$m (fp32) vs PyTorch: ${r:-run failed: $(head -c 300 "$tmp/d.log")}"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
