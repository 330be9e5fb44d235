#!/usr/bin/env bash
# Opt-in benchmark (`make bench-big`, not part of `make check`): a ~4.3 GB ONNX model with external data (16 fp32
# MatMul weights of 8192 x 8192, bench/big_model.py) is generated under BUILD/bench-big once, then compiled and run
# timing-only with `tern run --timing-only` for the bf16 and fp32 matmul dtypes. It prints `name: value` lines: the
# weight bytes, each run's peak RSS (from /usr/bin/time -v) and the ratio of the two. A second copy of the
# weights anywhere on the path (a whole-file read, a converted copy next to the graph's, an executable copy next to
# the kernel's) would show as a ratio of 1.5-2 or more; one copy plus one layer in flight is about 1.06 (fp32).
# Usage: bench/bench_big.sh [BUILD] [D] [LAYERS]; needs ~4.3 GB of disk and ~5 GB of memory.
set -eu
BUILD=${1:-build}
D=${2:-8192}
LAYERS=${3:-16}
TERN=$BUILD/tern
DIR=$BUILD/bench-big
PY=/usr/bin/python3
[ -x "$TERN" ] || { echo "bench_big: $TERN not built (make first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_big: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
want=$((D * D * 4 * LAYERS))
if [ ! -f "$DIR/model.onnx" ] || [ "$(stat -c %s "$DIR/weights.bin" 2>/dev/null || echo 0)" != "$want" ]; then
    rm -rf "$DIR"
    echo "bench_big: writing $want bytes of weights to $DIR (once)" >&2
    $PY "$(dirname "$0")/big_model.py" "$DIR" "$D" "$LAYERS" >/dev/null
fi
echo "big_model_weight_bytes: $want"
for dt in bf16 fp32; do
    /usr/bin/time -v "$TERN" run "$DIR/model.onnx" --timing-only --dtype "$dt" >"$DIR/run_$dt.out" 2>"$DIR/run_$dt.err" ||
        { cat "$DIR/run_$dt.err" >&2; exit 1; }
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$DIR/run_$dt.err")
    secs=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$DIR/run_$dt.err")
    pred=$(sed -n 's/^predicted device time on [^:]*: \([0-9.]* [a-z]*\).*/\1/p' "$DIR/run_$dt.out")
    echo "big_model_${dt}_peak_rss_bytes: $((kb * 1024))"
    echo "big_model_${dt}_peak_rss_over_weights: $(awk -v r=$((kb * 1024)) -v w=$want 'BEGIN { printf "%.3f", r / w }')"
    echo "big_model_${dt}_wall: $secs"
    echo "big_model_${dt}_predicted: $pred"
done
