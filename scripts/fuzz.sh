#!/usr/bin/env bash
# Build and run one of tern's libFuzzer targets (fuzz/fuzz_isa_<target>.c, or fuzz/fuzz_exe_decode.c for the
# executable decoder) with clang, ASan and UBSan, outside the CMake build:
# scripts/fuzz.sh decode|asm|exe [seconds] [extra libFuzzer flags...]
# The seed corpus fuzz/corpus/<target>/ is generated from the ISA tests' programs when empty (needs build/); new
# inputs found while fuzzing go to build-fuzz/corpus-<target>/ so the committed seeds stay small. Crashes are saved
# as build-fuzz/crash-* and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
seconds=${2:-60}
shift 2 2>/dev/null || shift $#
case "$target" in
decode | asm | exe) ;;
*)
    echo "usage: scripts/fuzz.sh decode|asm|exe [seconds] [libFuzzer flags...]" >&2
    exit 2
    ;;
esac
CC=${CC:-clang}
out=build-fuzz
mkdir -p "$out" "$out/corpus-$target"
bin="$out/fuzz_isa_$target"
src="fuzz/fuzz_isa_$target.c"
extra=()
if [ "$target" = exe ]; then
    bin="$out/fuzz_exe_decode"
    src=fuzz/fuzz_exe_decode.c
    extra=(src/runtime/exe.c -lz)
fi
# Only the layers the ISA needs; -Isrc for the private codec header. Of num, the ISA uses only the dtype names
# (formats.c); the SIMD conversion files use a gcc-only __builtin_cpu_supports("f16c") that clang 14 rejects, so
# the portable files are taken when the whole layer does not compile with this compiler.
num_srcs="src/num/*.c"
if ! $CC -fsyntax-only -Iinclude -Isrc src/num/convert.c 2>/dev/null; then
    num_srcs="src/num/formats.c src/num/rng.c"
fi
$CC -g -O1 -std=c17 -D_GNU_SOURCE -DTERN_VERSION='"fuzz"' -DTERN_DATA_DIR='"data"' \
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-command-line-argument \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    -Iinclude -Isrc "$src" src/base/*.c $num_srcs src/isa/*.c "${extra[@]}" -lm -o "$bin"
seeds="fuzz/corpus/$target"
if [ "$target" = exe ] && [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
    # seeds: executables of two small ONNX models (a kernel-free copy and a matmul)
    [ -x build/tern ] || { echo "fuzz.sh: build/tern missing: run make first" >&2; exit 1; }
    mkdir -p "$seeds"
    /usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
out = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
w = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4) / 32, "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                      "seed", [x], [y], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/seed_mm.onnx")
PY
    build/tern compile "$out/seed_mm.onnx" -o "$seeds/mm.tern" > /dev/null
fi
if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
    if [ ! -x build/tests/test_isa_asm ]; then
        echo "fuzz.sh: no seeds in $seeds and build/tests/test_isa_asm missing: run make first" >&2
        exit 1
    fi
    TERN_WRITE_CORPUS=fuzz/corpus build/tests/test_isa_asm
fi
dict=()
[ "$target" = asm ] && [ -f fuzz/asm.dict ] && dict=(-dict=fuzz/asm.dict)
exec "$bin" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" "${dict[@]}" "$@" \
    "$out/corpus-$target" "$seeds"
