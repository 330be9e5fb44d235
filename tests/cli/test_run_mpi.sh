#!/usr/bin/env bash
# The compiler's batch split over a cluster and over MPI processes (docs/runtime.md, "Batch split over instances
# and MPI processes"). A small attention block (LayerNorm, 4 heads, residual, classifier; dynamic batch) compiled
# for 8 NeuronCores of trn1.32xlarge (4 chips) and for 64 of 2xtrn1.32xlarge (two instances, the gather of the
# outputs crossing EFA) runs its shares as ranks of one launch; its outputs are bit for bit the one-core run's,
# and the whole `tern run` output - every output's summary, the predicted time, the share and gather times - is
# byte-identical without mpirun and under `mpirun -np K` for K = 1, 2 and 4 (only process 0 prints, the written
# .npy files identical too). Refused: an executable that does not split a batch over MPI processes, more processes
# than the chips the split uses, --profile under mpirun, more cores than the cluster has, an unknown instance.
# CMake passes mpirun as TERN_MPIEXEC when the build has MPI; without it the MPI half is skipped (exit 77).
set -u
TERN=${1:?usage: test_run_mpi.sh path/to/tern}
. "$(dirname "$0")/../mpi_lib.sh"

/usr/bin/python3 "$(dirname "$0")/../attention_block.py" "$tmp" 64 || { echo "NOT OK: the test model could not be made" >&2; exit 1; }

expect 0 "$TERN" compile "$tmp/m.onnx" -o "$tmp/one.tern" --machine trn1.32xlarge --dim b=64
expect 0 "$TERN" run "$tmp/one.tern" --input x="$tmp/x.npy" --output-dir "$tmp/o_one"
for spec in "trn1.32xlarge 8" "2xtrn1.32xlarge 64"; do
    set -- $spec
    m=$1 c=$2
    expect 0 "$TERN" compile "$tmp/m.onnx" -o "$tmp/s$c.tern" --machine "$m" --cores "$c" --dim b=64
    contains "$tmp/out" "on $c cores"
    expect 0 "$TERN" run "$tmp/s$c.tern" --input x="$tmp/x.npy" --output-dir "$tmp/o$c"
    cp "$tmp/out" "$tmp/ref$c.txt"
    contains "$tmp/ref$c.txt" "predicted device time on $m ($c cores)"
    contains "$tmp/ref$c.txt" "the $c shares ran as ranks of one launch"
    if cmp -s "$tmp/o_one/logits.npy" "$tmp/o$c/logits.npy"; then ok; else bad "$m, $c cores: outputs differ from one core's"; fi
    for np in 1 2 4; do
        expect 0 "${MPI[@]}" -np $np "$TERN" run "$tmp/s$c.tern" --input x="$tmp/x.npy" --output-dir "$tmp/o${c}_$np"
        if cmp -s "$tmp/ref$c.txt" "$tmp/out"; then ok; else
            bad "$m, $c cores, mpirun -np $np: the output differs: $(diff "$tmp/ref$c.txt" "$tmp/out" | head -5)"; fi
        if cmp -s "$tmp/o$c/logits.npy" "$tmp/o${c}_$np/logits.npy"; then ok; else bad "$m, $c cores, -np $np: logits.npy differs"; fi
    done
done
# the gather of 64 shares crosses EFA between the two instances: it takes longer than 8 shares' on one instance
if /usr/bin/python3 - "$tmp/ref8.txt" "$tmp/ref64.txt" <<'PYEOF'; then ok; else bad "gather times (above)"; fi
import re, sys
g = [float(re.search(r"all-gather of the outputs: ([0-9.]+) ms", open(f).read()).group(1)) for f in sys.argv[1:]]
print(f"gather: 8 cores of trn1.32xlarge {g[0]:.3f} ms, 64 cores of 2xtrn1.32xlarge {g[1]:.3f} ms")
sys.exit(0 if g[1] > g[0] > 0 else 1)
PYEOF
# refused
expect 1 "${MPI[@]}" -np 2 "$TERN" run "$tmp/one.tern" --input x="$tmp/x.npy"
contains "$tmp/err" "only a batch split (tern compile --cores N, N >= 2) spreads over MPI processes"
expect 0 "$TERN" compile "$tmp/m.onnx" -o "$tmp/s2.tern" --machine trn1.32xlarge --cores 2 --dim b=64
expect 1 "${MPI[@]}" -np 2 "$TERN" run "$tmp/s2.tern" --input x="$tmp/x.npy"
contains "$tmp/err" "2 processes for the 1 chip that hold the 2 ranks"
expect 2 "${MPI[@]}" -np 2 "$TERN" run "$tmp/s8.tern" --input x="$tmp/x.npy" --profile
contains "$tmp/err" "--profile, --trace and --svg profile one process's cores"
expect 1 "$TERN" compile "$tmp/m.onnx" -o "$tmp/x.tern" --machine 2xtrn1.32xlarge --cores 65 --dim b=65
contains "$tmp/err" "65 cores requested; 2xtrn1.32xlarge has 64"
expect 1 "$TERN" compile "$tmp/m.onnx" -o "$tmp/x.tern" --machine 2xtrn9.nothing --cores 2 --dim b=2
contains "$tmp/err" "unknown instance 'trn9.nothing'"
expect 1 "$TERN" run "$tmp/s64.tern" --machine trn1.32xlarge --input x="$tmp/x.npy"
contains "$tmp/err" "the executable needs 64 NeuronCores; machine trn1.32xlarge has 32"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
