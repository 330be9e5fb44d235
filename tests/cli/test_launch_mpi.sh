#!/usr/bin/env bash
# `tern launch` spread over MPI processes (docs/multichip.md, "Launches over MPI processes"): an SPMD program with
# an all-reduce, VectorE work beside it that outlasts it and shares an SBUF port with the GpSimdE step after it,
# and an all-gather over replica groups of 4, on 8 ranks of trn1.32xlarge (4 chips) and of 2xtrn1.32xlarge (EFA
# between the instances). The whole output (trn1: text and --json --timing-only, 2x: --json; picoseconds of
# every rank and collective, the hash of every rank's output bits) must be byte-identical without mpirun and
# under `mpirun -np K` for K = 1, 2 and 4; only process 0 prints. Failures: a process whose ranks fault ends the
# run on every process with the same message a single process gives for that rank; a process whose ranks never
# join a collective (an MPMD launch of a shorter program) is named as a deadlock, without a hang; a killed
# process ends the run (Open MPI's report); more processes than chips is refused once. CMake passes mpirun as
# TERN_MPIEXEC when the build has MPI; without it this test exits 77, which CTest reports as skipped.
set -u
TERN=${1:?usage: test_launch_mpi.sh path/to/tern}
. "$(dirname "$0")/../mpi_lib.sh"

# x -> x*2+1 -> all-reduce -> (+ itself, GpSimdE) -> all-gather (groups of 4); w -> 48 VectorE steps -> side,
# beside both: GpSimdE shares VectorE's SBUF port, so the times depend on committing in the one-process order
cat >"$tmp/a.s" <<'PROG'
.machine trn1.2xlarge
.semaphores 64
.tensor x input fp32 [128,256] @0x1000
.tensor w input fp32 [128,2048] @0x21000
.tensor pre scratch fp32 [128,256] @0x121000
.tensor red output fp32 [128,256] @0x141000
.tensor mid scratch fp32 [128,256] @0x161000
.tensor gat output fp32 [512,256] @0x181000
.tensor side output fp32 [128,2048] @0x201000

.engine vector
    tensor_scalar dst=sbuf[0:128]+0:fp32[[1,256]] in0=sbuf[0:128]+0:fp32[[1,256]] op0=mult imm0=2.0 op1=add imm1=1.0 wait=s5>=1 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 wait=s7>=1 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=0.5 op1=add imm1=-0.25 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] op0=mult imm0=1.5 op1=add imm1=-0.25 signal=s1

.engine gpsimd
    tensor_tensor dst=sbuf[0:128]+0x2400:fp32[[1,256]] in0=sbuf[0:128]+0x2400:fp32[[1,256]] in1=sbuf[0:128]+0x2400:fp32[[1,256]] op0=add wait=s8>=1 signal=s3

.engine sync
    dma_copy dst=sbuf[0:128]+0:fp32[[1,256]] in0=hbm[0:1]+0x1000:fp32[[256,128],[1,256]] signal=s5
    dma_copy dst=hbm[0:1]+0x121000:fp32[[256,128],[1,256]] in0=sbuf[0:128]+0:fp32[[1,256]] queue=1 wait=s1>=1 signal=s6
    collective dst=hbm[0:1]+0x141000:fp32[[256,128],[1,256]] in0=hbm[0:1]+0x121000:fp32[[256,128],[1,256]] op0=add wait=s6>=1 signal=s21
    dma_copy dst=sbuf[0:128]+0x400:fp32[[1,2048]] in0=hbm[0:1]+0x21000:fp32[[2048,128],[1,2048]] queue=2 signal=s7
    dma_copy dst=sbuf[0:128]+0x2400:fp32[[1,256]] in0=hbm[0:1]+0x141000:fp32[[256,128],[1,256]] queue=3 wait=s21>=1 signal=s8
    dma_copy dst=hbm[0:1]+0x161000:fp32[[256,128],[1,256]] in0=sbuf[0:128]+0x2400:fp32[[1,256]] queue=4 wait=s3>=1 signal=s9
    collective dst=hbm[0:1]+0x181000:fp32[[256,512],[1,256]] in0=hbm[0:1]+0x161000:fp32[[256,128],[1,256]] imm_i0=1 imm_i1=4 wait=s9>=1 signal=s21
    dma_copy dst=hbm[0:1]+0x201000:fp32[[2048,128],[1,2048]] in0=sbuf[0:128]+0x400:fp32[[1,2048]] queue=5 wait=s1>=49 signal=s10
PROG
# the same program without its second collective, and one whose load of w reads far outside HBM
grep -v 'imm_i1=4' "$tmp/a.s" >"$tmp/short.s"
sed 's/in0=hbm\[0:1\]+0x21000/in0=hbm[0:1]+0x7ff0000021000/' "$tmp/a.s" >"$tmp/bad.s"

