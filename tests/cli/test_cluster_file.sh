#!/usr/bin/env bash
# CLI test for cluster files (docs/multichip.md, "Cluster files"): a file that says "4 x trn1.32xlarge" and
# nothing else gives the same `tern collective --json` rows as --machine 4xtrn1.32xlarge; the sample what-if file
# (data/clusters/what-if-2x-efa.json, twice the EFA bandwidth) makes a large cross-instance all-reduce faster and
# leaves a single-instance one unchanged; a NeuronLink override and a topology override change intra-instance
# times; `tern plan` accepts the file; and each broken field is refused (exit 1) with a message naming the file,
# the field, the rule and the value.
set -u
TERN=${1:?usage: test_cluster_file.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"
DATA="$(cd "$(dirname "$0")/../.." && pwd)/data"

same() { if cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ: $(diff "$1" "$2" | head -5)"; fi; }
# us_of FILE BYTES: the predicted time of the row with that size
us_of() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["rows"] if isinstance(d,dict) else d
print([x for x in r if x["bytes"]==int(sys.argv[2])][0]["time_us"])' "$1" "$2"; }

cat >"$tmp/plain.json" <<'J'
{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 4}
J
# 1. identical to the spec form, rows and machine name alike
expect 0 "$TERN" collective all-reduce --machine 4xtrn1.32xlarge --nodes 4 --ranks 128 --sizes 1MiB:64MiB --json
cp "$tmp/out" "$tmp/spec.out"
expect 0 "$TERN" collective all-reduce --machine "$tmp/plain.json" --nodes 4 --ranks 128 --sizes 1MiB:64MiB --json
same "$tmp/spec.out" "$tmp/out"

# 2. twice the EFA bandwidth: a cross-instance all-reduce of 64 MiB gets faster
expect 0 "$TERN" collective all-reduce --machine "$DATA/clusters/what-if-2x-efa.json" --nodes 4 --ranks 128 \
    --sizes 1MiB:64MiB --json
cp "$tmp/out" "$tmp/efa2.out"
contains "$tmp/efa2.out" '"machine":"4xtrn1.32xlarge-2x-efa"'
base=$(us_of "$tmp/spec.out" 67108864) fast=$(us_of "$tmp/efa2.out" 67108864)
echo "all-reduce 64 MiB, 4 x trn1.32xlarge, 128 ranks: $base us; with 2x EFA: $fast us"
if python3 -c "import sys; sys.exit(0 if float('$fast') < 0.9*float('$base') else 1)"; then ok
else bad "2x EFA: $fast us is not faster than $base us"; fi
# ... and inside one instance (no EFA on the route) nothing changes
expect 0 "$TERN" collective all-reduce --machine 4xtrn1.32xlarge --nodes 1 --ranks 32 --sizes 64MiB --json
cp "$tmp/out" "$tmp/one.out"
expect 0 "$TERN" collective all-reduce --machine "$DATA/clusters/what-if-2x-efa.json" --nodes 1 --ranks 32 \
    --sizes 64MiB --json
if [ "$(us_of "$tmp/one.out" 67108864)" = "$(us_of "$tmp/out" 67108864)" ]; then ok; else bad "1-node time moved"; fi

# 3. NeuronLink override: half the link bandwidth slows the single-instance all-reduce over the single ring
# (--channels 1, link-bound); over the 4 ring channels each link carries a quarter of it and the collective DMA
# bounds the time, so the same override changes nothing there (docs/multichip.md, "Ring channels")
cat >"$tmp/halfnl.json" <<'J'
{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1,
 "neuronlink": {"bandwidth_per_chip": {"value": 192, "unit": "GiB/s", "note": "half of 384"}}}
J
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 32 --sizes 64MiB --channels 1 --json
cp "$tmp/out" "$tmp/one1.out"
expect 0 "$TERN" collective all-reduce --machine "$tmp/halfnl.json" --ranks 32 --sizes 64MiB --channels 1 --json
slow=$(us_of "$tmp/out" 67108864) one=$(us_of "$tmp/one1.out" 67108864)
if python3 -c "import sys; sys.exit(0 if float('$slow') > float('$one') else 1)"; then ok
else bad "half NeuronLink, one ring: $slow us not slower than $one us"; fi
expect 0 "$TERN" collective all-reduce --machine "$tmp/halfnl.json" --ranks 32 --sizes 64MiB --json
slow=$(us_of "$tmp/out" 67108864) one=$(us_of "$tmp/one.out" 67108864)
if [ "$slow" = "$one" ]; then ok; else bad "half NeuronLink, 4 channels: $slow us, full links $one us (DMA-bound)"; fi
# 4. topology override: a 16-chip ring instead of the 4x4 torus changes the routes (and is accepted)
cat >"$tmp/ring.json" <<'J'
{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1, "topology": "ring 16"}
J
expect 0 "$TERN" collective all-to-all --machine "$tmp/ring.json" --ranks 32 --sizes 16MiB --json
cp "$tmp/out" "$tmp/ring.out"
expect 0 "$TERN" collective all-to-all --machine trn1.32xlarge --ranks 32 --sizes 16MiB --json
if [ "$(us_of "$tmp/ring.out" 16777216)" != "$(us_of "$tmp/out" 16777216)" ]; then ok
else bad "ring 16 gives the torus's all-to-all time"; fi

# 5. tern plan takes the file wherever it takes --cluster
expect 0 "$TERN" plan --help
if grep -q -- "--cluster" "$tmp/out"; then
    expect 0 "$TERN" plan --model "$DATA/models/gpt2.json" --cluster "$tmp/plain.json" --seq 1024 --global-batch 64 --top 5 --json --quiet
    sed 's/"host_s":[0-9.]*,//' "$tmp/out" >"$tmp/plan_file.out"
    expect 0 "$TERN" plan --model "$DATA/models/gpt2.json" --cluster 4xtrn1.32xlarge --seq 1024 --global-batch 64 --top 5 --json --quiet
    sed 's/"host_s":[0-9.]*,//' "$tmp/out" >"$tmp/plan_spec.out"
    same "$tmp/plan_file.out" "$tmp/plan_spec.out"
fi

# 6. errors: exit 1, message names the file, the field, the rule and the value
refuse() { # refuse JSON TEXT...: the file is refused and stderr has every TEXT
    local js=$1
    shift
    printf '%s\n' "$js" >"$tmp/bad.json"
    expect 1 "$TERN" collective all-reduce --machine "$tmp/bad.json" --sizes 1MiB
    for t in "$@"; do contains "$tmp/err" "$t"; done
}
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2, "efa_bw": 3}' \
    "$tmp/bad.json" "field 'efa_bw'" "unknown field"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 0}' "field 'count'" "1..100000, got 0"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2.5}' "field 'count'" "integer"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge"}' "field 'count'" "missing"
