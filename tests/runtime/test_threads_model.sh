#!/usr/bin/env bash
# Host thread count never changes a result: the shipped GPT-2-style model (data/models/gpt2_tiny.onnx) is
# compiled and run with TERN_THREADS=1 and TERN_THREADS=8, in bf16 (the default) and fp32, and the output .npy
# files, the Perfetto traces (every instruction's start and end in picoseconds) and the printed profiles must be
# identical byte for byte. The bf16 output is also checked against the golden output shipped with the model.
# Gets build/tern as $1; runs from the source root.
set -u
tern=${1:?usage: test_threads_model.sh path/to/tern}
model=data/models/gpt2_tiny.onnx
input=data/models/gpt2_tiny.in.npy
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass+1)); }
bad() { echo "NOT OK: $*"; fail=$((fail+1)); }

for dtype in bf16 fp32; do
    for t in 1 8; do
        d="$tmp/$dtype.$t"
        if TERN_THREADS=$t "$tern" run "$model" --dtype $dtype --input input_ids="$input" --output-dir "$d" \
            --profile --trace "$d.trace.json" >"$d.txt" 2>&1; then
            ok
        else
            bad "$dtype with $t threads: tern run failed: $(tail -3 "$d.txt")"
        fi
    done
    a="$tmp/$dtype.1" b="$tmp/$dtype.8"
    if [ -s "$a/output.npy" ] && cmp -s "$a/output.npy" "$b/output.npy"; then ok
    else bad "$dtype: output.npy differs between 1 and 8 host threads ($(cmp "$a/output.npy" "$b/output.npy" 2>&1))"; fi
    if [ -s "$a.trace.json" ] && cmp -s "$a.trace.json" "$b.trace.json"; then ok
    else bad "$dtype: the trace (instruction times) differs between 1 and 8 host threads"; fi
    if grep -q "predicted device time" "$a.txt" && cmp -s "$a.txt" "$b.txt"; then ok
    else bad "$dtype: printed output and profile differ between 1 and 8 threads: $(diff "$a.txt" "$b.txt" | head -4)"; fi
done

# the threads agree with each other; the golden output says they are also right
if /usr/bin/python3 - "$tmp/bf16.8/output.npy" data/models/gpt2_tiny.out.npy <<'PY'
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.max(np.abs(got.astype(np.float64) - want))) / max(1e-30, float(np.max(np.abs(want))))
if got.shape != want.shape or not err < 2e-2:  # the bf16 tolerance of tests/compiler/test_models.sh
    print(f"shape {got.shape} vs {want.shape}, max relative error {err}")
    sys.exit(1)
PY
then ok; else bad "bf16 output with 8 threads does not match data/models/gpt2_tiny.out.npy"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