for m in "trn1.32xlarge --ranks 8" "2xtrn1.32xlarge --ranks 8 --nodes 2"; do
    modes=("" "--json --timing-only")
    [ "${m%% *}" = 2xtrn1.32xlarge ] && modes=("--json") # (the test's time: the modes are the same code)
    for extra in "${modes[@]}"; do
        # shellcheck disable=SC2086
        args=(launch "$tmp/a.s" --machine $m $extra)
        if ! "$TERN" "${args[@]}" >"$tmp/k0" 2>"$tmp/err"; then
            bad "$m $extra without mpirun: $(head -c 300 "$tmp/err")"
            continue
        fi
        n=$(grep -c 'collective #\|"seq":' "$tmp/k0")
        [ "$n" -ge 1 ] && ok || bad "$m $extra: no collective in the output: $(head -c 300 "$tmp/k0")"
        for k in 1 2 4; do
            if "${MPI[@]}" -np $k "$TERN" "${args[@]}" >"$tmp/k$k" 2>"$tmp/err"; then
                if cmp -s "$tmp/k0" "$tmp/k$k"; then ok; else
                    bad "$m $extra: -np $k output differs from one process: $(diff "$tmp/k0" "$tmp/k$k" | head -c 600)"; fi
            else
                bad "$m $extra: mpirun -np $k failed: $(head -c 300 "$tmp/err")"
            fi
        done
    done
done


# permute with explicit pairs (0->5, 5->0, 3->7, 6->1, set by memsets inside the kernel: `tern launch` fills inputs
# with random values) across the EFA of 2xtrn1.32xlarge, and all-to-allv whose counts and displacements the kernel
# computes (iota, VectorE; tests/runtime/test_kernel_permute.c) over replica groups of 4 strided ranks (imm_i1=-4):
# the same output without mpirun and for K = 1, 2 and 4
cat >"$tmp/perm.s" <<'PROG'
.machine trn1.32xlarge
.semaphores 64
.tensor x input fp32 [128,64] @0x1000
.tensor pr scratch int32 [1,8] @0x9000
.tensor y output fp32 [128,64] @0x9040

.engine vector
    memset dst=sbuf[0:1]+0:int32[[1,1]] signal=s1
    memset dst=sbuf[0:1]+0x4:int32[[1,1]] imm0=5 signal=s1
    memset dst=sbuf[0:1]+0x8:int32[[1,1]] imm0=5 signal=s1
    memset dst=sbuf[0:1]+0xc:int32[[1,1]] signal=s1
    memset dst=sbuf[0:1]+0x10:int32[[1,1]] imm0=3 signal=s1
    memset dst=sbuf[0:1]+0x14:int32[[1,1]] imm0=7 signal=s1
    memset dst=sbuf[0:1]+0x18:int32[[1,1]] imm0=6 signal=s1
    memset dst=sbuf[0:1]+0x1c:int32[[1,1]] imm0=1 signal=s1

.engine sync
    dma_copy dst=hbm[0:1]+0x9000:int32[[8,1],[1,8]] in0=sbuf[0:1]+0:int32[[1,8]] wait=s1>=8 signal=s5
    collective dst=hbm[0:1]+0x9040:fp32[[64,128],[1,64]] in0=hbm[0:1]+0x1000:fp32[[64,128],[1,64]] in1=hbm[0:1]+0x9000:int32[[8,1],[1,8]] imm_i0=4 wait=s5>=1 signal=s21
PROG
cat >"$tmp/a2av.s" <<'PROG'
.machine trn1.32xlarge
.semaphores 64
.tensor x input fp32 [128,64] @0x1000
.tensor meta scratch int32 [12,4] @0x9000
.tensor y output fp32 [128,64] @0x90c0

.engine vector
    tensor_scalar dst=sbuf[0:4]+0:int32[[1,4]] in0=sbuf[0:4]+0:int32[[1,4]] op0=mult imm0=3.0 wait=s3>=1 signal=s1
    tensor_scalar dst=sbuf[0:4]+0x10:int32[[1,4]] in0=sbuf[0:4]+0x10:int32[[1,4]] op0=mult imm0=20.0 op1=add imm1=3.0 wait=s3>=2 signal=s1
    tensor_scalar dst=sbuf[0:4]+0x20:int32[[1,4]] in0=sbuf[0:4]+0x20:int32[[1,4]] op0=mult imm0=-50.0 op1=add imm1=151.0 wait=s3>=3 signal=s1

.engine gpsimd
    iota dst=sbuf[0:4]+0:int32[[1,4]] imm_i1=4 signal=s3
    iota dst=sbuf[0:4]+0x10:int32[[1,4]] signal=s3
    iota dst=sbuf[0:4]+0x20:int32[[1,4]] signal=s3

.engine sync
    dma_copy dst=hbm[0:1]+0x9000:int32[[4,4],[1,4]] in0=sbuf[0:4]+0:int32[[1,4]] wait=s1>=1 signal=s5
    dma_copy dst=hbm[0:1]+0x9040:int32[[4,4],[1,4]] in0=sbuf[0:4]+0x10:int32[[1,4]] queue=1 wait=s1>=2 signal=s6
    dma_copy dst=hbm[0:1]+0x9080:int32[[4,4],[1,4]] in0=sbuf[0:4]+0x20:int32[[1,4]] queue=2 wait=s1>=3 signal=s7
    sem_wait wait=s5>=1
    sem_wait wait=s6>=1
    collective dst=hbm[0:1]+0x90c0:fp32[[64,128],[1,64]] in0=hbm[0:1]+0x1000:fp32[[64,128],[1,64]] in1=hbm[0:1]+0x9000:int32[[4,12],[1,4]] imm_i0=261 imm_i1=-4 wait=s7>=1 signal=s21
