#!/bin/sh
# One meaning in one place: the FNV-1a constants live only in common/fnv1a.h (every hash
# calls dpro_fnv1a) and the NCCL element-size table only in schemas/classify.c
# (dpro_nccl_dtype_size), apart from the stand-in NCCL of the tests (tests/simgpu/
# nccl_coll.c, which is NCCL for the simulated device) and the test of the hash's published
# values (tests/unit/test_classify.c). A second copy anywhere in the source tree fails.
set -u
s=${top_srcdir:-.}
[ -f "$s/common/fnv1a.h" ] || { echo "test_one_meaning: no $s/common/fnv1a.h"; exit 99; }
fail=0
# hits PATTERN OWNER...: the source files (C, headers, Python, shell) matching the extended
# regular expression PATTERN, less the owners and this script; each is printed, and fails
hits() {
    pat=$1
    shift
    found=$(cd "$s" && grep -rlEi --include='*.[ch]' --include='*.py' --include='*.sh' \
        --include='*.in' --exclude-dir=_build --exclude-dir=.git --exclude-dir='_build*' \
        -e "$pat" collector common optimizer replay schemas tools tests 2>/dev/null |
        grep -v '^tests/unit/test_one_meaning\.sh$')
    for f in $found; do
        owned=0
        for o in "$@"; do [ "$f" = "$o" ] && owned=1; done
        if [ $owned = 0 ]; then
            echo "test_one_meaning: $f: a second copy of what $1 defines (/$pat/):"
            (cd "$s" && grep -nEi -e "$pat" "$f" | head -3)
            fail=1
        fi
    done
}
# FNV-1a: 32-bit offset basis and prime (hex and decimal), 64-bit offset basis and prime
hits '0x0*811c9dc5|0x0*1000193([^0-9a-f]|$)|2166136261|16777619|0xcbf29ce484222325|0x0*100000001b3' \
    common/fnv1a.h tests/unit/test_classify.c
# NCCL element sizes: the table in ncclDataType_t order, or a function of the NCCL dtype
# returning its size
hits '1, *1, *4, *4, *8, *8, *2, *4, *8, *2' schemas/classify.c
hits '^[a-z_]*(type|dtype)_size\((ncclDataType_t|uint32_t nccl|int nccl)' schemas/classify.c \
    tests/simgpu/nccl_coll.c
[ $fail = 0 ] && echo "test_one_meaning: FNV-1a and the NCCL element sizes: one definition each"
exit $fail
