#!/usr/bin/env bash
# Data-parallel training over MPI processes (docs/training.md, "Over MPI processes"): `mpirun -np K tern train
# --cores N` spreads the ranks' chips over K processes; each runs only its own ranks' programs, the gradient
# collectives cross processes, and process 0 alone prints and writes. For K = 1, 2 and 4 the whole stdout (losses,
# norms, predicted times, the data-parallel summary), the trained ONNX and the checkpoint are byte for byte those of
# the run without mpirun:
# - plain data parallelism (the attention block of the multi-instance tests, 8 ranks of trn1.32xlarge, AdamW), and
#   with TERN_THREADS=2 under K = 2;
# - ZeRO-1 with clipping, with LAMB, and with --accumulate 2; the fixed reduction tree; pure BF16 (bf16-sr);
# - a cluster: 64 ranks of 2xtrn1.32xlarge (the all-reduce crosses EFA), --json;
# - the BatchNorm CNN of test_train_dp_bn.sh (rank 0's running statistics reach every process), accumulated;
# - timing-only, 32 ranks;
# - a checkpoint written under K = 2 resumes under K = 4 to the one-process model;
# - tensor/pipeline layouts, each process holding whole data replicas: the 4-layer MLP of test_train_layout_timing.sh
#   on tp=2,pp=2,dp=4,micro=2 (K = 1, 2, 4, clipped) and pp=2,vpp=2,dp=4 (K = 2, 4), the GPT of gpt_ref.py (heads
#   and MLPs split, the tied embedding in the first and last stage) on tp=2,pp=2,dp=4 (K = 2, 4) and with sequence
#   parallelism (sp=1, K = 2), grouped-query
#   attention on tp=4,dp=2 (replicated key/value heads, K = 2), timing-only, ZeRO-1 on tp=2,pp=2,dp=4 (K = 2, 4) and
#   on pp=2,vpp=2,dp=4 (K = 2), and a layout checkpoint of K = 2 resumed under K = 4;
# - ZeRO-1 with the GPT's tied embedding and clipping (K = 2);
# - training-mode Dropout (the GPT of gpt_dropout.py): data parallelism over 4 ranks and tp=2,pp=2,dp=4,sp=1 (K = 2),
#   --accumulate 2 on tp=2,dp=4 with ignored labels (K = 2),
#   and sequence parallelism inside a row (its position-free variant, tp=2,dp=4,sp=1 on one-row micro-batches, K = 2).
# Failures: a class label out of range in rank 5's rows (met by one process only) ends every process with the
# one-process message and exit status, and in data replica 3's rows of a layout likewise; a process that cannot read
# its data (an MPMD launch) stops the run with its own message; more processes than chips, one core, a layout with
# one data replica and a replica spanning processes are refused naming the rule.
set -u
TERN=${1:?usage: test_train_mpi.sh TERN_BIN}
. "$(dirname "$0")/../mpi_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3

"$PY" "$here/../attention_block.py" "$tmp" 128 || { echo "NOT OK: the test model could not be made" >&2; exit 1; }
cd "$tmp" || exit 1

