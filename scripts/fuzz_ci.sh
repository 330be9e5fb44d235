#!/usr/bin/env bash
# CI's fuzzing step (docs/fuzzing.md): build the libFuzzer targets in build-fuzz (clang; libtern with
# -fsanitize=fuzzer-no-link,address,undefined; only the library and the targets, to keep the build lean) and run
# every target -- the decoders and the consumers -- for FUZZ_CI_SECONDS (30) on its committed seed corpus alone,
# one target at a time. Nothing found is kept except crash inputs (build-fuzz/crash-TARGET-*); any crash, leak,
# sanitizer report or timeout fails the step, so a regression is caught at the next landing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_CI_SECONDS:-30}
out=${FUZZ_BUILD:-build-fuzz}
if ! command -v clang >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
    scripts/install-deps.sh --dev
fi
cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang -DTERN_FUZZ=ON >/dev/null
cmake --build "$out" --target fuzz_all -j"${FUZZ_BUILD_JOBS:-2}" >/dev/null
fail=0
for t in decode asm exe onnx asm_run exe_run onnx_run; do
    log="$out/ci-$t.log"
    if FUZZ_SEEDS_ONLY=1 FUZZ_BUILD="$out" scripts/fuzz.sh "$t" "$seconds" >"$log" 2>&1; then
        echo "fuzz $t: ok, $(grep -o 'number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') inputs in ${seconds} s"
    else
        echo "fuzz $t: FAILED (log $log)"
        grep -E 'ERROR|SUMMARY|#[0-9]+ 0x|Test unit written' "$log" | head -40 || tail -40 "$log"
        fail=1
    fi
done
exit $fail
