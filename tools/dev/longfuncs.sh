#!/bin/sh
# longfuncs.sh: the C files over a line limit and the functions over another, for the
# house rules (files under about 1,000 lines, functions under about 150).
#
#   tools/dev/longfuncs.sh [-f FILE_LINES] [-l FUNC_LINES] [PATH...]
#
# PATHs (default: the checkout's collector common optimizer replay schemas tools tests)
# are searched for *.c files. Prints "file N lines" and "file:LINE name N lines", longest
# first. A function is counted from the line with its name to its closing brace, in the
# project's clang-format layout: the name at the start of a line, the body's braces alone
# in column 0. Exits 0 (it reports; it does not judge).
set -eu
file_max=1000
func_max=150
while getopts f:l: opt; do
    case $opt in
    f) file_max=$OPTARG ;;
    l) func_max=$OPTARG ;;
    *)
        echo "usage: $0 [-f FILE_LINES] [-l FUNC_LINES] [PATH...]" >&2
        exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- "$top/collector" "$top/common" "$top/optimizer" "$top/replay" \
    "$top/schemas" "$top/tools" "$top/tests"
files=$(find "$@" -name '*.c' -not -path '*/_build/*' | sort)
[ -n "$files" ] || exit 0
# shellcheck disable=SC2086
wc -l $files | awk -v max="$file_max" '$2 != "total" && $1 > max { print $2, $1, "lines" }' |
    sort -k2,2nr
# shellcheck disable=SC2086
awk -v max="$func_max" '
    FNR == 1 { name = ""; start = 0; inbody = 0 }
    /^[A-Za-z_][A-Za-z0-9_]*\(/ && !inbody { name = $0; sub(/\(.*/, "", name); start = FNR }
    /^\{/ && name != "" { inbody = 1 }
    /^\}/ && inbody {
        n = FNR - start + 1
        if (n > max) print FILENAME ":" start, name, n, "lines"
        inbody = 0; name = ""
    }
' $files | sort -k3,3nr
