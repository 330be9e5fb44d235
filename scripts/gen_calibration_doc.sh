#!/usr/bin/env bash
# Regenerate the calibration table in docs/calibration.md from the timing model:
#   scripts/gen_calibration_doc.sh [build-dir]     (default build/; run `make` first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
table=$("$build/bench/bench_calibration" --markdown)
python3 - "$table" <<'PY'
import sys
doc = open("docs/calibration.md").read()
begin, end = "<!-- BEGIN GENERATED TABLE -->", "<!-- END GENERATED TABLE -->"
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
rows = "| id | figure | published | tern | agreement |\n|---|---|---|---|---|\n" + sys.argv[1] + "\n"
open("docs/calibration.md", "w").write(head + begin + "\n" + rows + end + tail)
PY
