#!/usr/bin/env bash
# CLI test for `tern info`: the catalogue listing, --names, the table and --json for every machine (JSON
# parsed by python3, derived peaks checked), --machine PATH, and exit codes: 2 for an unknown machine or
# option, 1 for a machine file that fails to load (with the loader's message on stderr).
set -u
TERN=${1:?usage: test_info.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"

# expect CODE CMD...: run, keep stdout/stderr in $tmp/out, $tmp/err, check the exit code.
expect() {
    local want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want; stderr: $(head -c 300 "$tmp/err")"; fi
}
contains() { # contains FILE TEXT
    if grep -qF -- "$2" "$1"; then ok; else bad "$(basename "$1") lacks '$2'"; fi
}

expect 0 "$TERN" info
contains "$tmp/out" "trn2.48xlarge"
contains "$tmp/out" "instance"
contains "$tmp/out" "neuroncore-v3"
contains "$tmp/out" "system"

expect 0 "$TERN" info --names
names=$(cat "$tmp/out")
count=$(printf '%s\n' "$names" | wc -l)
[ "$count" -eq 14 ] && ok || bad "--names printed $count names, expected 14"
printf '%s\n' "$names" | grep -qx 'trn1.2xlarge' && ok || bad "--names lacks trn1.2xlarge"
if grep -q ' ' "$tmp/out"; then bad "--names output has spaces"; else ok; fi

for m in $names; do
    expect 0 "$TERN" info "$m"
    contains "$tmp/out" "Derived peaks"
    contains "$tmp/out" "$m"
    expect 0 "$TERN" info "$m" --json
    if python3 -m json.tool "$tmp/out" >/dev/null 2>&1; then ok; else bad "$m --json is not valid JSON"; fi
done

expect 0 "$TERN" info trn2.48xlarge --json
python3 - "$tmp/out" <<'PY' && ok || bad "trn2.48xlarge --json figures"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["peaks"]
assert d["name"] == "trn2.48xlarge" and d["kind"] == "instance", d["name"]
assert p["chips"] == 16 and p["cores"] == 128, (p["chips"], p["cores"])
bf16 = p["total_flops"]["bf16"]
assert abs(bf16 / 10.7e15 - 1) < 0.07, bf16
assert p["total_hbm_bytes"] == 1536 * 2**30, p["total_hbm_bytes"]
assert d["instance"]["topology"] == "2d-torus 4x4"
assert d["instance"]["price"] is None
assert any(c["field"].startswith("chip FP32") for c in d["conflicts"])
for pub in d["published"]:
    assert abs(pub["derived_over_published"] - 1) <= 0.07, pub
PY

expect 0 "$TERN" info trn1.32xlarge --json --sources
python3 - "$tmp/out" <<'PY' && ok || bad "trn1.32xlarge --json --sources"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["instance"]["price"]["usd_per_hour"] == 21.5
assert len(d["sources"]) > 50 and all(s["source"] for s in d["sources"])
PY

expect 0 "$TERN" info trn2.48xlarge --sources
contains "$tmp/out" "chip.hbm.bandwidth"
contains "$tmp/out" "trainium2.rst"

expect 0 "$TERN" info --machine data/machines/trainium3.json
contains "$tmp/out" "trainium3 (chip)"
expect 0 "$TERN" info data/machines/neuroncore-v2.json --json

expect 0 "$TERN" info --help
contains "$tmp/out" "usage: tern info"

# Usage errors: exit 2, message and usage on stderr, nothing on stdout.
expect 2 "$TERN" info no-such-machine
contains "$tmp/err" "no-such-machine"
contains "$tmp/err" "usage"
[ -s "$tmp/out" ] && bad "unknown machine printed to stdout" || ok
expect 2 "$TERN" info --machine /nonexistent/m.json
contains "$tmp/err" "/nonexistent/m.json"
expect 2 "$TERN" info --frobnicate
contains "$tmp/err" "--frobnicate"
contains "$tmp/err" "usage"
expect 2 "$TERN" info trn2.48xlarge --frobnicate
expect 2 "$TERN" info trn1.2xlarge trn2.48xlarge
expect 2 "$TERN" info --machine
expect 2 "$TERN" info --json

# A broken file: exit 1 with the loader's message naming file, field and value.
sed '0,/"value": 128,/s//"value": 8192,/' data/machines/neuroncore-v3.json >"$tmp/bad-core.json"
expect 1 "$TERN" info --machine "$tmp/bad-core.json"
contains "$tmp/err" "bad-core.json"
contains "$tmp/err" "core.tensor.pe_rows"
contains "$tmp/err" "8192"
printf '{ "schema": "tern-machine/1", \n "kind": }' >"$tmp/broken.json"
expect 1 "$TERN" info "$tmp/broken.json"
contains "$tmp/err" "malformed JSON"
contains "$tmp/err" "line 2"

# What-if from the command line: a 256x256 array quadruples the derived peak.
python3 - "$tmp" <<'PY' || bad "could not write what-if file"
import json, sys
d = json.load(open("data/machines/neuroncore-v3.json"))
d["name"] = "wide"
for k in ("pe_rows", "pe_cols"):
    d["core"]["tensor"][k]["value"] = 256
d["core"]["sbuf"]["partitions"]["value"] = 256
d["core"]["psum"]["partitions"]["value"] = 256
json.dump(d, open(sys.argv[1] + "/wide.json", "w"))
PY
expect 0 "$TERN" info --machine "$tmp/wide.json" --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=d['peaks']['core_flops']['bf16']; assert abs(v-256*256*2*2.4e9)<1, v" "$tmp/out" && ok || bad "what-if peak"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
