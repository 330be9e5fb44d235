#!/usr/bin/env bash
# CLI test for `tern kernel` and `tern profile`: build the tutorial GEMM (and softmax, layernorm) programs from
# the command line, profile them in functional and timing-only mode (same predicted time), with --trace and
# --svg: the trace must be valid JSON (python3 -m json.tool) with the engine tracks and slices, the SVG
# well-formed XML (xml.dom.minidom); the summary names every metric. Exit codes: 1 for a bad program file, a
# failed run or an unwritable output, 2 for usage errors (unknown option, kernel, machine, bad number, no input).
set -u
TERN=${1:?usage: test_profile.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

expect() { # expect CODE CMD...: stdout/stderr kept in $tmp/out, $tmp/err
    local want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want; stderr: $(head -c 300 "$tmp/err")"; fi
}
contains() { # contains FILE TEXT
    if grep -qF -- "$2" "$1"; then ok; else bad "$(basename "$1") lacks '$2': $(head -c 300 "$1")"; fi
}
json_ok() {
    if "$PY" -m json.tool "$1" >/dev/null 2>"$tmp/jerr"; then ok; else bad "$1 is not valid JSON: $(head -c 300 "$tmp/jerr")"; fi
}
svg_ok() {
    if "$PY" -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" "$1" 2>"$tmp/xerr"; then ok
    else bad "$1 is not well-formed XML: $(head -c 300 "$tmp/xerr")"; fi
}

# --- tern kernel
expect 0 "$TERN" kernel gemm --m 256 --n 512 --k 384 -o "$tmp/gemm.tprog"
[ -s "$tmp/gemm.tprog" ] && ok || bad "tern kernel gemm wrote nothing"
contains "$tmp/out" "instructions for trn1.2xlarge"
expect 0 "$TERN" disasm "$tmp/gemm.tprog"
contains "$tmp/out" ".tensor lhsT"
contains "$tmp/out" "multiply_moving"
expect 0 "$TERN" kernel gemm --m 128 --n 128 --k 128 --dtype fp8_e4m3 --out-dtype fp32 --machine trainium2 -o "$tmp/g8.s"
contains "$tmp/g8.s" ".machine trainium2"
expect 0 "$TERN" kernel softmax --rows 200 --cols 300 -o "$tmp/softmax.tprog"
expect 0 "$TERN" kernel layernorm --rows 130 --cols 256 --dtype fp32 -o "$tmp/ln.tprog"
# a transformer's FFN in one kernel (the middle on chip) and as two kernels through HBM: fewer DMA bytes, less time
expect 0 "$TERN" kernel mlp --rows 128 --cols 768 --hidden 3072 --dtype fp32 --out-dtype fp32 -o "$tmp/mlp1.tprog"
expect 0 "$TERN" kernel mlp --rows 128 --cols 768 --hidden 3072 --dtype fp32 --out-dtype fp32 --two-kernels \
    -o "$tmp/mlp2.tprog"
for f in mlp1 mlp2; do
    expect 0 "$TERN" profile "$tmp/$f.tprog" --timing-only
    sed -n 's/^  total time *\([0-9.]*\) us.*/\1/p' "$tmp/out" > "$tmp/$f.us"
    awk '/^  DMA/ { for (i = 1; i < NF; i++) if ($(i + 1) == "MB,") print $i }' "$tmp/out" > "$tmp/$f.mb"
done
if awk -v a="$(cat "$tmp/mlp1.us")" -v b="$(cat "$tmp/mlp2.us")" -v c="$(cat "$tmp/mlp1.mb")" -v d="$(cat "$tmp/mlp2.mb")" \
    'BEGIN { exit !(a > 0 && a < b && c > 0 && c < d) }'; then ok; else
    bad "mlp: one kernel $(cat "$tmp/mlp1.us") us / $(cat "$tmp/mlp1.mb") MB, two $(cat "$tmp/mlp2.us") us / $(cat "$tmp/mlp2.mb") MB"; fi
# more rows than one row tile: two kernels, said so
expect 0 "$TERN" kernel mlp --rows 300 --cols 64 --hidden 100 --act relu -o "$tmp/mlp3.tprog"
contains "$tmp/out" "300 rows do not fit one kernel"
expect 0 "$TERN" kernel --help
contains "$tmp/out" "usage: tern kernel gemm"

# --- tern profile: functional, with trace and SVG
expect 0 "$TERN" profile "$tmp/gemm.tprog" --trace "$tmp/gemm.json" --svg "$tmp/gemm.svg" --seed 7
cp "$tmp/out" "$tmp/summary_functional"
for w in "profile of trn1.2xlarge" "total time" TensorE VectorE ScalarE GpSimdE SyncE DMA MFU HFU MBU \
    "average" "top instructions by time" multiply_moving "functional mode"; do
    contains "$tmp/summary_functional" "$w"
done
json_ok "$tmp/gemm.json"
svg_ok "$tmp/gemm.svg"
# the trace has the engine and queue tracks, matmul slices with operands, and waits; FLOPs match 2*M*N*K
"$PY" - "$tmp/gemm.json" >"$tmp/pyout" 2>&1 <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
assert "TensorE" in names and "VectorE" in names and "SyncE" in names, names
assert any(n.startswith("DMA q") for n in names), names
x = [e for e in ev if e.get("ph") == "X"]
mm = [e for e in x if e["name"] == "multiply_moving"]
assert mm and all("in0" in e["args"] and "dst" in e["args"] and e["dur"] > 0 for e in mm)
assert sum(e["args"].get("flops", 0) for e in mm) == 2 * 256 * 512 * 384
assert any(e["name"].startswith("wait s") and e["cat"] == "wait" for e in x), "no wait slices"
assert any(e["name"] == "dma_copy" and "bytes" in e["args"] for e in x)
assert t["otherData"]["aggregated"] is False
print("trace ok", len(x))
PY
if [ $? -eq 0 ]; then ok; else bad "trace content: $(cat "$tmp/pyout")"; fi

# timing-only predicts the same time
expect 0 "$TERN" profile "$tmp/gemm.tprog" --timing-only
contains "$tmp/out" "timing-only mode"
t_func=$(grep "total time" "$tmp/summary_functional")
t_time=$(grep "total time" "$tmp/out")
[ "$t_func" = "$t_time" ] && ok || bad "functional '$t_func' vs timing-only '$t_time'"

# other kernels, assembly input, a small limit that forces aggregation
expect 0 "$TERN" profile "$tmp/softmax.tprog" --svg "$tmp/softmax.svg"
contains "$tmp/out" "activation"
svg_ok "$tmp/softmax.svg"
expect 0 "$TERN" profile "$tmp/ln.tprog" --trace "$tmp/ln.json"
json_ok "$tmp/ln.json"
expect 0 "$TERN" profile "$tmp/g8.s" --trace "$tmp/g8.json" --max-trace-events 10
json_ok "$tmp/g8.json"
contains "$tmp/out" "aggregated"
contains "$tmp/g8.json" '"aggregated":true'
expect 0 "$TERN" profile "$tmp/gemm.tprog" --machine trn1.32xlarge --model-flops 1e6 --timing-only
contains "$tmp/out" "model 1e+06 FLOP"
expect 0 "$TERN" profile --help
contains "$tmp/out" "usage: tern profile"

# --- errors
echo "this is not a program" >"$tmp/junk.s"
expect 1 "$TERN" profile "$tmp/junk.s"
contains "$tmp/err" "junk.s"
expect 1 "$TERN" profile "$tmp/missing.tprog"
head -c 100 "$tmp/gemm.tprog" >"$tmp/trunc.tprog"
expect 1 "$TERN" profile "$tmp/trunc.tprog"
expect 1 "$TERN" profile "$tmp/gemm.tprog" --trace /nonexistent-dir/t.json
contains "$tmp/err" "/nonexistent-dir/t.json"
expect 1 "$TERN" profile "$tmp/gemm.tprog" --svg /nonexistent-dir/t.svg
expect 2 "$TERN" profile
expect 2 "$TERN" profile "$tmp/gemm.tprog" --bogus
expect 2 "$TERN" profile "$tmp/gemm.tprog" --machine no-such-machine
contains "$tmp/err" "unknown machine"
expect 2 "$TERN" profile "$tmp/gemm.tprog" --seed
expect 2 "$TERN" profile "$tmp/gemm.tprog" --seed abc
expect 2 "$TERN" profile "$tmp/gemm.tprog" "$tmp/gemm.tprog"
printf '.engine sync\n    nop\n    halt\n' >"$tmp/nomachine.s"
expect 2 "$TERN" profile "$tmp/nomachine.s"
contains "$tmp/err" "give --machine"
expect 0 "$TERN" profile "$tmp/nomachine.s" --machine trainium2
contains "$tmp/out" "profile of trainium2"
expect 2 "$TERN" kernel
expect 2 "$TERN" kernel conv --m 1 -o "$tmp/x"
expect 2 "$TERN" kernel gemm --m 128 --n 128 -o "$tmp/x.tprog"
contains "$tmp/err" "--k are required"
expect 2 "$TERN" kernel gemm --m 0 --n 128 --k 128 -o "$tmp/x.tprog"
expect 2 "$TERN" kernel gemm --m 12x --n 128 --k 128 -o "$tmp/x.tprog"
expect 2 "$TERN" kernel gemm --m 128 --n 128 --k 128 --dtype int8 -o "$tmp/x.tprog"
expect 2 "$TERN" kernel gemm --m 128 --n 128 --k 128 --dtype nonsense -o "$tmp/x.tprog"
expect 2 "$TERN" kernel gemm --m 128 --n 128 --k 128
expect 2 "$TERN" kernel gemm --m 128 --n 128 --k 128 --machine nowhere -o "$tmp/x.tprog"
expect 2 "$TERN" kernel softmax --rows 4 --cols 4 --eps 1 -o "$tmp/x.tprog"
expect 1 "$TERN" kernel gemm --m 128 --n 128 --k 128 -o /nonexistent-dir/x.tprog

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
