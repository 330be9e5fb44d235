#!/usr/bin/env bash
# The machine an executable was compiled for, checked at run time: a .tern records its machine and the code
# fingerprint of that machine's geometry (tern_machine_code_figures). Running it on a machine whose fingerprint
# differs is refused (exit 1) naming both machines and the figures that differ, unless --force-machine; a what-if
# copy of trn1 that changes only timing figures (a clock, the HBM bandwidth) runs; one that changes the SBUF size
# is refused. Machine paths longer than the old 55-character field work for compile and run, and a run with no
# --machine uses the recorded path in full. A version-1 executable still loads and is checked.
set -u
TERN=${1:?usage: test_machine_fingerprint.sh path/to/tern}
py=/usr/bin/python3
data=$(cd "$(dirname "$0")/../../data/machines" && pwd)
. "$(dirname "$0")/../lib.sh"
expect() { # CODE CMD...: output in $tmp/log
    local want=$1
    shift
    "$@" >"$tmp/log" 2>&1
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$* exited $got, expected $want: $(head -c 600 "$tmp/log")"; fi
}
has() { grep -qF -- "$1" "$tmp/log" && ok || bad "output lacks '$1': $(head -c 600 "$tmp/log")"; }

$py - "$tmp" <<'PY' || { echo "NOT OK: could not make the model"; exit 1; }
import sys, onnx
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                      [helper.make_tensor_value_info("x", T.FLOAT, [4, 8])], [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1] + "/relu.onnx")
PY

expect 0 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/relu.tern" --machine trn1
expect 0 "$TERN" run "$tmp/relu.tern"
expect 0 "$TERN" run "$tmp/relu.tern" --machine trn1.32xlarge   # same chip, more of them: the same code
# trn2: a different NeuronCore (SBUF, PSUM, chip cores): refused, naming both and what differs
expect 1 "$TERN" run "$tmp/relu.tern" --machine trn2
has "trn1.2xlarge"
has "trn2.48xlarge"
has "core.version NeuronCore-v2 vs NeuronCore-v3"
has "--force-machine"
expect 0 "$TERN" run "$tmp/relu.tern" --machine trn2 --force-machine
has "predicted device time on trn2.48xlarge"

# What-if copies of trn1 (the instance, its chip and its core, so references resolve to the copies).
make_whatif() { # DIR EDIT: copy the three files into DIR, apply the python edit to (inst, chip, core)
    mkdir -p "$1"
    $py - "$data" "$1" "$2" <<'PY'
import json, sys
src, dst, edit = sys.argv[1], sys.argv[2], sys.argv[3]
f = {k: json.load(open(f"{src}/{n}.json")) for k, n in [("inst", "trn1.2xlarge"), ("chip", "trainium1"), ("core", "neuroncore-v2")]}
inst, chip, core = f["inst"], f["chip"], f["core"]
exec(edit)
for k, n in [("inst", "trn1.2xlarge"), ("chip", "trainium1"), ("core", "neuroncore-v2")]:
    json.dump(f[k], open(f"{dst}/{n}.json", "w"), indent=1)
PY
}
make_whatif "$tmp/fast" 'core["core"]["tensor"]["clock"]["value"] *= 1.5; chip["chip"]["hbm"]["bandwidth"]["value"] *= 2; core["core"]["dma"]["bandwidth_per_engine"]["value"] *= 2 if "bandwidth_per_engine" in core["core"]["dma"] else 1'
expect 0 "$TERN" run "$tmp/relu.tern" --machine "$tmp/fast/trn1.2xlarge.json"
make_whatif "$tmp/small" 'core["core"]["sbuf"]["bytes_per_partition"]["value"] = 128; core["core"]["sbuf"]["usable_bytes_per_partition"]["value"] = 120000'
expect 1 "$TERN" run "$tmp/relu.tern" --machine "$tmp/small/trn1.2xlarge.json"
has "core.sbuf.bytes_per_partition 196608 vs 131072"
expect 0 "$TERN" run "$tmp/relu.tern" --machine "$tmp/small/trn1.2xlarge.json" --force-machine

# A machine path of any length: compile for it, run with no --machine (the recorded path, in full).
long="$tmp/a-machine-directory-with-a-rather-long-name-for-what-if-studies/and-another-level-below-it"
make_whatif "$long" 'pass'
[ ${#long} -gt 100 ] && ok || bad "the long path is only ${#long} characters"
expect 0 "$TERN" compile "$tmp/relu.onnx" -o "$tmp/long.tern" --machine "$long/trn1.2xlarge.json"
expect 0 "$TERN" run "$tmp/long.tern"
has "predicted device time on $long/trn1.2xlarge.json"
expect 0 "$TERN" run "$tmp/long.tern" --machine trn1   # the copy has trn1's figures: the same fingerprint

# A version-1 file (rewritten from the version-2 one: fixed name fields, no string table, no fingerprint) still
# loads and runs; the check then uses the machine it names, as that file is now.
$py - "$tmp/relu.tern" "$tmp/v1.tern" <<'PY' || bad "could not rewrite the executable as version 1"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert struct.unpack_from("<I", b, 8)[0] == 2
nin, nout = struct.unpack_from("<II", b, 20)
tab_len = struct.unpack_from("<I", b, 36)[0]
ref = struct.unpack_from("<I", b, 40)[0]
recs = 96 + 120 * (nin + nout)
tab = b[recs:recs + tab_len]
machine = tab[ref:tab.index(b"\0", ref)]
head = bytearray(b[:96])
struct.pack_into("<II", head, 8, 1, 0)
struct.pack_into("<I", head, 36, 0)
head[40:96] = machine.ljust(56, b"\0")
out = bytes(head)
for i in range(nin + nout):
    r = b[96 + 120 * i: 96 + 120 * (i + 1)]
    out += r[4:52] + r[52:120] + b"\0" * 4
rest = recs + tab_len + (-(recs + tab_len)) % 8
out += b[rest:]
out = bytearray(out)
struct.pack_into("<I", out, 12, zlib.crc32(bytes(out[16:])) & 0xffffffff)
open(sys.argv[2], "wb").write(out)
PY
expect 0 "$TERN" run "$tmp/v1.tern"
has "output y: fp32 [4, 8]"
expect 1 "$TERN" run "$tmp/v1.tern" --machine trn2
has "compiled for trn1.2xlarge"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
