#!/usr/bin/env bash
# CLI test for `tern collective`: the table, the --json shape (parsed by python3), --check on trn1.32xlarge,
# trn2.48xlarge, the Trn2 UltraServer and a 2-instance trn1 cluster for every operation (all-to-allv with and
# without displacements, permute by ring shift and by pairs, send-recv) and dtype, functional and
# timing-only giving the same times, the error cases (exit 1, message naming the thing, rule and value), and the
# published 2-rank trn1 all-reduce curve (nccom-test) within 15 % at every size.
set -u
TERN=${1:?usage: test_collective.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"

expect() {
    local want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want; stderr: $(head -c 300 "$tmp/err")"; fi
}
contains() { if grep -qF -- "$2" "$1"; then ok; else bad "$(basename "$1") lacks '$2': $(head -c 300 "$1")"; fi; }

# the table
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --sizes 8B:64KiB
contains "$tmp/out" "32 ranks on 1 instance"
contains "$tmp/out" "busbw(GB/s)"
contains "$tmp/out" "functional"
rows=$(grep -cE '^ +[0-9]+ ' "$tmp/out")
[ "$rows" -eq 14 ] && ok || bad "8B:64KiB with step 2 should print 14 rows, got $rows"
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --sizes 1MiB:1GiB --step 4
contains "$tmp/out" "timing-only"
rows=$(grep -cE '^ +[0-9]+ ' "$tmp/out")
[ "$rows" -eq 6 ] && ok || bad "1MiB:1GiB step 4 should print 6 rows, got $rows"

# --json shape, busbw = algbw x 2(r-1)/r, algorithm by size
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 8 --sizes 8B:128MiB --json
if python3 - "$tmp/out" <<'EOF'; then ok; else bad "json shape"; fi
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert len(rows) == 25, len(rows)
for r in rows:
    assert set(["bytes", "time_us", "algbw_gbps", "busbw_gbps", "algorithm"]) <= set(r), r
    assert abs(r["algbw_gbps"] - r["bytes"] / (r["time_us"] * 1e3)) <= 1e-3 * max(1, r["algbw_gbps"]), r
    assert abs(r["busbw_gbps"] - r["algbw_gbps"] * 2 * 7 / 8) <= 1e-3 * max(1, r["busbw_gbps"]), r
    want = "mesh" if r["bytes"] < 1e6 else "rdh" if r["bytes"] <= 56e6 else "ring"
    assert r["algorithm"] == want, (r, want)
times = [r["time_us"] for r in rows]
assert all(t >= 58.0 for t in times) and times[-1] > times[0], times
EOF

# --check everywhere, every operation (send-recv: rank 0 to the last rank; all-to-allv also with its blocks placed by
# displacements)
for m in "trn1.32xlarge" "trn2.48xlarge" "trn2-ultraserver --ranks 64 --nodes 4" "2xtrn1.32xlarge"; do
    for op in all-reduce all-gather reduce-scatter all-to-all all-to-allv "all-to-allv --displs reversed" \
        "all-to-allv --algorithm ring" permute send-recv "permute --pairs 0:3,3:1,1:0"; do
        # shellcheck disable=SC2086
        expect 0 "$TERN" collective $op --machine $m --sizes 4KiB:8KiB --check
        contains "$tmp/out" " ok"
        n=$(grep -c ' ok$' "$tmp/out")
        [ "$n" -eq 2 ] && ok || bad "$m $op: $n of 2 rows checked ok"
        if grep -q 'mismatch\|failed' "$tmp/err"; then bad "$m $op: $(cat "$tmp/err")"; else ok; fi
    done
    for a in ring mesh rdh kangaring; do
        # shellcheck disable=SC2086
        expect 0 "$TERN" collective all-reduce --machine $m --sizes 2KiB --algorithm $a --check --dtype bf16
        contains "$tmp/out" " ok"
    done
    for op in all-gather reduce-scatter; do
        # shellcheck disable=SC2086
        expect 0 "$TERN" collective $op --machine $m --sizes 8KiB --algorithm kangaring --check --dtype fp16 --reduce max
        contains "$tmp/out" " ok"
    done
    # the other dtypes and reductions (fp32 accumulation, rounded once per step to the dtype)
    for dr in "fp16 max" "fp8_e4m3 min" "fp8_e5m2 sum" "fp8_e4m3_neuron max" "int32 sum"; do
        set -- $dr
        # shellcheck disable=SC2086
        expect 0 "$TERN" collective reduce-scatter --machine $m --sizes 2KiB --algorithm ring --check --dtype $1 --reduce $2
        contains "$tmp/out" " ok"
    done
done
# KangaRing above 56 MB where every chip's four ranks (trn2 at LNC=2) are in the group, faster than the ring there;
# the ring on trn1 (two ranks per chip), whose published 2-rank curve is the ring's
"$TERN" collective all-reduce --machine trn2.48xlarge --sizes 16MiB:256MiB --step 4 --json >"$tmp/auto.json"
"$TERN" collective all-reduce --machine trn2.48xlarge --sizes 16MiB:256MiB --step 4 --json --algorithm ring >"$tmp/ring.json"
if python3 - "$tmp/auto.json" "$tmp/ring.json" <<'EOF'; then ok; else bad "trn2 auto above 56 MB: not kangaring, or not faster than ring"; fi
import json, sys
a, r = (json.load(open(p))["rows"] for p in sys.argv[1:])
assert [x["algorithm"] for x in a] == ["rdh", "kangaring", "kangaring"], a
assert all(x["time_us"] < y["time_us"] for x, y in zip(a[1:], r[1:])), (a, r)
EOF
# the hierarchical all-reduce where it applies: across the UltraServer's instances, and over replica groups that
# cross the instances of a cluster
expect 0 "$TERN" collective all-reduce --machine trn2-ultraserver --sizes 1MiB --algorithm hier --check --json
contains "$tmp/out" '"algorithm":"hier"'
contains "$tmp/out" '"check":"ok"'
expect 0 "$TERN" collective all-reduce --machine 2xtrn1.32xlarge --ranks 8 --nodes 2 --groups '0,1,4,5;2,3,6,7' --sizes 4KiB --check --json
contains "$tmp/out" '"algorithm":"hier"'
contains "$tmp/out" '"check":"ok"'
# across instances all-gather and reduce-scatter are hierarchical too: each instance's j-th ranks over EFA in
# parallel instead of one flat ring crossing EFA in one place
for op in all-gather reduce-scatter; do
    "$TERN" collective $op --machine 2xtrn1.32xlarge --sizes 8B:128MiB --step 64 --json >"$tmp/h.json"
    "$TERN" collective $op --machine 2xtrn1.32xlarge --sizes 8B:128MiB --step 64 --json --algorithm ring >"$tmp/r.json"
    if python3 - "$tmp/h.json" "$tmp/r.json" <<'EOF'; then ok; else bad "$op across instances: not hier, or not faster than the flat ring"; fi
import json, sys
h, r = (json.load(open(p))["rows"] for p in sys.argv[1:])
assert all(x["algorithm"] == "hier" for x in h), h
assert all(x["time_us"] < y["time_us"] for x, y in zip(h, r)), (h, r)
EOF
    expect 0 "$TERN" collective $op --machine 2xtrn1.32xlarge --ranks 8 --nodes 2 --groups '0,1,4,5;2,3,6,7' --sizes 4KiB --algorithm hier --check --reduce min
    contains "$tmp/out" " ok"
done
# a send/receive across EFA takes the EFA hop and bandwidth: slower than one inside a chip
"$TERN" collective send-recv --machine 2xtrn1.32xlarge --sizes 4MiB --json >"$tmp/far.json"
"$TERN" collective send-recv --machine 2xtrn1.32xlarge --pairs 0:1 --sizes 4MiB --json >"$tmp/near.json"
if python3 - "$tmp/far.json" "$tmp/near.json" <<'EOF'; then ok; else bad "send-recv across EFA not slower than on one chip"; fi
import json, sys
far, near = (json.load(open(p)) for p in sys.argv[1:])
assert far["operation"] == "send-recv" and far["rows"][0]["time_us"] > 1.5 * near["rows"][0]["time_us"], (far, near)
EOF
# displacements move no transfer: the same time as back to back
"$TERN" collective all-to-allv --machine trn2.48xlarge --sizes 64KiB:1MiB --step 4 --algorithm ring --json >"$tmp/p.json"
"$TERN" collective all-to-allv --machine trn2.48xlarge --sizes 64KiB:1MiB --step 4 --algorithm ring --displs reversed --json >"$tmp/r.json"
if python3 - "$tmp/p.json" "$tmp/r.json" <<'EOF'; then ok; else bad "all-to-allv: displacements changed the time or not the bits"; fi
import json, sys
p, r = (json.load(open(f))["rows"] for f in sys.argv[1:])
assert [x["time_ps"] for x in p] == [x["time_ps"] for x in r]
assert all(x["hash"] != y["hash"] for x, y in zip(p, r)), (p, r)
EOF
expect 0 "$TERN" collective all-reduce --machine 2xtrn1.32xlarge --sizes 16KiB --check --json
contains "$tmp/out" '"algorithm":"hier"'
contains "$tmp/out" '"check":"ok"'
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 8 --groups '0,1,2,3;4,5,6,7' --sizes 1KiB --check --reduce max
contains "$tmp/out" " ok"

# functional and timing-only give the same time
"$TERN" collective all-reduce --machine trn2.48xlarge --sizes 64KiB:256KiB --json >"$tmp/f.json"
"$TERN" collective all-reduce --machine trn2.48xlarge --sizes 64KiB:256KiB --json --timing-only >"$tmp/t.json"
if python3 - "$tmp/f.json" "$tmp/t.json" <<'EOF'; then ok; else bad "functional and timing-only times differ"; fi
import json, sys
f, t = (json.load(open(p))["rows"] for p in sys.argv[1:])
assert [r["mode"] for r in f] == ["functional"] * 3 and [r["mode"] for r in t] == ["timing-only"] * 3
assert [r["time_us"] for r in f] == [r["time_us"] for r in t]
EOF

# the 2-rank trn1 curve (nccom-test), within 15 %
expect 0 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 2 --sizes 8B:1GiB --json
if python3 - "$tmp/out" <<'EOF'; then ok; else bad "2-rank curve outside 15 %"; fi
import json, sys
rows = {r["bytes"]: r["time_us"] for r in json.load(open(sys.argv[1]))["rows"]}
pub = {1 << 20: 68, 4 << 20: 107, 16 << 20: 332, 64 << 20: 1214, 256 << 20: 4750, 1 << 30: 18930}
pub.update({b: 58 for b in rows if b < 64 * 1024})
bad = [(b, rows[b], t) for b, t in pub.items() if abs(rows[b] / t - 1) > 0.15]
assert not bad, bad
EOF

# errors: exit 1 and a message naming the thing, the rule and the value
expect 1 "$TERN" collective all-reduce --machine 2xnosuch --sizes 1KiB
contains "$tmp/err" "unknown instance 'nosuch'"
expect 1 "$TERN" collective all-reduce --machine "$tmp/none/cluster.json" --sizes 1KiB
contains "$tmp/err" "cannot read the machine or cluster file '$tmp/none/cluster.json' (No such file or directory)"
expect 1 "$TERN" collective all-reduce --machine 2x --sizes 1KiB
contains "$tmp/err" "cluster spec '2x'"
expect 1 "$TERN" collective all-reduce --machine 0xtrn1.32xlarge --sizes 1KiB
contains "$tmp/err" "at least 1"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --nodes 2 --sizes 1KiB
contains "$tmp/err" "--nodes 2: 'trn1.32xlarge' has only 1 instance"
expect 1 "$TERN" collective all-reduce --machine 2xtrn1.32xlarge --nodes 3 --sizes 1KiB
contains "$tmp/err" "--nodes 3"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 4 --groups '0,1;1,2' --sizes 1KiB
contains "$tmp/err" "rank 1 is in group 0 and in group 1"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 4 --groups '0,1,2' --sizes 1KiB
contains "$tmp/err" "partition"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --sizes 4QB
contains "$tmp/err" "--sizes '4QB'"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --sizes 1MiB:1KiB
contains "$tmp/err" "MIN <= MAX"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --sizes 6B
contains "$tmp/err" "not a whole number of fp32 elements"
expect 1 "$TERN" collective all-reduce --machine trainium1 --sizes 1KiB
contains "$tmp/err" "needs an instance or a system"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 6 --algorithm rdh --sizes 1KiB
contains "$tmp/err" "power-of-two group size, got 6"
expect 1 "$TERN" collective broadcast --machine trn1.32xlarge --sizes 1KiB
contains "$tmp/err" "operation 'broadcast'"
expect 1 "$TERN" collective all-to-all --machine trn1.32xlarge --algorithm rdh --sizes 1KiB
contains "$tmp/err" "all-to-all: algorithm 'rdh' not supported"
expect 1 "$TERN" collective all-reduce --machine trn1.32xlarge --ranks 8 --groups '0,2,4,6;1,3,5,7' --algorithm kangaring --sizes 1KiB
contains "$tmp/err" "algorithm kangaring pairs each chip's ranks (ring-consecutive members two by two on one chip), but the 4-rank groups do not pair up that way"
expect 1 "$TERN" collective permute --machine trn1.32xlarge --pairs 0:5,1:5 --sizes 1KiB
contains "$tmp/err" "permute pair 1 (1 -> 5): target already used by another pair"
expect 1 "$TERN" collective permute --machine trn1.32xlarge --pairs 0:40 --sizes 1KiB
contains "$tmp/err" "permute pair 0 (0 -> 40): rank out of range (fabric of 32 ranks)"
expect 1 "$TERN" collective permute --machine trn1.32xlarge --pairs 0-5 --sizes 1KiB
contains "$tmp/err" "--pairs '0-5': expected SOURCE:TARGET"
expect 1 "$TERN" collective send-recv --machine trn1.32xlarge --pairs 0:1,1:0 --sizes 1KiB
contains "$tmp/err" "send-recv: --pairs '0:1,1:0' has 2 pairs"
expect 1 "$TERN" collective all-to-allv --machine trn1.32xlarge --displs sideways --sizes 1KiB
contains "$tmp/err" "--displs 'sideways'"
expect 2 "$TERN" collective all-reduce --machine trn1.32xlarge --pairs 0:1 --sizes 1KiB
contains "$tmp/err" "only permute and send-recv take rank pairs"
expect 2 "$TERN" collective all-gather --machine trn1.32xlarge --displs reversed --sizes 1KiB
contains "$tmp/err" "only all-to-allv takes displacements"
expect 2 "$TERN" collective send-recv --machine trn1.32xlarge --ranks 4 --groups '0,1;2,3' --sizes 1KiB
contains "$tmp/err" "name ranks of the whole fabric"
expect 2 "$TERN" collective all-reduce --machine trn1.32xlarge --step 1
expect 2 "$TERN" collective all-reduce --machine trn1.32xlarge --bogus

# ring channels (docs/multichip.md): trn1.32xlarge's ring runs 4 channels (2 edge-disjoint Hamiltonian cycles of the
# 4x4 chip torus, both directions); a 256 MiB all-gather is faster than over the single ring (--channels 1); on one
# chip (2 ranks, no links) the two are the same to the picosecond; --check passes over the channels
"$TERN" collective all-gather --machine trn1.32xlarge --sizes 64MiB:256MiB --step 4 --algorithm ring --json >"$tmp/m.json"
"$TERN" collective all-gather --machine trn1.32xlarge --sizes 64MiB:256MiB --step 4 --algorithm ring --channels 1 --json >"$tmp/s.json"
"$TERN" collective all-reduce --machine trn1.32xlarge --ranks 2 --sizes 1MiB:256MiB --step 16 --json >"$tmp/m2.json"
"$TERN" collective all-reduce --machine trn1.32xlarge --ranks 2 --sizes 1MiB:256MiB --step 16 --channels 1 --json >"$tmp/s2.json"
if python3 - "$tmp/m.json" "$tmp/s.json" "$tmp/m2.json" "$tmp/s2.json" <<'EOF'; then ok; else bad "ring channels: not faster on trn1.32xlarge, or not equal on one chip"; fi
import json, sys
m, s, m2, s2 = (json.load(open(a))["rows"] for a in sys.argv[1:])
assert [x["channels"] for x in m] == [4, 4] and [x["channels"] for x in s] == [1, 1], (m, s)
for a, b in zip(m, s):
    assert a["time_ps"] < 0.8 * b["time_ps"], (a, b)
assert [x["time_ps"] for x in m2] == [x["time_ps"] for x in s2] and all(x["channels"] == 1 for x in m2), (m2, s2)
EOF
for op in all-reduce all-gather reduce-scatter; do
    expect 0 "$TERN" collective $op --machine trn1.32xlarge --sizes 4B:1MiB --step 32 --algorithm ring --check --dtype bf16
    contains "$tmp/out" "ring x4"
    n=$(grep -c ' ok$' "$tmp/out")
    [ "$n" -eq 4 ] && ok || bad "ring channels $op: $n of 4 rows checked ok"
done
expect 2 "$TERN" collective all-gather --machine trn1.32xlarge --channels 9 --sizes 1KiB
contains "$tmp/err" "--channels"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
