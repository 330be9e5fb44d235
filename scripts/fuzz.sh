#!/usr/bin/env bash
# Build and run one of tern's libFuzzer targets (fuzz/fuzz_<name>.c, docs/fuzzing.md) from the CMake fuzz build
# (clang; libtern compiled with -fsanitize=fuzzer-no-link,address,undefined):
#   scripts/fuzz.sh TARGET [seconds] [extra libFuzzer flags...]
# TARGET: decoders  decode (binary programs), asm (assembler), exe (executable decoder), onnx (ONNX importer);
#         consumers asm_run (asm -> rules -> timing-only and functional runs), exe_run (.tern -> runtime ->
#         execute), onnx_run (ONNX -> compile -> execute).
# The committed seeds are fuzz/corpus/TARGET/; new inputs go to build-fuzz/corpus-TARGET/ so the seeds stay small
# (FUZZ_SEEDS_ONLY=1: run on the seeds alone, nothing kept, as CI does). Crashes are saved as
# build-fuzz/crash-TARGET-* and the script exits non-zero. The build directory is $FUZZ_BUILD (build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
seconds=${2:-60}
shift 2 2>/dev/null || shift $#
case "$target" in
decode) bin=fuzz_isa_decode ;;
asm) bin=fuzz_isa_asm ;;
exe) bin=fuzz_exe_decode ;;
onnx) bin=fuzz_onnx_import ;;
asm_run | exe_run | onnx_run) bin=fuzz_$target ;;
*)
    echo "usage: scripts/fuzz.sh decode|asm|exe|onnx|asm_run|exe_run|onnx_run [seconds] [libFuzzer flags...]" >&2
    exit 2
    ;;
esac
out=${FUZZ_BUILD:-build-fuzz}
if [ ! -f "$out/CMakeCache.txt" ]; then
    cmake -S . -B "$out" -DCMAKE_C_COMPILER="${CC:-clang}" -DTERN_FUZZ=ON >/dev/null
fi
cmake --build "$out" --target "$bin" -j"${FUZZ_BUILD_JOBS:-2}" >/dev/null
seeds="fuzz/corpus/$target"
[ -n "$(ls -A "$seeds" 2>/dev/null)" ] || { echo "fuzz.sh: no seeds in $seeds" >&2; exit 1; }
# libFuzzer writes new inputs into the first directory: build-fuzz/corpus-TARGET, or a scratch one removed at the
# end with FUZZ_SEEDS_ONLY=1, never the committed seeds.
if [ "${FUZZ_SEEDS_ONLY:-0}" = 1 ]; then
    scratch=$(mktemp -d "$out/scratch-$target.XXXXXX")
    trap 'rm -rf "$scratch"' EXIT
    dirs=("$scratch" "$seeds")
else
    mkdir -p "$out/corpus-$target"
    dirs=("$out/corpus-$target" "$seeds")
fi
opts=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/crash-$target-" -timeout=30
      -rss_limit_mb=3072)
case "$target" in
asm | asm_run) [ -f fuzz/asm.dict ] && opts+=(-dict=fuzz/asm.dict) ;;
onnx) opts+=(-max_len=65536) ;;
esac
[ "$target" = asm_run ] && opts+=(-max_len=16384)
"$out/$bin" "${opts[@]}" "$@" "${dirs[@]}"
