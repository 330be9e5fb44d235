#!/usr/bin/env bash
# docs/calibration.md's generated table must equal what the timing model predicts now (so the doc cannot drift).
tern=$1
bench="$(dirname "$tern")/bench/bench_calibration"
pass=0 fail=0
want=$("$bench" --markdown) || { echo "NOT OK: bench_calibration failed"; echo "0 passed, 1 failed"; exit 1; }
have=$(sed -n '/<!-- BEGIN GENERATED TABLE -->/,/<!-- END GENERATED TABLE -->/p' docs/calibration.md | grep '^| [A-Z]')
if [ "$want" == "$have" ]; then pass=$((pass+1)); else
  fail=$((fail+1)); echo "NOT OK: docs/calibration.md is stale; run scripts/gen_calibration_doc.sh"; diff <(echo "$want") <(echo "$have") | head -20
fi
if echo "$want" | grep -q "DIFFERS"; then fail=$((fail+1)); echo "NOT OK: a documented cost rule is not reproduced exactly"; else pass=$((pass+1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
