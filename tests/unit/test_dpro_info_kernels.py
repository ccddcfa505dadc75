#!/usr/bin/env python3
"""dpro-info --kernels: the kernel breakdown against an independent reading of the input.

Synthetic: two small Kineto traces written here (known kernels, an NCCL kernel, a memcpy and
a memset per rank) are imported with dpro-import; the per-rank and all-ranks breakdowns must
give exactly the durations written, the text output short names, and bad K a usage error.
Real: every Kineto trace of ../shared/traces/kineto is imported and the top kernels' counts
and total device time must equal what gzip + json compute from the original (events with
cat == "kernel", grouped by name, sum of dur in us), within rounding; categories likewise.
The real part is skipped where the shared traces are not beside the source tree (a failure
in CI).
"""
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

B = os.environ.get("top_builddir", ".")
S = os.environ.get("top_srcdir", ".")
INFO = os.path.join(B, "tools", "dpro-info")
IMPORT = os.path.join(B, "tools", "dpro-import")
TOP = 25
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, want_rc=0):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == want_rc,
          "%s: exit %d, expected %d: %s" % (" ".join(args), p.returncode, want_rc, p.stderr))
    return p.stdout


def expected(path):
    """Per kernel name [count, sum of dur], and per category [count, sum of dur], in us."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {}
    cats = {c: [0, 0.0] for c in ("compute", "communication", "memcpy", "memset")}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, dur = e.get("cat"), float(e.get("dur", 0))
        if cat == "kernel":
            n = names.setdefault(e["name"], [0, 0.0])
            n[0] += 1
            n[1] += dur
            c = "communication" if "nccl" in e["name"].lower() else "compute"
        elif cat == "gpu_memcpy":
            c = "memcpy"
        elif cat == "gpu_memset":
            c = "memset"
        else:
            continue
        cats[c][0] += 1
        cats[c][1] += dur
    return names, cats


def merge(parts):
    names, cats = {}, {}
    for pn, pc in parts:
        for src, dst in ((pn, names), (pc, cats)):
            for k, (n, us) in src.items():
                d = dst.setdefault(k, [0, 0.0])
                d[0] += n
                d[1] += us
    return names, cats


def close(a, b, count):
    # Kineto's us (floats in newer files) become whole ns in the trace: 0.5 ns per event
    return abs(a - b) <= 0.001 * count + 1e-9 * abs(b) + 1e-6


def compare(label, got, want, top):
    names, cats = want
    dev = sum(us for _, us in cats.values())
    check(close(got["device_us"], dev, sum(n for n, _ in cats.values())),
          "%s: device_us %r, expected %r" % (label, got["device_us"], dev))
    for c, (n, us) in cats.items():
        g = got["categories"][c]
        check(g["count"] == n and close(g["us"], us, n),
              "%s: category %s: %r, expected count %d us %r" % (label, c, g, n, us))
    check(got["kernel_names"] == len(names),
          "%s: %d kernel names, expected %d" % (label, got["kernel_names"], len(names)))
    tops = got["top_kernels"]
    check(len(tops) == min(top, len(names)), "%s: %d top kernels" % (label, len(tops)))
    ranked = sorted(names.items(), key=lambda kv: -kv[1][1])
    for i, k in enumerate(tops):
        w = names.get(k["name"])
        if w is None:
            check(False, "%s: kernel %r not in the input" % (label, k["name"][:80]))
            continue
        check(k["count"] == w[0] and close(k["total_us"], w[1], w[0]),
              "%s: %r: count %d total %r us, expected %d, %r" %
              (label, k["name"][:80], k["count"], k["total_us"], w[0], w[1]))
        # the i-th by device time (ties and rounding aside)
        check(close(k["total_us"], ranked[i][1][1], w[0] + ranked[i][1][0]),
              "%s: rank %d is %r (%r us), expected %r (%r us)" %
              (label, i, k["name"][:60], k["total_us"], ranked[i][0][:60], ranked[i][1][1]))
        check(k["min_us"] <= k["mean_us"] + 1e-9 <= k["max_us"] + 2e-9,
              "%s: %r: min/mean/max %r" % (label, k["name"][:60], k))
        check(k["communication"] == ("nccl" in k["name"].lower()),
              "%s: %r: communication flag" % (label, k["name"][:60]))
        if dev:
            check(abs(k["share_pct"] - 100.0 * k["total_us"] / got["device_us"]) < 1e-6,
                  "%s: %r: share" % (label, k["name"][:60]))


def info_json(paths, top):
    out = run([INFO, "--json", "--kernels=%d" % top] + paths)
    return json.loads(out) if out else None


# ---- synthetic ----------------------------------------------------------------------------
TEMPLATED = ("void at::native::vectorized_elementwise_kernel<4, at::native::"
             "CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::"
             "CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
TEMPLATED2 = ("void at::native::vectorized_elementwise_kernel<4, at::native::"
              "(anonymous namespace)::mul_kernel<float>, at::detail::Array<char*, 3> >(int)")
GEMM = "volta_sgemm_64x64_nt"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def synthetic_trace(rank, kernels, copies):
    """A minimal Kineto trace: kernels [(name, dur)], copies [(cat, name, dur)]."""
    ev, ts, corr = [], 1000, 1
    for cat, name, dur in [("kernel", n, d) for n, d in kernels] + copies:
        args = {"device": 0, "stream": 7, "correlation": corr}
        if cat == "gpu_memcpy":
            args["bytes"] = 4096
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts,
                   "dur": dur, "args": args})
        ts += dur + 5
        corr += 1
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2},
            "traceEvents": ev}


def synthetic(tmp):
    r0 = [(GEMM, 100), (GEMM, 300), (TEMPLATED, 10), (TEMPLATED, 30), (TEMPLATED2, 7),
          (NCCL, 500)]
    r1 = [(GEMM, 200), (TEMPLATED, 20), (NCCL, 250), (NCCL, 250)]
    cp = [("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 40),
          ("gpu_memset", "Memset (Device)", 2)]
    paths = []
    for rank, ks in ((0, r0), (1, r1)):
        p = os.path.join(tmp, "syn-rank%d.json" % rank)
        with open(p, "w") as f:
            json.dump(synthetic_trace(rank, ks, cp), f)
        paths.append(p)
    out = os.path.join(tmp, "syn")
    run([IMPORT, "kineto", "--quiet"] + paths + ["-o", out])
    d = info_json([out], 10)
    if d is None:
        return
    want = [expected(p) for p in paths]
    per = d["kernels"]["per_rank"]
    check([r["rank"] for r in per] == [0, 1], "synthetic: ranks %r" % [r["rank"] for r in per])
    for r, w in zip(per, want):
        compare("synthetic rank %d" % r["rank"], r, w, 10)
    compare("synthetic all", d["kernels"]["all"], merge(want), 10)
    a = d["kernels"]["all"]
    check(a["files"] == 2, "synthetic: all.files %r" % a["files"])
    # exact figures, by hand: rank 0 device time 100+300+10+30+7+500+40+2 = 989 us
    check(per[0]["device_us"] == 989.0, "synthetic: rank 0 device_us %r" % per[0]["device_us"])
    g = a["top_kernels"][0]  # NCCL: 1000 us over 3 launches
    check(g["name"] == NCCL and g["count"] == 3 and g["total_us"] == 1000.0 and
          g["min_us"] == 250.0 and g["max_us"] == 500.0 and g["communication"],
          "synthetic: top kernel %r" % g)
    check(g["short_name"] == "ncclKernel_AllReduce_RING_LL_Sum_float", g["short_name"])
    check(a["categories"]["communication"]["us"] == 1000.0, "synthetic: communication")
    t = [k for k in a["top_kernels"] if k["name"] == TEMPLATED][0]
    check(t["short_name"] == "at::native::vectorized_elementwise_kernel", t["short_name"])
    check(abs(t["mean_us"] - 20.0) < 1e-9, "synthetic: mean %r" % t["mean_us"])
    # without --kernels the JSON is as before: no "kernels" key
    plain = json.loads(run([INFO, "--json", out]) or "{}")
    check("kernels" not in plain and plain.get("ranks") == 2, "synthetic: plain JSON %r" %
          sorted(plain))
    # text: categories, both ranks, the aggregate; alike short names told apart
    text = run([INFO, "--kernels=3", out])
    check(text.count("kernel breakdown, rank ") == 2, "text: per-rank blocks\n" + text)
    # both ranks: 989 + 200 + 20 + 500 + 42 = 1751 us in 8 + 6 device operations
    check("kernel breakdown, all ranks (2 files): device time 1.751 ms in 14 operations" in
          text, "text: aggregate heading\n" + text)
    check("top 3 of 4 kernel names" in text, "text: top 3 of 4\n" + text)
    for line in ("communication           3        1.000   57.1%",
                 "3        1.000     333.33     250.00     500.00   57.1%  "
                 "ncclKernel_AllReduce_RING_LL_Sum_float"):
        check(line in text, "text: %r missing\n%s" % (line, text))
    full = run([INFO, "--kernels", out])
    for short in ("at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<...>, "
                  "Array<...>>",
                  "at::native::vectorized_elementwise_kernel<4, mul_kernel<...>, Array<...>>"):
        check(short in full, "text: %r missing\n%s" % (short, full))
    # usage errors: bad K, --kernels with --quick
    for bad in ("--kernels=0", "--kernels=-3", "--kernels=x", "--kernels=", "--kernels=10x",
                "--kernels=99999999999999999999"):
        run([INFO, bad, out], want_rc=2)
    run([INFO, "--kernels", "--quick", out], want_rc=2)


# ---- real traces ----------------------------------------------------------------------------
def real(tmp):
    d = os.path.join(S, "..", "shared", "traces", "kineto")
    files = sorted(glob.glob(os.path.join(d, "*.json.gz")))
    if not files:
        # CI has the shared traces: there a missing folder is a failure, not a skip
        if os.environ.get("CI") == "true":
            check(False, "no %s (CI=true: the shared traces must be there)" % d)
        else:
            print("no %s: real traces skipped" % d)
        return 0
    parts = []
    for f in files:
        name = os.path.basename(f)[:-len(".json.gz")]
        out = os.path.join(tmp, name)
        run([IMPORT, "kineto", "--quiet", f, "-o", out])
        got = info_json([out], TOP)
        want = expected(f)
        parts.append(want)
        if got is None:
            continue
        r = got["kernels"]["per_rank"]
        check(len(r) == 1, "%s: %d ranks" % (name, len(r)))
        compare(name, r[0], want, TOP)
        compare(name + " (all)", got["kernels"]["all"], want, TOP)
        print("%-30s %4d kernel names, %6d kernels, top %s: %d x, %.3f us" %
              (name, len(want[0]), sum(n for n, _ in want[0].values()),
               r[0]["top_kernels"][0]["short_name"][:40] if r[0]["top_kernels"] else "-",
               r[0]["top_kernels"][0]["count"] if r[0]["top_kernels"] else 0,
               r[0]["top_kernels"][0]["total_us"] if r[0]["top_kernels"] else 0))
    # all files at once: one pass, the aggregate merges names across files
    got = info_json([os.path.join(tmp, os.path.basename(f)[:-len(".json.gz")])
                     for f in files], TOP)
    if got is not None:
        check(len(got["kernels"]["per_rank"]) == len(files), "all: per_rank count")
        compare("all files", got["kernels"]["all"], merge(parts), TOP)
    return len(files)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        synthetic(tmp)
        n = real(tmp)
    print("%d real trace(s); %d failure(s)" % (n, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
