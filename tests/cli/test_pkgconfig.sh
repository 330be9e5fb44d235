#!/usr/bin/env bash
# The library as a user gets it: a program written against the public API (examples/softmax_matmul.c) is built
# from nothing but the pkg-config line of the build tree's tern.pc, then again from an installed copy
# (cmake --install into a temporary prefix), and run; the installed tree holds the CLI, the headers, libtern.a,
# the machine files and tern.pc. Usage: test_pkgconfig.sh path/to/build/tern
set -euo pipefail
tern=$1
build=$(cd "$(dirname "$tern")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config missing"

# 1. The build tree.
flags=$(PKG_CONFIG_PATH=$build pkg-config --cflags --libs --static tern) || fail "pkg-config cannot read $build/tern.pc"
cc -std=c17 -O1 examples/softmax_matmul.c $flags -o "$tmp/example_build" || fail "build-tree line does not build: $flags"
out=$("$tmp/example_build") || fail "example built from the build tree's tern.pc failed: $out"
case "$out" in *"softmax(A^T B)"*) ;; *) fail "unexpected output: $out" ;; esac

# 2. An installed copy. cmake --install honours --prefix for the files; tern.pc names the configured prefix, so the
# test rewrites its prefix lines to where this copy landed (as a packager's relocation would).
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install failed"
for f in bin/tern include/tern/isa.h include/tern/isa_table.def include/tern/runtime.h share/tern/machines/trn1.2xlarge.json; do
    [ -e "$tmp/prefix/$f" ] || fail "installed tree lacks $f"
done
lib=$(cd "$tmp/prefix" && ls -d lib*/libtern.a | head -1) || fail "installed tree lacks libtern.a"
pc=$(cd "$tmp/prefix" && ls -d lib*/pkgconfig/tern.pc | head -1) || fail "installed tree lacks tern.pc"
sed -i -e "s|^prefix=.*|prefix=$tmp/prefix|" -e "s|^includedir=.*|includedir=$tmp/prefix/include|" \
    -e "s|^libdir=.*|libdir=$tmp/prefix/$(dirname "$lib")|" "$tmp/prefix/$pc"
flags=$(PKG_CONFIG_PATH=$tmp/prefix/$(dirname "$pc") pkg-config --cflags --libs --static tern)
case "$flags" in *"$tmp/prefix"*) ;; *) fail "installed pkg-config line does not point at the install: $flags" ;; esac
cc -std=c17 -O1 examples/softmax_matmul.c $flags -o "$tmp/example_inst" || fail "installed line does not build: $flags"
"$tmp/example_inst" >/dev/null || fail "example built against the installed library failed"
info=$("$tmp/prefix/bin/tern" info trn1) || fail "installed tern info trn1 failed"
case "$info" in *trn1.2xlarge*) ;; *) fail "installed tern info trn1 printed: $info" ;; esac
# A public header must stand alone: every one compiles by itself with the installed include path only.
for h in "$tmp"/prefix/include/tern/*.h; do
    echo "#include \"tern/$(basename "$h")\"" | cc -std=c17 -fsyntax-only -I"$tmp/prefix/include" -x c - ||
        fail "installed header $(basename "$h") does not compile alone"
done
echo "test_pkgconfig: 1 passed, 0 failed"