same() { # same NAME K: the K-process run's stdout, model and checkpoint against the one-process run's
    local n=$1 k=$2
    if cmp -s "$n.0.txt" "$n.$k.txt"; then ok; else bad "$n, mpirun -np $k: stdout differs: $(diff "$n.0.txt" "$n.$k.txt" | head -6)"; fi
    if [ -f "$n.0.onnx" ]; then
        if cmp -s "$n.0.onnx" "$n.$k.onnx"; then ok; else bad "$n, mpirun -np $k: the trained ONNX differs"; fi
    fi
    if [ -f "ck_$n.0/checkpoint.tck" ]; then
        if cmp -s "ck_$n.0/checkpoint.tck" "ck_$n.$k/checkpoint.tck"; then ok; else bad "$n, mpirun -np $k: the checkpoint differs"; fi
    fi
}
case_() { # case_ NAME "K..." ARGS...: one process, then mpirun -np K for each K; -o and --checkpoint unless timing-only
    local n=$1 ks=$2
    shift 2
    local files=()
    case " $* " in *" --timing-only "*) ;; *) files=(-o "$n.@.onnx" --checkpoint "ck_$n.@") ;; esac
    expect 0 "$TERN" train "$@" "${files[@]//@/0}"
    sed "s/\.0\.onnx$/.K.onnx/" "$tmp/out" >"$n.0.txt"
    for k in $ks; do
        expect 0 "${MPI[@]}" -np "$k" "$TERN" train "$@" "${files[@]//@/$k}"
        sed "s/\.$k\.onnx$/.K.onnx/" "$tmp/out" >"$n.$k.txt"
        same "$n" "$k"
    done
}
A=(m.onnx --data x.npy --labels y.npy --precision fp32 --steps 3)
case_ dp "1 2 4" "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8
contains dp.0.txt "data parallel: 8 ranks on trn1.32xlarge, 2 rows each"
contains dp.0.txt "step 3/3: loss "
# the host thread count changes nothing either
expect 0 env TERN_THREADS=2 "${MPI[@]}" -np 2 "$TERN" train "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8
if cmp -s <(grep -v '^wrote' dp.0.txt) "$tmp/out"; then ok; else bad "TERN_THREADS=2, mpirun -np 2: stdout differs"; fi
case_ zero "1 2 4" "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8 --zero 1 --clip-norm 0.5
contains zero.0.txt "optimizer state: "
case_ lamb "4" "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8 --zero 1 --optimizer lamb --clip-norm 0.5
case_ accum "2 4" "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8 --zero 1 --accumulate 2
case_ exact "2" "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8 --dp-exact --dp-chunks 16
case_ bf16 "2" m.onnx --data x.npy --labels y.npy --steps 3 --precision bf16-sr --batch 16 --machine trn1.32xlarge --cores 8
case_ cluster "1 2 4" "${A[@]}" --batch 64 --machine 2xtrn1.32xlarge --cores 64 --json
contains cluster.0.txt '"ranks":64'
contains cluster.0.txt '"dp_algorithm":"hier"'
case_ timing "4" "${A[@]}" --batch 64 --machine trn1.32xlarge --cores 32 --timing-only
contains timing.0.txt "data parallel, last step: "

# BatchNorm: rank 0's running statistics, kept and written, reach every process's ranks
mkdir -p bn
if "$PY" "$here/digits_ref.py" bn 1 32 sgd 0.05 cnn-bn >bn/ref.txt 2>&1; then
    case_ bn "2 4" bn/mlp.onnx --data bn/x.npy --labels bn/y.npy --optimizer sgd --lr 0.05 --momentum 0.9 \
        --batch 16 --accumulate 2 --steps 3 --precision fp32 --machine trn1.32xlarge --cores 8
else
    bad "the BatchNorm CNN could not be made: $(tail -3 bn/ref.txt)"
fi

# a checkpoint written by 2 processes resumes under 4 to the model one process trains in one go (ZeRO-1: the state
# shards of every process are in it)
Z=("${A[@]}" --batch 16 --machine trn1.32xlarge --cores 8 --zero 1)
expect 0 "$TERN" train "${Z[@]}" --steps 5 -o whole.onnx
expect 0 "${MPI[@]}" -np 2 "$TERN" train "${Z[@]}" --steps 2 --checkpoint half
expect 0 "${MPI[@]}" -np 4 "$TERN" train "${Z[@]}" --steps 5 --resume half -o resumed.onnx
if cmp -s whole.onnx resumed.onnx; then ok; else bad "a checkpoint of 2 processes resumed under 4 differs from one process's run"; fi

# a failure only the process that runs rank 5 meets: every process ends, process 0 prints the one-process message
"$PY" -c "import numpy as np; y = np.load('y.npy'); y[16 + 11] = 17; np.save('ybad.npy', y)"
B=(m.onnx --data x.npy --labels ybad.npy --precision fp32 --steps 3 --batch 16 --machine trn1.32xlarge --cores 8)
expect 1 "$TERN" train "${B[@]}"
cp "$tmp/out" bad.0.txt
cp "$tmp/err" bad.0.err
contains bad.0.err "rank 5: train: step 2: labels row 1: class 17 outside [0, 10)"
for k in 2 4; do
    expect 1 "${MPI[@]}" -np $k "$TERN" train "${B[@]}"
    if cmp -s bad.0.txt "$tmp/out"; then ok; else bad "rank 5's failure, -np $k: stdout differs from one process's"; fi
    n=$(grep -c "^tern train: " "$tmp/err")
    if [ "$n" -eq 1 ] && grep -qxF "$(cat bad.0.err)" "$tmp/err"; then ok; else
        bad "rank 5's failure, -np $k: expected the one-process message once, got: $(head -c 400 "$tmp/err")"; fi
done
# a failure process 0 does not meet (an MPMD launch: process 1 cannot read its data) stops the run with its message
expect 1 "$TERN_MPIEXEC" --allow-run-as-root --oversubscribe -np 1 "$TERN" train "${A[@]}" --batch 16 \
    --machine trn1.32xlarge --cores 8 : -np 1 "$TERN" train m.onnx --data nothere.npy --labels y.npy --precision fp32 \
    --steps 3 --batch 16 --machine trn1.32xlarge --cores 8
