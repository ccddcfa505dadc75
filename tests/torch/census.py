#!/usr/bin/env python3
"""census.py: which symbols torch's shared libraries import from the CUDA libraries the
simulated device stands in for, and which of them the stand-ins export.

    census.py [--venv DIR] [--stand-ins DIR] [--missing] [--enforce LIB,...]

For each of libcudart.so.13, libcuda.so.1, libnccl.so.2, libcupti.so.13,
libcublas.so.13 and libcublasLt.so.13 it lists the dynamic symbols (with their version
node) that torch's libraries import: torch/lib/*.so of the venv's site-packages and the
libraries of site-packages/nvidia/*/lib they load (the NEEDED closure).  An import is
attributed to a library by its version node (e.g. cudaMalloc@libcudart.so.13) or, when
it carries none, to the first library the importer NEEDs whose real copy (the nvidia
wheel's; libcuda.so.1: the toolkit's stub) defines it.  It counts as present when the
stand-in (--stand-ins, default tests/simgpu/.libs of the build tree) defines the name
with the same version node (an unversioned import: any default definition).

libcuda.so.1 also gets the driver functions torch looks up by name at run time (c10's
driver API table: dlsym on the dlopened libcuda.so.1, all at torch.cuda's first use;
cudaGetDriverEntryPoint): the strings of libc10_cuda.so and libtorch_cuda.so that name a
function of the driver stub, counted apart, enforced with libcuda.so.1.

Prints one table line per library (imports, present, missing) and, with --missing, the
missing names.  Exit status: 0; 1 when a library named in --enforce misses an import;
2 on bad input (no venv, no torch, a library not found), with the reason; 77 (skip)
when the venv has no torch and --enforce is given, as `make check` wants.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

LIBS = ["libcudart.so.13", "libcuda.so.1", "libnccl.so.2", "libcupti.so.13",
        "libcublas.so.13", "libcublasLt.so.13"]
CUDA_STUB = "/usr/local/cuda/lib64/stubs/libcuda.so"


class CensusError(Exception):
    pass


def dynsyms(path):
    """(defined, undefined) of path: dicts name -> set of version nodes ('' = none)."""
    try:
        out = subprocess.run(["readelf", "--dyn-syms", "-W", path], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CensusError(f"{path}: readelf failed: {e}") from e
    defined, undefined = {}, {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[3] not in ("FUNC", "OBJECT", "NOTYPE",
                                                                 "IFUNC", "TLS"):
            continue
        if f[4] == "LOCAL":
            continue
        name = f[7]
        ver = ""
        m = re.match(r"^([^@]+)@@?(.+)$", name)
        if m:
            name, ver = m.group(1), m.group(2)
        (undefined if f[6] == "UND" else defined).setdefault(name, set()).add(ver)
    return defined, undefined


def needed(path):
    try:
        out = subprocess.run(["readelf", "-d", "-W", path], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CensusError(f"{path}: readelf -d failed: {e}") from e
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def site_packages(venv):
    sp = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    if not sp or not os.path.isdir(os.path.join(sp[0], "torch", "lib")):
        return None
    return sp[0]


def importers(sp):
    """torch/lib/*.so and the NEEDED closure of them inside site-packages/nvidia."""
    index = {}
    for p in glob.glob(os.path.join(sp, "nvidia", "*", "lib", "*.so*")):
        index.setdefault(os.path.basename(p), p)
    todo = sorted(glob.glob(os.path.join(sp, "torch", "lib", "*.so")))
    for p in todo:
        index.setdefault(os.path.basename(p), p)
    seen = {}
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen[p] = needed(p)
        for n in seen[p]:
            if n in index and index[n] not in seen:
                todo.append(index[n])
    return seen, index


def census(sp, stand_ins):
    consumers, index = importers(sp)
    real = {}
    for lib in LIBS:
        path = CUDA_STUB if lib == "libcuda.so.1" else index.get(lib)
        if not path or not os.path.exists(path):
            raise CensusError(f"{lib}: the real library is not found (looked in "
                              f"{sp}/nvidia/*/lib and {CUDA_STUB})")
        real[lib] = dynsyms(path)[0]
    node_of = {}  # version node -> library
    for lib, d in real.items():
        for vers in d.values():
            for v in vers:
                if v and not v.startswith(("GLIBC", "GCC", "CXXABI", "GLIBCXX")):
                    node_of[v] = lib
    imports = {lib: {} for lib in LIBS}  # lib -> name -> set of (version, importer)
    for path, deps in consumers.items():
        if os.path.basename(path) in LIBS:
            continue  # a real stand-in target's own imports are not torch's
        und = dynsyms(path)[1]
        for name, vers in und.items():
            for v in vers:
                lib = node_of.get(v) if v else None
                if lib is None and not v:
                    for n in deps:
                        if n in real and name in real[n]:
                            lib = n
                            break
                if lib is not None:
                    imports[lib].setdefault((name, v), set()).add(os.path.basename(path))
    ours = {}
    for lib in LIBS:
        p = os.path.join(stand_ins, lib)
        ours[lib] = dynsyms(p)[0] if os.path.exists(p) else None
    rows = []
    for lib in LIBS:
        missing = []
        for (name, v) in sorted(imports[lib]):
            have = ours[lib].get(name) if ours[lib] is not None else None
            if not have or (v not in have):
                missing.append(f"{name}@{v}" if v else name)
        rows.append((lib, len(imports[lib]), len(imports[lib]) - len(missing), missing,
                     ours[lib] is not None))
    # Driver functions torch resolves by name at run time.
    by_name = set()
    for base in ("libc10_cuda.so", "libtorch_cuda.so"):
        p = os.path.join(sp, "torch", "lib", base)
        with open(p, "rb") as f:
            data = f.read()
        for m in re.finditer(rb"(?<![A-Za-z0-9_])(cu[A-Z][A-Za-z0-9_]+)\x00", data):
            n = m.group(1).decode()
            if n in real["libcuda.so.1"]:
                by_name.add(n)
    drv = ours["libcuda.so.1"] or {}
    by_name_missing = sorted(n for n in by_name if n not in drv)
    return rows, (len(by_name), len(by_name) - len(by_name_missing), by_name_missing)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    builddir = os.environ.get("top_builddir", os.getcwd())
    ap.add_argument("--venv", default=os.path.join(builddir, "venv"))
    ap.add_argument("--stand-ins", default=os.path.join(builddir, "tests", "simgpu", ".libs"))
    ap.add_argument("--missing", action="store_true", help="list the missing imports")
    ap.add_argument("--enforce", default="", help="comma-separated libraries that must miss none")
    a = ap.parse_args()
    del here
    enforce = [x for x in a.enforce.split(",") if x]
    for e in enforce:
        if e not in LIBS:
            print(f"census: --enforce: {e} is not one of {', '.join(LIBS)}", file=sys.stderr)
            return 2
    sp = site_packages(a.venv)
    if sp is None:
        msg = f"census: {a.venv}: no venv with torch (make venv; DPRO_TORCH=0 skips it)"
        print(msg, file=sys.stderr)
        return 77 if enforce else 2
    try:
        rows, by_name = census(sp, a.stand_ins)
    except CensusError as e:
        print(f"census: {e}", file=sys.stderr)
        return 2
    print(f"{'library':<20} {'imported':>8} {'present':>8} {'missing':>8}")
    rc = 0
    for lib, n, have, missing, built in rows:
        note = "" if built else "  (no stand-in)"
        print(f"{lib:<20} {n:>8} {have:>8} {len(missing):>8}{note}")
        if lib in enforce and missing:
            rc = 1
            print(f"census: {lib}: {len(missing)} imports missing from the stand-in: "
                  f"{' '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}",
                  file=sys.stderr)
    n, have, miss = by_name
    print(f"{'libcuda.so.1 by name':<20} {n:>8} {have:>8} {len(miss):>8}  (looked up by name)")
    if "libcuda.so.1" in enforce and miss:
        rc = 1
        print(f"census: libcuda.so.1: {len(miss)} functions torch looks up by name are missing "
              f"from the stand-in: {' '.join(miss[:20])}{' ...' if len(miss) > 20 else ''}",
              file=sys.stderr)
    if a.missing:
        for lib, _, _, missing, _ in rows:
            for m in missing:
                print(f"missing {lib} {m}")
        for m in miss:
            print(f"missing libcuda.so.1-by-name {m}")
    if enforce and rc == 0:
        print(f"census: nothing torch imports is missing from {', '.join(enforce)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
