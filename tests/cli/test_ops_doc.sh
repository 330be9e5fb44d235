#!/usr/bin/env bash
# docs/ops.md embeds the op reference generated from the registry (`tern ops --markdown`) between the GENERATED
# REFERENCE markers; this test fails when the two differ, so the page cannot drift from include/tern/ops.def or
# from what the evaluator and the compiler support. Fix a failure with scripts/gen_ops_doc.sh.
set -u
TERN=${1:?usage: test_ops_doc.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"
doc=docs/ops.md

[ "$(grep -cxF '<!-- BEGIN GENERATED REFERENCE -->' "$doc")" = 1 ] && ok || bad "$doc: need exactly one BEGIN marker"
[ "$(grep -cxF '<!-- END GENERATED REFERENCE -->' "$doc")" = 1 ] && ok || bad "$doc: need exactly one END marker"
sed -n '/^<!-- BEGIN GENERATED REFERENCE -->$/,/^<!-- END GENERATED REFERENCE -->$/p' "$doc" | sed '1d;$d' >"$tmp/doc"
if "$TERN" ops --markdown >"$tmp/ref"; then ok; else bad "tern ops --markdown failed"; fi
if diff -u "$tmp/ref" "$tmp/doc" >"$tmp/diff"; then
    ok
else
    bad "$doc's generated reference differs from 'tern ops --markdown' (run scripts/gen_ops_doc.sh):"
    head -40 "$tmp/diff" >&2
fi
# One row per registry row: the table is the source of every row.
rows=$(grep -c '^| `' "$tmp/ref")
names=$(grep -c '^GOP(' include/tern/ops.def)
[ "$rows" = "$names" ] && ok || bad "reference has $rows rows, the registry $names ops"
# The plain listing names the same ops, and an unknown option is a usage error.
[ "$("$TERN" ops | wc -l)" = "$names" ] && ok || bad "tern ops lists $("$TERN" ops | wc -l) ops, the registry $names"
# The gradient column follows autodiff's rules: MatMul and Softmax have one, Sign (zero almost everywhere, no rule)
# and the generator Range do not.
"$TERN" ops >"$tmp/list"
for op in MatMul Softmax Gather LayerNormalization; do
    grep -qE "^$op +.* grad yes " "$tmp/list" && ok || bad "tern ops: $op should have a gradient rule"
done
for op in Sign Range; do
    grep -qE "^$op +.* grad - " "$tmp/list" && ok || bad "tern ops: $op should have no gradient rule"
done
"$TERN" ops --bogus >/dev/null 2>&1
[ $? = 2 ] && ok || bad "tern ops --bogus: expected exit 2"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
