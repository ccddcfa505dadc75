#!/bin/sh
# The commands as configure --without-mpi builds them: `dpro-replay --mpi` and
# `dpro-optimize --mpi` exit 2 saying that they were built without MPI and what to
# install, before reading anything. In a build with MPI, make check built them again
# without it (tests/unit/nompi, tools/local.mk: the compile of the commands' MPI-dependent
# code with HAVE_MPI undefined, warnings as errors); in a build without MPI, the commands
# themselves.
set -u
b=${top_builddir:-.}
if grep -q '^#define HAVE_MPI 1' "$b/config.h"; then
    dir=$b/tests/unit/nompi
else
    dir=$b/tools
fi
fails=0
for cmd in dpro-replay dpro-optimize; do
    exe=$dir/$cmd
    [ -x "$exe" ] || { echo "test_nompi: no $exe"; exit 99; }
    out=$("$exe" --mpi /nonexistent-dir 2>&1)
    rc=$?
    if [ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q "this $cmd was built without MPI (install libopenmpi-dev"; then
        echo "ok:   $exe --mpi: exit 2, saying why"
    else
        echo "FAIL: $exe --mpi: exit $rc (want 2, saying it was built without MPI): $out"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
