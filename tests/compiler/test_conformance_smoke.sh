#!/usr/bin/env bash
# Smoke test of the ONNX conformance runner (the full run is `make conformance`, outside `make check`): a dozen
# representative ONNX backend node tests (matmul, gemm, softmax, transpose, reshape with a shape input, reductions,
# arg-reductions, clip, where, erf, split, slice, gather-elements, cumsum, casts (text too), expand) must each compile, run on
# the simulated NeuronCore and match ONNX's expected outputs; and a case whose expected output is corrupted must be
# reported as a FAIL, so the runner can fail. Gets build/tern as $1; build/conformance sits next to it.
set -u
TERN=${1:?usage: test_conformance_smoke.sh path/to/tern}
BUILD=$(cd "$(dirname "$TERN")" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNNER=$BUILD/conformance
[ -x "$RUNNER" ] || { echo "NOT OK: $RUNNER is missing (built with everything)" >&2; exit 1; }
CASES="test_add_bcast$,test_matmul_3d$,test_gemm_default_no_bias$,test_softmax_large_number$,\
test_transpose_all_permutations_0$,test_reshape_negative_dim$,test_reduce_log_sum_exp_keepdims_random$,\
test_argmax_keepdims_random$,test_clip$,test_where_example$,test_erf$,test_split_equal_parts_1d$,test_slice$,\
test_gather_elements_0$,test_cumsum_2d_axis_1$,test_cast_FLOAT_to_FLOAT16$,test_cast_FLOAT_to_STRING$,\
test_cast_STRING_to_FLOAT$,test_expand_dim_changed$,\
test_conv_with_strides_padding$"
want=$(echo "$CASES" | tr ',' '\n' | grep -c .)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Generates the node tests into $BUILD/onnx-node-tests on first use (a few seconds), then runs the selection.
BUILD=$BUILD JOBS=2 bash "$ROOT/scripts/conformance.sh" -f "$CASES" >"$tmp/out" 2>"$tmp/err"
rc=$?
last=$(tail -n 1 "$tmp/out")
fail=0
if [ "$last" != "onnx_node_tests: $want passed, 0 failed, 0 unsupported" ]; then
    echo "NOT OK: expected all $want cases to pass, got '$last' (exit $rc)" >&2
    grep -E '^(FAIL|UNSUPPORTED)' "$tmp/out" >&2
    head -c 2000 "$tmp/err" >&2
    fail=1
fi
[ "$rc" -eq 0 ] || { echo "NOT OK: runner exited $rc with every case passing" >&2; fail=1; }
# A corrupted expectation must be caught: copy one case and change one expected element.
src=$BUILD/onnx-node-tests/node/test_erf
mkdir -p "$tmp/neg"
cp -r "$src" "$tmp/neg/test_erf"
/usr/bin/python3 - "$tmp/neg/test_erf/test_data_set_0/output_0.pb" <<'PY'
import sys
from onnx import TensorProto, numpy_helper
p = sys.argv[1]
t = TensorProto()
t.ParseFromString(open(p, "rb").read())
a = numpy_helper.to_array(t).copy()
a.flat[3] += 0.01
open(p, "wb").write(numpy_helper.from_array(a, t.name).SerializeToString())
PY
"$RUNNER" "$tmp/neg" >"$tmp/neg.out" 2>&1
nrc=$?
if ! grep -q "^FAIL .*test_erf" "$tmp/neg.out" || [ "$nrc" -ne 1 ] ||
    [ "$(tail -n 1 "$tmp/neg.out")" != "onnx_node_tests: 0 passed, 1 failed, 0 unsupported" ]; then
    echo "NOT OK: a corrupted expected output was not reported as a failure (exit $nrc):" >&2
    cat "$tmp/neg.out" >&2
    fail=1
fi
[ "$fail" -eq 0 ] && echo "conformance smoke: $want cases pass, a corrupted case fails"
exit "$fail"
