#!/usr/bin/env bash
# docs/isa.md embeds the instruction reference generated from the table (`tern disasm --reference`) between the
# GENERATED REFERENCE markers; this test fails when the two differ, so the page cannot drift from
# include/tern/isa_table.def. Fix a failure with scripts/gen_isa_doc.sh.
set -u
TERN=${1:?usage: test_isa_doc.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"
doc=docs/isa.md

[ "$(grep -cxF '<!-- BEGIN GENERATED REFERENCE -->' "$doc")" = 1 ] && ok || bad "$doc: need exactly one BEGIN marker"
[ "$(grep -cxF '<!-- END GENERATED REFERENCE -->' "$doc")" = 1 ] && ok || bad "$doc: need exactly one END marker"
grep -qx '## Semantics notes' "$doc" && ok || bad "$doc: missing the '## Semantics notes' section"
sed -n '/^<!-- BEGIN GENERATED REFERENCE -->$/,/^<!-- END GENERATED REFERENCE -->$/p' "$doc" | sed '1d;$d' >"$tmp/doc"
if "$TERN" disasm --reference >"$tmp/ref"; then ok; else bad "tern disasm --reference failed"; fi
if diff -u "$tmp/ref" "$tmp/doc" >"$tmp/diff"; then
    ok
else
    bad "$doc's generated reference differs from 'tern disasm --reference' (run scripts/gen_isa_doc.sh):"
    head -40 "$tmp/diff" >&2
fi
# One row per opcode: the table is the source of every row.
rows=$(grep -c '^| `' "$tmp/ref")
names=$(grep -c '^OP(' include/tern/isa_table.def)
[ "$rows" = "$names" ] && ok || bad "reference has $rows rows, the table $names opcodes"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