contains "$tmp/err" "tern train: process 1 of 2 stopped (process 0 did not):"
contains "$tmp/err" "nothere.npy"
# refused
expect 1 "${MPI[@]}" -np 4 "$TERN" train "${A[@]}" --batch 16 --machine trn1.32xlarge --cores 4
contains "$tmp/err" "4 processes for the 2 chips that hold the 4 ranks of 'trn1.32xlarge': a process owns whole chips, so run at most 2"
[ "$(grep -c '^tern train' "$tmp/err")" -eq 1 ] && ok || bad "the refusal was printed more than once: $(cat "$tmp/err")"
expect 1 "${MPI[@]}" -np 2 "$TERN" train "${A[@]}" --batch 16
contains "$tmp/err" "2 MPI processes for 1 core: only data-parallel training (--cores N) spreads over processes"

# tensor/pipeline layouts: a process holds whole data replicas
"$PY" - <<'PYEOF' || bad "the MLP could not be made"
import numpy as np
import torch
torch.manual_seed(0)
nn = torch.nn
mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 128), nn.ReLU(),
                    nn.Linear(128, 10))
torch.onnx.export(mlp, torch.randn(1, 64), "mlp.onnx", input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
rng = np.random.default_rng(1)
np.save("mx.npy", rng.standard_normal((96, 64)).astype(np.float32))
y = rng.integers(0, 10, 96).astype(np.int64)
np.save("my.npy", y)
y[32 + 29] = 17  # step 2, data replica 3 (8 rows each), its second micro-batch
np.save("mybad.npy", y)
PYEOF
L=(mlp.onnx --data mx.npy --labels my.npy --batch 32 --precision fp32 --machine trn1.32xlarge --steps 3)
case_ tpp "1 2 4" "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --clip-norm 0.5
contains tpp.0.txt "layout tp=2,pp=2,dp=4 on trn1.32xlarge"
case_ vpp "2 4" "${L[@]}" --layout pp=2,vpp=2,dp=4,micro=2
case_ ltime "2" "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --timing-only --json
# ZeRO-1 in a layout: a process updates its replicas' blocks; the checkpoint (every block's state) is one process's
case_ lzero "2 4" "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --zero 1
contains lzero.0.txt "ZeRO-1: optimizer state in blocks over the data replicas"
case_ vzero "2" "${L[@]}" --layout pp=2,vpp=2,dp=4,micro=2 --zero 1
mkdir -p gpt
if "$PY" "$here/gpt_ref.py" gpt 1 2 1e-3 >gpt/ref.txt 2>&1; then
    case_ gpt "2 4" gpt/gpt.onnx --data gpt/x.npy --labels gpt/y.npy --batch 8 --precision fp32 --steps 2 \
        --machine trn1.32xlarge --layout tp=2,pp=2,dp=4,micro=2
    contains gpt.0.txt "tied weights"
    # ZeRO-1 with the tied embedding and clipping: every process's replicas update their blocks of the tied sums
    case_ gptzero "2" gpt/gpt.onnx --data gpt/x.npy --labels gpt/y.npy --batch 8 --precision fp32 --steps 2 \
        --machine trn1.32xlarge --layout tp=2,pp=2,dp=4,micro=2 --zero 1 --clip-norm 1
    # sequence parallelism: the norms on row shards, their gradients all-reduced over each tensor group
    case_ gptsp "2" gpt/gpt.onnx --data gpt/x.npy --labels gpt/y.npy --batch 16 --precision fp32 --steps 2 \
        --machine trn1.32xlarge --layout tp=2,pp=2,dp=4,micro=2,sp=1
    contains gptsp.0.txt "sequence-parallel norms' gradients"
else
    bad "the GPT could not be made: $(tail -3 gpt/ref.txt)"
fi
# training-mode Dropout: each process draws its replicas' and ranks' blocks of the one-core masks
mkdir -p gdrop
if "$PY" "$here/gpt_dropout.py" gdrop 8 >gdrop/gen.txt 2>&1; then
    case_ dropdp "2" gdrop/gpt.onnx --data gdrop/x.npy --labels gdrop/y.npy --batch 8 --precision fp32 --steps 2 \
        --machine trn1.32xlarge --cores 4
    case_ dropsp "2" gdrop/gpt.onnx --data gdrop/x.npy --labels gdrop/y.npy --batch 16 --precision fp32 --steps 2 \
        --machine trn1.32xlarge --layout tp=2,pp=2,dp=4,micro=2,sp=1
    # gradient accumulation under a layout, ignored labels normalised per micro-step
    case_ dropacc "2" gdrop/gpt.onnx --data gdrop/x.npy --labels gdrop/y.npy --batch 4 --accumulate 2 --precision fp32 \
        --steps 2 --machine trn1.32xlarge --layout tp=2,dp=4 --ignore-index 32
    # sequence parallelism inside a row (micro-batches of one row, the position-free GPT): positions' blocks per rank
    mkdir -p gnopos
    if "$PY" "$here/gpt_dropout.py" gnopos 1 nopos >gnopos/gen.txt 2>&1; then
        case_ droprow "2" gnopos/gpt.onnx --data gnopos/x.npy --labels gnopos/y.npy --batch 4 --precision fp32 \
            --steps 2 --machine trn1.32xlarge --layout tp=2,dp=4,sp=1
    else
        bad "the position-free GPT could not be made: $(tail -3 gnopos/gen.txt)"
    fi
else
    bad "the GPT with Dropout could not be made: $(tail -3 gdrop/gen.txt)"
fi
# grouped-query attention on tp=4 (key/value heads replicated over pairs of tensor ranks, their all-reduce)
"$PY" - <<'PYEOF' || bad "the GQA model could not be made"
import numpy as np
import torch
nn = torch.nn
class Attn(nn.Module):  # 4 query heads over 2 key/value heads, as test_train_tp_kv.sh's gqa
    def __init__(s, E=32, H=4, KV=2):
        super().__init__()
        s.H, s.KV, s.D = H, KV, E // H
        s.q, s.o, s.head = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, 10)
        s.k, s.v = nn.Linear(E, KV * s.D, bias=False), nn.Linear(E, KV * s.D)
        s.ln = nn.LayerNorm(E)
    def forward(s, x):
        B, S, E = x.shape
        D, n = s.D, s.H // s.KV
        h = s.ln(x)
        q = s.q(h).reshape(B, S, s.H, D).transpose(1, 2)
        rep = lambda t: t.reshape(B, S, s.KV, D).transpose(1, 2)[:, :, None].expand(B, s.KV, n, S, D).reshape(
            B, s.H, S, D)
        a = ((q @ rep(s.k(h)).transpose(-1, -2)) * D ** -0.5).softmax(-1)
        return s.head((x + s.o((a @ rep(s.v(h))).transpose(1, 2).reshape(B, S, E))).mean(1))
