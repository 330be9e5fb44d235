#!/usr/bin/env bash
# The ONNX importer's libFuzzer target, kept as a name for scripts/fuzz.sh onnx (docs/fuzzing.md):
# scripts/fuzz_onnx.sh [seconds] [extra libFuzzer flags...]
set -euo pipefail
seconds=${1:-60}
shift 1 2>/dev/null || shift $#
exec "$(dirname "$0")/fuzz.sh" onnx "$seconds" "$@"