PROG
for run in "perm.s --machine 2xtrn1.32xlarge --ranks 8 --nodes 2 --json" "a2av.s --machine trn1.32xlarge --ranks 8"; do
    # shellcheck disable=SC2086
    args=(launch "$tmp/"$run)
    if ! "$TERN" "${args[@]}" >"$tmp/k0" 2>"$tmp/err"; then
        bad "$run without mpirun: $(head -c 300 "$tmp/err")"
        continue
    fi
    cp "$tmp/k0" "$tmp/first_${run%%.s*}"
    n=$(grep -c 'permute direct\|"op":"permute"\|all-to-allv ring' "$tmp/k0")
    [ "$n" -eq 1 ] && ok || bad "$run: the collective is not in the output: $(head -c 300 "$tmp/k0")"
    for k in 1 2 4; do
        if "${MPI[@]}" -np $k "$TERN" "${args[@]}" >"$tmp/k$k" 2>"$tmp/err"; then
            if cmp -s "$tmp/k0" "$tmp/k$k"; then ok; else
                bad "$run: -np $k output differs from one process: $(diff "$tmp/k0" "$tmp/k$k" | head -c 600)"; fi
        else
            bad "$run: mpirun -np $k failed: $(head -c 300 "$tmp/err")"
        fi
    done
done
# the non-targets of the permute (ranks 2, 3, 4, 6) all hold zeros: one hash; the targets each their source's
if python3 - "$tmp/first_perm" <<'EOF'; then ok; else bad "permute: targets' and non-targets' hashes"; fi
import json, sys
h = {r["rank"]: r["hash"] for r in json.load(open(sys.argv[1]))["ranks_out"]}
assert len({h[2], h[3], h[4], h[6]}) == 1 and len({h[0], h[1], h[5], h[7], h[2]}) == 5, h
EOF

expect_fail() { # message, then the mpirun arguments
    local want=$1
    shift
    if "${MPI[@]}" "$@" >"$tmp/out" 2>"$tmp/err"; then
        bad "$* succeeded, expected a failure naming '$want'"
    elif grep -qF -- "$want" "$tmp/err"; then ok; else
        bad "$*: stderr lacks '$want': $(head -c 400 "$tmp/err")"
    fi
    n=$(grep -cF -- "$want" "$tmp/err")
    [ "$n" -eq 1 ] && ok || bad "'$want' printed $n times (only process 0 prints)"
}
M=(--machine trn1.32xlarge --ranks 8)
# a faulting rank: one process says it as a single process does for its rank 0, and every process ends
expect 1 "$TERN" launch "$tmp/bad.s" "${M[@]}"
contains "$tmp/err" "tern launch: rank 0: sync #3 (dma_copy): operand in0: offset 2250700302192640 beyond HBM"
start=$(date +%s)
expect_fail "tern launch: rank 4: sync #3 (dma_copy): operand in0: offset 2250700302192640 beyond HBM" \
    -np 1 "$TERN" launch "$tmp/a.s" "${M[@]}" : -np 1 "$TERN" launch "$tmp/bad.s" "${M[@]}"
expect_fail "tern launch: rank 6: sync #3 (dma_copy): operand in0: offset 2250700302192640 beyond HBM" \
    -np 3 "$TERN" launch "$tmp/a.s" "${M[@]}" : -np 1 "$TERN" launch "$tmp/bad.s" "${M[@]}"
# ranks of another process never join the all-gather
expect_fail "collective #2 (all-gather, fp32, 131072 elements): ranks 0, 1, 2, 3 joined, but these ranks never join it (a deadlock): rank 4 (its program ended); rank 5 (its program ended)" \
    -np 2 "$TERN" launch "$tmp/a.s" "${M[@]}" : -np 2 "$TERN" launch "$tmp/short.s" "${M[@]}"
# a process that dies outright (killed): Open MPI ends the run on every process, no one is left waiting
if "${MPI[@]}" -np 1 "$TERN" launch "$tmp/a.s" "${M[@]}" : -np 1 sh -c 'sleep 1; kill -9 $$' >"$tmp/out" 2>"$tmp/err"; then
    bad "a killed process: the run succeeded"
else
    contains "$tmp/err" "exited on signal 9"
fi
took=$(($(date +%s) - start))
[ "$took" -lt 120 ] && ok || bad "the failures took $took s to be reported (a bound that catches a hang only)"
expect_fail "tern launch: launch over 'trn1.32xlarge': 8 processes for the 4 chips that hold the 8 ranks of 'trn1.32xlarge'" \
    -np 8 "$TERN" launch "$tmp/a.s" "${M[@]}"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
