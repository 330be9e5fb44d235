#!/usr/bin/env bash
# `tern collective` spread over MPI processes (docs/multichip.md, "MPI"): for all-reduce, all-gather,
# reduce-scatter, all-to-all and all-to-allv over trn1.32xlarge and 2xtrn1.32xlarge, the --json rows (picoseconds,
# algorithm, mode and the hash of every rank's result bits) must be identical without mpirun and under
# `mpirun -np K` for K = 1, 2 and 4, and --check must pass under 4 processes. Only process 0 prints. Bad input:
# processes that disagree on the size, dtype or operation (MPMD launches) fail naming the ranks and values; a
# process that runs fewer collectives (a deadlock) is named within the join timeout instead of hanging; more
# processes than chips is refused; a process killed mid-sweep ends the run on every process. The Trn2 machines,
# explicit permute pairs, send-recv and all-to-allv with displacements give the same rows for K = 1, 2 and 4 too.
# CMake passes mpirun as TERN_MPIEXEC when the build has MPI; without it this test exits 77, which CTest reports as
# skipped.
set -u
TERN=${1:?usage: test_collective_mpi.sh path/to/tern}
. "$(dirname "$0")/../mpi_lib.sh"

rows_equal() { # file file: the same rows apart from the process count
    python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["rows"] and a["rows"] == b["rows"], (a["rows"][:2], b["rows"][:2])
assert any("hash" in r for r in a["rows"]) and any(r["mode"] == "timing-only" for r in a["rows"]), a["rows"]
EOF
}

for m in trn1.32xlarge 2xtrn1.32xlarge; do
    for op in all-reduce all-gather reduce-scatter all-to-all all-to-allv; do
        args=(collective "$op" --machine "$m" --sizes 4KiB:16MiB --step 64 --json)
        if ! "$TERN" "${args[@]}" >"$tmp/k0.json" 2>"$tmp/err"; then
            bad "$m $op without mpirun: $(head -c 300 "$tmp/err")"
            continue
        fi
        for k in 1 2 4; do
            if "${MPI[@]}" -np $k "$TERN" "${args[@]}" >"$tmp/k$k.json" 2>"$tmp/err"; then
                if rows_equal "$tmp/k0.json" "$tmp/k$k.json" 2>"$tmp/diff"; then ok; else
                    bad "$m $op: -np $k rows differ from one process: $(tail -c 400 "$tmp/diff")"; fi
                procs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["processes"])' "$tmp/k$k.json")
                [ "$procs" = "$k" ] && ok || bad "$m $op: -np $k reports $procs processes"
            else
                bad "$m $op: mpirun -np $k failed: $(head -c 300 "$tmp/err")"
            fi
        done
        if "${MPI[@]}" -np 4 "$TERN" collective "$op" --machine "$m" --sizes 8KiB:32KiB --check >"$tmp/out" 2>"$tmp/err"; then
            n=$(grep -c ' ok$' "$tmp/out")
            [ "$n" -eq 3 ] && ok || bad "$m $op --check under 4 processes: $n of 3 rows ok: $(cat "$tmp/out")"
            n=$(grep -c '^tern collective' "$tmp/out")
            [ "$n" -eq 1 ] && ok || bad "$m $op: $n headers printed (only process 0 prints)"
        else
            bad "$m $op --check under 4 processes failed: $(head -c 300 "$tmp/err")"
        fi
    done
done

# replica groups and permute over processes: same rows as one process
for extra in "all-reduce --ranks 8 --groups 0,2,4,6;1,3,5,7 --reduce max" "permute" "all-reduce --algorithm ring --dtype bf16"; do
    # shellcheck disable=SC2086
    "$TERN" collective $extra --machine trn1.32xlarge --sizes 4KiB:1GiB --step 64 --json >"$tmp/a.json" 2>"$tmp/err"
    # shellcheck disable=SC2086
    if "${MPI[@]}" -np 2 "$TERN" collective $extra --machine trn1.32xlarge --sizes 4KiB:1GiB --step 64 --json >"$tmp/b.json" 2>>"$tmp/err" &&
        rows_equal "$tmp/a.json" "$tmp/b.json" 2>>"$tmp/err"; then ok; else bad "$extra under 2 processes: $(tail -c 300 "$tmp/err")"; fi
done

