#!/usr/bin/env bash
# The public headers (include/tern) stand alone: each includes only system headers and other public headers
# ("tern/<name>" that exists in include/tern), never a file under src/, and each compiles by itself with nothing
# but include/ on the path (C17, -Wall -Wextra -Werror). Also checks that the kernel builder's old names for a
# tensor's role (tern_kio_kind, TERN_KIO_*) are aliases of tern_tensor_kind's, so code written against them still
# compiles and means the same.
set -u
TERN=${1:?usage: test_public_headers.sh path/to/tern}
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
CC=${CC:-cc}

headers=$(ls include/tern/*.h include/tern/*.def)
[ -n "$headers" ] && ok || bad "no public headers found under include/tern"
for h in $headers; do
    # every #include line: <system> or "tern/x" naming a public header
    while IFS= read -r line; do
        inc=$(printf '%s\n' "$line" | sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\(["<][^">]*[">]\).*/\1/p')
        [ -n "$inc" ] || { bad "$h: unparsed include line: $line"; continue; }
        case "$inc" in
        \<*\>) ok ;;
        \"tern/*\")
            f=${inc#\"}
            f=${f%\"}
            [ -f "include/$f" ] && ok || bad "$h includes $inc, which is not a public header (include/$f missing)"
            ;;
        *) bad "$h includes $inc: a public header may include only <system> headers and \"tern/...\" ones (not src/)" ;;
        esac
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$h")
done

# Each header compiles alone from include/ only (src/ is not on the path, so an include of a private header fails).
for h in include/tern/*.h; do
    name=${h#include/}
    printf '#include "%s"\nint tern_header_check_%s;\n' "$name" "$(basename "$h" .h)" >"$tmp/one.c"
    if "$CC" -std=c17 -Wall -Wextra -Werror -fsyntax-only -I include "$tmp/one.c" 2>"$tmp/cc.err"; then
        ok
    else
        bad "$name does not compile on its own with -I include: $(head -c 400 "$tmp/cc.err")"
    fi
done

# tern_kio_kind is tern_tensor_kind; the old enumerator names keep their values.
cat >"$tmp/kio.c" <<'EOF'
#include "tern/kernel.h"
_Static_assert(TERN_KIO_INPUT == TERN_TENSOR_INPUT && TERN_KIO_OUTPUT == TERN_TENSOR_OUTPUT &&
                   TERN_KIO_SCRATCH == TERN_TENSOR_SCRATCH && TERN_KIO_CONSTANT == TERN_TENSOR_CONSTANT,
               "TERN_KIO_* are tern_tensor_kind's members");
_Static_assert(sizeof(tern_kio_kind) == sizeof(tern_tensor_kind), "one enum");
tern_tensor_kind kio_as_tensor_kind(tern_kio_kind k);
tern_tensor_kind kio_as_tensor_kind(tern_kio_kind k)
{
    tern_tensor_kind *p = &k; /* same type: no conversion, no warning */
    switch (*p) {
    case TERN_KIO_INPUT:
    case TERN_KIO_OUTPUT:
    case TERN_KIO_SCRATCH:
    case TERN_KIO_CONSTANT:
    case TERN_TENSOR_KIND_COUNT: break;
    }
    return *p;
}
EOF
if "$CC" -std=c17 -Wall -Wextra -Werror -fsyntax-only -I include "$tmp/kio.c" 2>"$tmp/cc.err"; then
    ok
else
    bad "tern_kio_kind is not an alias of tern_tensor_kind: $(head -c 400 "$tmp/cc.err")"
fi
# The installed binary still starts (the headers changed nothing it prints).
expect 0 "$TERN" disasm --reference

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
