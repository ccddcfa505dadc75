#!/bin/sh
# The dynamic symbols libdprotrace.so defines are exactly the functions dprotrace.h
# declares: no codec, deflater or protobuf-c internals leak into the ABI, and no declared
# function is missing from it. Exit 77 where no shared library was built or nm is missing.
set -u
s=${top_srcdir:-.}
b=${top_builddir:-.}
so=$b/schemas/.libs/libdprotrace.so
[ -f "$so" ] || { echo "test_exports: no $so (static build): skipped"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "test_exports: no nm: skipped"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# declared: identifiers followed by "(" in the preprocessed header (function-like macros
# expand to the functions they call, so what remains is what callers link against)
${CC:-cc} -E -P -x c "$s/schemas/dprotrace.h" | grep -o 'dpro_[A-Za-z0-9_]*[[:space:]]*(' |
    tr -d ' (\t' | sort -u > "$tmp/declared" || exit 99
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWi]$/ { sub(/@.*/, "", $3); print $3 }' |
    grep -v "^DPROTRACE_" | sort -u > "$tmp/exported" || exit 99
[ -s "$tmp/declared" ] || { echo "test_exports: nothing declared?"; exit 99; }
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
    echo "test_exports: exported (>) and declared (<) symbols differ:"
    diff "$tmp/declared" "$tmp/exported"
    exit 1
fi
echo "test_exports: $(wc -l < "$tmp/exported") symbols, as declared"