# the Trn2 machines, explicit permute pairs, send/receive and all-to-allv with displacements: the same rows for
# K = 1, 2 and 4 (a ring all-to-allv with empty blocks on trn2.48xlarge once differed by 469 ps between one process
# and the distributed engine)
for run in "trn2.48xlarge all-to-allv --algorithm ring --ranks 16" "trn2.48xlarge all-to-allv --displs reversed" \
    "trn2.48xlarge permute --pairs 0:63,63:0,17:40,40:17,5:6" "trn2-ultraserver all-reduce" \
    "trn2-ultraserver send-recv" "2xtrn1.32xlarge all-to-allv --displs reversed --algorithm ring" \
    "trn2.48xlarge all-reduce" "trn2.48xlarge reduce-scatter --algorithm kangaring --reduce min"; do
    set -- $run
    m=$1
    shift
    # shellcheck disable=SC2086
    "$TERN" collective "$@" --machine $m --sizes 4KiB:128MiB --step 32 --json >"$tmp/a.json" 2>"$tmp/err"
    for k in 1 2 4; do
        # shellcheck disable=SC2086
        if "${MPI[@]}" -np $k "$TERN" collective "$@" --machine $m --sizes 4KiB:128MiB --step 32 --json >"$tmp/b.json" 2>>"$tmp/err" &&
            rows_equal "$tmp/a.json" "$tmp/b.json" 2>>"$tmp/err"; then ok; else bad "$run under $k processes: $(tail -c 300 "$tmp/err")"; fi
    done
done

expect_fail() { # message, then the mpirun arguments
    local want=$1
    shift
    if "${MPI[@]}" "$@" >"$tmp/out" 2>"$tmp/err"; then
        bad "$* succeeded, expected a failure naming '$want'"
    elif grep -qF -- "$want" "$tmp/err"; then ok; else
        bad "$*: stderr lacks '$want': $(head -c 400 "$tmp/err")"
    fi
}
T=("$TERN" collective)
expect_fail "all-reduce #1: ranks disagree on the count: ranks 0..15 pass 256 elements, ranks 16..31 pass 512 elements" \
    -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB : -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 2KiB
expect_fail "ranks disagree on the dtype: ranks 0..15 pass fp32, ranks 16..31 pass bf16" \
    -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB : -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB --dtype bf16
expect_fail "ranks disagree on the operation: ranks 0..15 pass all-reduce, ranks 16..31 pass all-gather" \
    -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB : -np 1 "${T[@]}" all-gather --machine trn1.32xlarge --sizes 1KiB
start=$(date +%s)
# (a timeout long enough that the first join, which waits for both processes to start, never meets it on a loaded
# host; the bounds on the time taken only catch a hang: mpi_lib.sh's timeout ends a real one)
expect_fail "all-reduce #2 (fp32, 512 elements): ranks 16..31 never joined: process 1 of 2 did not arrive within 10000 ms" \
    -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB:2KiB --join-timeout 10 : \
    -np 1 "${T[@]}" all-reduce --machine trn1.32xlarge --sizes 1KiB --join-timeout 10
took=$(($(date +%s) - start))
[ "$took" -lt 120 ] && ok || bad "the deadlock took $took s to be reported (timeout 10 s)"
# a tern process killed in the middle of a sweep (after its first rows): Open MPI ends the run on every process,
# naming the process and the signal; nobody is left waiting. The kill follows the first row in the output (process
# 0 prints the rows), not a clock: on a loaded host starting the two processes can take longer than any fixed wait.
start=$(date +%s)
: >"$tmp/out"
if "${MPI[@]}" -np 1 "$TERN" collective all-reduce --machine 2xtrn1.32xlarge --sizes 8B:1GiB --check : \
    -np 1 sh -c 'o=$1; shift; (i=0; until grep -q " ok$" "$o" || [ $i -ge 1200 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 $$) & exec "$@"' sh "$tmp/out" "$TERN" collective all-reduce --machine 2xtrn1.32xlarge --sizes 8B:1GiB --check \
    >"$tmp/out" 2>"$tmp/err"; then
    bad "a killed process: the run succeeded"
else
    contains "$tmp/err" "exited on signal 9"
    n=$(grep -c ' ok$' "$tmp/out")
    [ "$n" -ge 1 ] && ok || bad "the killed run printed no row before the kill: $(head -c 300 "$tmp/out")"
fi
took=$(($(date +%s) - start))
[ "$took" -lt 180 ] && ok || bad "the killed process took $took s to end the run"
expect_fail "2 processes for the 1 chip that hold the 2 ranks of 'trn1.32xlarge'" \
    -np 2 "${T[@]}" all-reduce --machine trn1.32xlarge --ranks 2 --sizes 1KiB
n=$(grep -c "processes for the" "$tmp/err")
[ "$n" -eq 1 ] && ok || bad "the refusal was printed $n times (only process 0 prints)"

# every command but collective, launch, run and train refuses to run as K copies under mpirun
expect_fail "tern info: started by mpirun with 2 processes, but only \`tern collective\`, \`tern launch\`, \`tern run\` and \`tern train\` run over MPI processes" \
    -np 2 "$TERN" info trn1

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
