#!/usr/bin/env bash
# A kernel's collective sharing its ranks' HBM with a DMA (docs/multichip.md "Collectives and the kernel's DMA
# share the HBM") under MPI: an HBM-to-HBM copy of 32 MiB, then a 4 MiB fp32 ring all-reduce, on 8 ranks of
# trn1.32xlarge (4 chips). The collective is later than the copy, so it is delayed (its time grows against the
# program without the copy), and `tern launch --json --timing-only` is byte-identical without mpirun and for
# K = 1, 2 and 4 processes. Skipped (exit 77) without MPI.
set -u
TERN=${1:?usage: test_coll_hbm_mpi.sh path/to/tern}
. "$(dirname "$0")/../mpi_lib.sh"

cat >"$tmp/a.s" <<'PROG'
.machine trn1.2xlarge
.semaphores 64
.tensor x input fp32 [128,8192] @0x1000000
.tensor red output fp32 [128,8192] @0x2000000
.tensor b input fp32 [1024,8192] @0x4000000
.tensor c output fp32 [1024,8192] @0x8000000

.engine sync
    dma_copy dst=hbm[0:1]+0x8000000:fp32[[8192,1024],[1,8192]] in0=hbm[0:1]+0x4000000:fp32[[8192,1024],[1,8192]] signal=s5
    collective dst=hbm[0:1]+0x2000000:fp32[[8192,128],[1,8192]] in0=hbm[0:1]+0x1000000:fp32[[8192,128],[1,8192]] op0=add imm_i0=256 signal=s21
PROG
grep -v dma_copy "$tmp/a.s" >"$tmp/alone.s"
M=(--machine trn1.32xlarge --ranks 8 --timing-only --json)
expect 0 "$TERN" launch "$tmp/alone.s" "${M[@]}"
cp "$tmp/out" "$tmp/alone.json"
expect 0 "$TERN" launch "$tmp/a.s" "${M[@]}"
cp "$tmp/out" "$tmp/k0.json"
/usr/bin/python3 - "$tmp/alone.json" "$tmp/k0.json" <<'PY' && ok || bad "the collective is not delayed by the copy"
import json, sys
a, b = (json.load(open(p))["collectives"][0] for p in sys.argv[1:3])
print(f"all-reduce alone {a['time_ps'] / 1e6:.3f} us, behind the copy {b['time_ps'] / 1e6:.3f} us")
sys.exit(0 if b["time_ps"] > a["time_ps"] + 10_000_000 else 1)
PY
for K in 1 2 4; do
    expect 0 "${MPI[@]}" -np $K "$TERN" launch "$tmp/a.s" "${M[@]}"
    if cmp -s "$tmp/out" "$tmp/k0.json"; then ok; else bad "K=$K: output differs: $(head -c 300 "$tmp/out")"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
