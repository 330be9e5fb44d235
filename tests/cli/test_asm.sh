#!/usr/bin/env bash
# CLI test for `tern asm` / `tern disasm`: asm -> disasm -> asm reproduces the binary byte for byte (a hand-written
# program, standard input/output, and every seed program in fuzz/corpus/decode), disasm output is canonical
# (a second pass is identical), and exit codes: 1 with the library's message for bad files (syntax error with
# line/column, corrupt or truncated binary with its offset, unreadable file, NUL byte in text), 2 for usage
# errors (unknown option, missing argument), 0 with usage on stdout for --help.
set -u
TERN=${1:?usage: test_asm.sh path/to/tern}
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
same() { # same A B
    if cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ"; fi
}

cat >"$tmp/prog.s" <<'ASM'
# softmax-ish fragment (hand-written: aliases, decimal offsets, comments)
.machine trn1
.semaphores 64
.engine sync
    dma_copy dst=sbuf[0:128]+0:bf16[[1,512]] in0=hbm[0:128:512]+4096:bf16[[1,512]] queue=3 signal=s0
    reg_set rd=r1 imm_i0=4
.engine act
    activation dst=sbuf[0:128]+1024:fp32[[1,512]] in0=sbuf[0:128]+0:bf16[[1,512]] func=exp imm0=0.125 wait=s0>=1 signal=s1
.engine vector
    tensor_reduce dst=sbuf[0:128]+8192:fp32[[1,1]] in0=sbuf[0:128]+1024:fp32[[1,512]] op0=add imm_i0=1 wait=s1>=1
    tensor_scalar dst=sbuf[0:128]+1024:fp32[[1,512]] in0=sbuf[0:128]+1024:fp32[[1,512]] op0=divide imm0=nan flags=s0_ap
.engine sync
    reg_alu rd=r1 ra=r1 op0=subtract imm_i0=1 flags=imm
    branch op0=gt ra=r1 imm_i1=0 imm_i0=0 flags=imm
    halt
ASM

expect 0 "$TERN" asm "$tmp/prog.s" -o "$tmp/a.tprog"
[ -s "$tmp/a.tprog" ] && ok || bad "asm wrote no output"
head -c 8 "$tmp/a.tprog" | grep -q TERNPRG1 && ok || bad "output lacks the magic"
expect 0 "$TERN" disasm "$tmp/a.tprog"
cp "$tmp/out" "$tmp/a.s"
contains "$tmp/a.s" ".machine trn1"
contains "$tmp/a.s" ".engine scalar"
contains "$tmp/a.s" "imm0=0x7fc00000"
contains "$tmp/a.s" "in0=hbm[0:128:512]+0x1000:bf16[[1,512]]"
expect 0 "$TERN" asm "$tmp/a.s" -o "$tmp/b.tprog"
same "$tmp/a.tprog" "$tmp/b.tprog"
expect 0 "$TERN" disasm "$tmp/b.tprog" -o "$tmp/b.s"
same "$tmp/a.s" "$tmp/b.s"
# standard input and output
"$TERN" asm - -o - <"$tmp/prog.s" >"$tmp/c.tprog" 2>"$tmp/err" && ok || bad "asm - -o - failed: $(cat "$tmp/err")"
same "$tmp/a.tprog" "$tmp/c.tprog"
"$TERN" disasm - <"$tmp/a.tprog" >"$tmp/c.s" 2>"$tmp/err" && ok || bad "disasm - failed"
same "$tmp/a.s" "$tmp/c.s"

# every committed seed program: binary -> text -> binary is the identity
n=0
for f in fuzz/corpus/decode/*.tprog; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    if "$TERN" disasm "$f" -o "$tmp/s.s" 2>"$tmp/err" && "$TERN" asm "$tmp/s.s" -o "$tmp/s.tprog" 2>>"$tmp/err" &&
        cmp -s "$f" "$tmp/s.tprog"; then ok; else bad "$f: round trip failed: $(head -c 300 "$tmp/err")"; fi
done
echo "round-tripped $n seed programs"

# failures of the work: exit 1 with the library's message
printf '.engine vector\n    tensor_copy dst=sbuf[0:128]+0:bf61[[1,4]]\n' >"$tmp/bad.s"
expect 1 "$TERN" asm "$tmp/bad.s" -o "$tmp/x.tprog"
contains "$tmp/err" "asm line 2, column 35: unknown dtype 'bf61'"
[ -e "$tmp/x.tprog" ] && bad "asm wrote output for a bad file" || ok
printf '.engine vector\n    nop\x00\n' >"$tmp/nul.s"
expect 1 "$TERN" asm "$tmp/nul.s" -o "$tmp/x.tprog"
contains "$tmp/err" "NUL byte at offset 22"
expect 1 "$TERN" asm "$tmp/missing.s" -o "$tmp/x.tprog"
contains "$tmp/err" "missing.s"
expect 1 "$TERN" disasm "$tmp/prog.s"
contains "$tmp/err" "program decode: offset 0: bad magic"
head -c 300 "$tmp/a.tprog" >"$tmp/short.tprog"
expect 1 "$TERN" disasm "$tmp/short.tprog"
contains "$tmp/err" "program decode: offset"
cp "$tmp/a.tprog" "$tmp/flip.tprog"
printf '\x63' | dd of="$tmp/flip.tprog" bs=1 seek=$((112 + 320 + 36 + 1)) conv=notrunc 2>/dev/null
expect 1 "$TERN" disasm "$tmp/flip.tprog"
contains "$tmp/err" "program decode: offset 469: instruction 1 (vector stream): operand dst: dtype 99 unknown"
expect 1 "$TERN" disasm "$tmp/missing.tprog"

# usage errors: exit 2
expect 2 "$TERN" asm
expect 2 "$TERN" asm "$tmp/prog.s"
contains "$tmp/err" "missing -o"
expect 2 "$TERN" asm "$tmp/prog.s" -o
expect 2 "$TERN" asm "$tmp/prog.s" --frob -o "$tmp/x.tprog"
contains "$tmp/err" "unknown option '--frob'"
expect 2 "$TERN" asm "$tmp/prog.s" "$tmp/bad.s" -o "$tmp/x.tprog"
expect 2 "$TERN" disasm
expect 2 "$TERN" disasm "$tmp/a.tprog" -x
expect 2 "$TERN" disasm --reference "$tmp/a.tprog"
expect 0 "$TERN" asm --help
contains "$tmp/out" "usage: tern asm"
expect 0 "$TERN" disasm --help
contains "$tmp/out" "usage: tern disasm"
expect 0 "$TERN" --help
contains "$tmp/out" "disasm"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
