#!/usr/bin/env bash
# Regenerate the instruction reference in docs/isa.md (between the GENERATED REFERENCE markers) from the
# instruction table, via `tern disasm --reference`. Usage: scripts/gen_isa_doc.sh [path/to/tern]
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${1:-build/tern}
doc=docs/isa.md
begin='<!-- BEGIN GENERATED REFERENCE -->'
end='<!-- END GENERATED REFERENCE -->'
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "gen_isa_doc.sh: markers missing in $doc" >&2; exit 1; }
ref=$(mktemp)
trap 'rm -f "$ref" "$ref.new"' EXIT
"$TERN" disasm --reference >"$ref"
awk -v b="$begin" -v e="$end" -v ref="$ref" '
    $0 == b { print; while ((getline line < ref) > 0) print line; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$doc" >"$ref.new"
mv "$ref.new" "$doc"