refuse '{"schema": "tern-cluster/1", "machine": "trn2-ultraserver", "count": 100000}' \
    "field 'count'" "100000 x 64 chips" "above the limit"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2,
 "efa": {"bandwidth_per_instance": {"value": -800, "unit": "Gbps"}}}' \
    "field 'efa.bandwidth_per_instance.value'" "must be > 0, got -800"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2,
 "efa": {"latency": {"value": -1, "unit": "us"}}}' "field 'efa.latency.value'" "must be >= 0, got -1"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2, "efa": {"note": 5}}' \
    "field 'efa.note'" "non-empty string"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2,
 "efa": {"latency": {"value": 15, "unit": "parsecs"}}}' "field 'efa.latency.unit'" '"parsecs"'
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2,
 "efa": {"latency": {"value": 15, "unit": "us", "colour": "red"}}}' "field 'efa.latency.colour'" "unknown field"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1, "topology": "3d-torus 2x2x2"}' \
    "field 'topology'" "8 chips, but the machine has 16"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1, "topology": "3d-torus 4194304x4194304x4194304"}' \
    "field 'topology'" "but the machine has 16"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1, "topology": "hypercube 4"}' \
    "field 'topology'" "expected ring N"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 1,
 "neuronlink": {"scaleup_bandwidth_per_chip": {"value": 1, "unit": "GB/s"}}}' \
    "field 'neuronlink.scaleup_bandwidth_per_chip'" "no scale-up link"
refuse '{"schema": "tern-cluster/1", "machine": "nosuch-instance", "count": 1}' "field 'machine'" "nosuch-instance"
refuse '{"schema": "tern-cluster/1", "machine": "trainium1", "count": 2}' "field 'machine'" "is a chip"
refuse '{"schema": "tern-cluster/2", "machine": "trn1.32xlarge", "count": 2}' "field 'schema'" "tern-cluster/2"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2,}' \
    "$tmp/bad.json" "malformed JSON at line 1" "(byte "
# 7. the size limit (docs/multichip.md "Size limit"): a cluster whose fabric and all-rank collective would need more
# host memory than 16 GiB is refused before anything large is allocated (the refusals run under a 1 GiB address-space
# cap), naming the machine, the count, the bytes and the limit; the same cluster with --nodes 2 runs, and so does a
# cluster of 1024 instances (one rank per instance keeps this test short).
# AddressSanitizer reserves terabytes of shadow address space at start, so under a sanitizer build the cap is left off
# (the refusals and their messages are still checked; the plain build checks that nothing large is allocated).
if ldd "$TERN" 2>/dev/null | grep -q libasan; then
    limited() { "$@"; }
else
    limited() { (ulimit -v 1048576; "$@"); }
fi
expect 1 limited "$TERN" collective all-reduce --machine 100000xtrn1.32xlarge --sizes 1MiB
for t in "fabric '100000xtrn1.32xlarge'" "100000 x trn1.32xlarge" "3200000 ranks" "74.5 TiB of host memory" \
    "(81944723200360 bytes)" "above the limit of 16.0 GiB (17179869184 bytes" "--nodes"; do contains "$tmp/err" "$t"; done
expect 1 limited "$TERN" collective all-reduce --machine 2048xtrn1.32xlarge --sizes 1MiB
contains "$tmp/err" "65536 ranks): the fabric and the simulation of a collective over every rank need 32.5 GiB"
refuse '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 100000}' "fabric '100000xtrn1.32xlarge'" \
    "74.5 TiB" "above the limit of 16.0 GiB"
expect 1 limited "$TERN" plan --model "$DATA/models/gpt2.json" --cluster 100000xtrn1.32xlarge --seq 1024 \
    --global-batch 64 --quiet
contains "$tmp/err" "above the limit of 16.0 GiB"
expect 0 limited "$TERN" collective all-reduce --machine 100000xtrn1.32xlarge --nodes 2 --sizes 1MiB --json
contains "$tmp/out" '"ranks":64,"nodes":2'
expect 0 "$TERN" collective all-reduce --machine 1024xtrn1.32xlarge --ranks 1024 --sizes 1MiB --json
contains "$tmp/out" '"ranks":1024,"nodes":1024'
printf '%s\n' '{"schema": "tern-cluster/1", "machine": "trn1.32xlarge", "count": 2}' >"$tmp/good.json"
expect 0 "$TERN" collective all-reduce --machine "$tmp/good.json" --sizes 1MiB # the same file without the comma
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
