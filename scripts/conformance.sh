#!/usr/bin/env bash
# ONNX backend node tests on tern (`make conformance`): generates the cases with the generators Debian's
# python3-onnx ships (once, into $BUILD/onnx-node-tests), writes ops.tsv (the op each case tests, from ONNX's own
# operator schemas), then runs build/conformance over every case. Extra arguments go to the runner (e.g.
# -f softmax, -v). docs/conformance.md describes the runner, the table and the tolerances.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PY=${TERN_PYTHON:-/usr/bin/python3}
OUT=$BUILD/onnx-node-tests
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ ! -f "$OUT/.complete" ]; then
    rm -rf "$OUT"
    mkdir -p "$OUT"
    echo "conformance: generating ONNX node tests into $OUT" >&2
    # ONNX 1.12's generators use numpy aliases removed in numpy 1.24: restore them first.
    "$PY" - "$OUT" <<'PY'
import sys
import numpy as np
for name, typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if not hasattr(np, name):
        setattr(np, name, typ)
out = sys.argv[1]
sys.argv = ["onnx.backend.test.cmd_tools", "generate-data", "-o", out]
from onnx.backend.test.cmd_tools import main
main()
PY
    # ops.tsv: test name, the op it tests (the model's only op type, else the longest ONNX op name that starts the
    # test's name, case and underscores ignored), and "expanded" for the function-expanded variants.
    "$PY" - "$OUT" <<'PY'
import os, sys
import onnx, onnx.defs
out = sys.argv[1]
schemas = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")})
def key(name):
    return name.lower().replace("_", "")
rows = []
for t in sorted(os.listdir(os.path.join(out, "node"))):
    if not t.startswith("test_"):
        continue
    name = t[len("test_"):]
    m = onnx.load(os.path.join(out, "node", t, "model.onnx"))
    node_ops = [n.op_type for n in m.graph.node if n.domain in ("", "ai.onnx")] or [n.op_type for n in m.graph.node]
    for short, full in (("mvn", "MeanVarianceNormalization"), ("nllloss", "NegativeLogLikelihoodLoss"),
                        ("sce", "SoftmaxCrossEntropyLoss")):
        if name.startswith(short + "_"):
            name = full + name[len(short):]
    k = key(name)
    def best(cands):
        hits = [c for c in cands if k.startswith(key(c))]
        return max(hits, key=lambda c: len(key(c))) if hits else None
    distinct = sorted(set(o for o in node_ops if o != "Constant"))
    op = (distinct[0] if len(distinct) == 1 else None) or best(set(node_ops) | set(schemas)) \
        or (node_ops[0] if node_ops else name)
    rows.append("%s\t%s%s" % (t, op, "\texpanded" if "_expanded" in name else ""))
with open(os.path.join(out, "node", "ops.tsv"), "w") as f:
    f.write("\n".join(rows) + "\n")
PY
    touch "$OUT/.complete"
fi

exec "$BUILD/conformance" -j "$JOBS" -t "${TIMEOUT:-20}" -l "$BUILD/conformance.log" "$@" "$OUT/node"