torch.manual_seed(0)
torch.onnx.export(Attn(), torch.randn(1, 8, 32), "gqa.onnx", input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}}, opset_version=17)
PYEOF
case_ gqa "2" gqa.onnx --data x.npy --labels y.npy --batch 8 --precision fp32 --steps 3 --machine trn1.32xlarge \
    --layout tp=4,dp=2
contains gqa.0.txt "replicated K/V heads' gradients"
expect 0 "$TERN" train "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --steps 4 -o lwhole.onnx
expect 0 "${MPI[@]}" -np 2 "$TERN" train "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --steps 2 --checkpoint lhalf
expect 0 "${MPI[@]}" -np 4 "$TERN" train "${L[@]}" --layout tp=2,pp=2,dp=4,micro=2 --steps 4 --resume lhalf -o lres.onnx
if cmp -s lwhole.onnx lres.onnx; then ok; else bad "a layout checkpoint of 2 processes resumed under 4 differs from one process's run"; fi
LB=(mlp.onnx --data mx.npy --labels mybad.npy --batch 32 --precision fp32 --machine trn1.32xlarge --steps 3
    --layout tp=2,pp=2,dp=4,micro=2)
expect 1 "$TERN" train "${LB[@]}"
cp "$tmp/out" lbad.0.txt
cp "$tmp/err" lbad.0.err
contains lbad.0.err "class 17 outside [0, 10)"
for k in 2 4; do
    expect 1 "${MPI[@]}" -np $k "$TERN" train "${LB[@]}"
    if cmp -s lbad.0.txt "$tmp/out"; then ok; else bad "replica 3's failure, -np $k: stdout differs from one process's"; fi
    if [ "$(grep -c "^tern train: " "$tmp/err")" -eq 1 ] && grep -qxF "$(cat lbad.0.err)" "$tmp/err"; then ok; else
        bad "replica 3's failure, -np $k: expected the one-process message once, got: $(head -c 400 "$tmp/err")"; fi
done
expect 1 "${MPI[@]}" -np 2 "$TERN" train "${L[@]}" --layout tp=2,pp=2
contains "$tmp/err" "2 MPI processes for a layout with 1 data replica (tp=2, pp=2): a process holds whole data replicas"
expect 1 "${MPI[@]}" -np 4 "$TERN" train "${L[@]}" --layout tp=2,pp=2,dp=2
contains "$tmp/err" "data replica 0 (ranks 0..3) would span processes 0 and 1"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
