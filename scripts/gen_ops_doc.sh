#!/usr/bin/env bash
# Regenerate the op reference in docs/ops.md (between the GENERATED REFERENCE markers) from the op registry
# (include/tern/ops.def), via `tern ops --markdown`. Usage: scripts/gen_ops_doc.sh [path/to/tern]
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${1:-build/tern}
doc=docs/ops.md
begin='<!-- BEGIN GENERATED REFERENCE -->'
end='<!-- END GENERATED REFERENCE -->'
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "gen_ops_doc.sh: markers missing in $doc" >&2; exit 1; }
ref=$(mktemp)
trap 'rm -f "$ref" "$ref.new"' EXIT
"$TERN" ops --markdown >"$ref"
awk -v b="$begin" -v e="$end" -v ref="$ref" '
    $0 == b { print; while ((getline line < ref) > 0) print line; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$doc" >"$ref.new"
mv "$ref.new" "$doc"
