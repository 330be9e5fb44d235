#!/usr/bin/env bash
# The two crash inputs of issue 10, kept as regressions: each must give a clear error and exit 1, never a signal.
#  1. An executable whose input (or output) has dims [2048, 9, 307, 2857, 6529, 43691]: 2^62 + 2048 elements, whose
#     fp32 bytes wrap 64 bits to 8192 -- the size of the program's real tensor -- so every check passed and `tern run`
#     died with SIGSEGV. Made here: a Relu model with shape [2048, 1, 1, 1, 1, 1] is compiled, the shape record is
#     found by its bytes (six little-endian int64) and replaced, and the CRC-32 at offset 12 (over bytes 16..end) is
#     recomputed, so the decoder's own size rule is what refuses it.
#  2. A memset whose four free dims are [step 0, count 65536]: 65536^4 = 2^64 elements wrapped to 0, the executor
#     allocated nothing and walked the real pattern (heap over-read under `tern profile`). The rules refuse it; a
#     step-0 broadcast within tern's element limit still runs.
# Gets build/tern as $1.
set -u
tern=${1:?usage: test_crash_inputs.sh path/to/tern}
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass+1)); }
bad() { echo "NOT OK: $*"; fail=$((fail+1)); }
expect() { # expect CODE TEXT CMD...: exit code CODE (not a signal) and TEXT in stderr
    local want=$1 text=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want; stderr: $(head -c 400 "$tmp/err")"; fi
    if [ -z "$text" ] || grep -qF -- "$text" "$tmp/err"; then ok; else bad "$*: stderr lacks '$text': $(head -c 400 "$tmp/err")"; fi
}

# ---- 1. the executable ----
$py - "$tmp" <<'PY' || { echo "NOT OK: cannot make the model"; exit 1; }
import sys, onnx
from onnx import helper, TensorProto
vi = helper.make_tensor_value_info
shape = [2048, 1, 1, 1, 1, 1]
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu6", [vi("x", TensorProto.FLOAT, shape)],
                      [vi("y", TensorProto.FLOAT, shape)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1] + "/relu6.onnx")
PY
expect 0 "" "$tern" compile "$tmp/relu6.onnx" -o "$tmp/relu6.tern"
expect 0 "" "$tern" run "$tmp/relu6.tern" # the unpatched executable runs
for which in 0 1; do # 0: the input's record, 1: the output's
    $py - "$tmp/relu6.tern" "$tmp/crash$which.tern" "$which" <<'PY' || bad "cannot patch record $which"
import sys, struct, zlib
b = bytearray(open(sys.argv[1], "rb").read())
old = struct.pack("<6q", 2048, 1, 1, 1, 1, 1)
new = struct.pack("<6q", 2048, 9, 307, 2857, 6529, 43691)
hits = [i for i in range(len(b) - len(old) + 1) if b[i:i + len(old)] == old]
assert len(hits) == 2, f"expected the input's and the output's shape records, found {len(hits)}"
i = hits[int(sys.argv[3])]
b[i:i + len(new)] = new
b[12:16] = struct.pack("<I", zlib.crc32(bytes(b[16:])) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(b)
PY
    name=$([ "$which" = 0 ] && echo x || echo y)
    expect 1 "'$name': dimension product 2048*9*307*2857*6529*43691 x 4 bytes overflows 64 bits" \
        "$tern" run "$tmp/crash$which.tern"
done

# A .npy whose shape's element count wraps the same way (its fp32 bytes to 8192) is refused by the reader.
$py - "$tmp/wrap.npy" <<'PY' || bad "cannot write wrap.npy"
import sys
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2048, 9, 307, 2857, 6529, 43691), }"
h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + bytes(8192))
PY
expect 1 "wrap.npy: dimension product 2048*9*307*2857*6529*43691 x 4 bytes overflows 64 bits" \
    "$tern" run "$tmp/relu6.tern" --input "x=$tmp/wrap.npy"

# ---- 2. the memset ----
cat >"$tmp/memset.s" <<'ASM'
.machine trn1
.engine vector
    memset dst=sbuf[0:1]+0:fp32[[0,65536],[0,65536],[0,65536],[0,65536]] imm0=1.0
ASM
expect 0 "" "$tern" asm "$tmp/memset.s" -o "$tmp/memset.tprog" # representable: the formats carry any count
expect 1 "vector #0 (memset): operand dst: 4 free dimensions [65536 x 65536 x 65536 x 65536] x 1 partitions: element count overflows 64 bits" \
    "$tern" profile "$tmp/memset.tprog"
expect 1 "element count overflows 64 bits" "$tern" profile "$tmp/memset.s"
expect 1 "element count overflows 64 bits" "$tern" profile "$tmp/memset.tprog" --timing-only
# Within 64 bits but above tern's per-instruction limit (2^32 - 1 elements): refused, naming the limit.
sed 's/\[\[0,65536\],\[0,65536\],\[0,65536\],\[0,65536\]\]/[[0,65536],[0,65536]]/' "$tmp/memset.s" >"$tmp/limit.s"
expect 1 "4294967296 elements, above tern's per-instruction limit of 4294967295" "$tern" profile "$tmp/limit.s"
# A step-0 broadcast within the limit stays legal: 128 partitions x 64 rereads of 512 fp32.
cat >"$tmp/bcast.s" <<'ASM'
.machine trn1
.engine vector
    memset dst=sbuf[0:128]+0:fp32[[0,64],[1,512]] imm0=1.0
ASM
expect 0 "" "$tern" profile "$tmp/bcast.s"
# A byte span larger than the memory: steps x counts reach past SBUF's bytes per partition.
cat >"$tmp/span.s" <<'ASM'
.machine trn1
.engine vector
    memset dst=sbuf[0:1]+0:fp32[[2147483647,3],[1,2]] imm0=1.0
ASM
expect 1 "operand dst: byte span of 17179869184 bytes (elements 0..4294967295 x 4 bytes) is larger than SBUF" "$tern" profile "$tmp/span.s"

echo "test_crash_inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
