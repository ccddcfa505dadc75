#!/usr/bin/env python3
"""test_dpro_diff: dpro-diff A B on traces whose difference is known, and on the real
Kineto traces of ../shared/traces/kineto against themselves.

Two synthetic Kineto traces (tests/import/gen_kineto.py's 2.x spelling), three identical
steps each: A launches conv_kernel (100 us), relu_kernel (20 us) and drop_kernel (5 us)
from aten::conv, aten::relu and aten::drop; B makes conv_kernel slower (150 us),
relu_kernel faster (10 us), drops aten::drop and its kernel and adds aten::gelu with
gelu_kernel (7 us). Expected, whole traces: conv_kernel first (+150 us over the three
steps), then relu_kernel (-30 us), gelu_kernel added (+21 us), drop_kernel removed
(-15 us), the launch calls unchanged (three a step on both sides, same durations);
windows B@2 against A@1-3 give the per-iteration figures (+50 us). A trace against
itself, and A@1-2 against A@2-3 (identical steps, per iteration), give no difference.
The real traces: each against itself is empty, and the kernel totals equal an
independent reading of the JSON (count and summed dur of the "kernel" events).

Names: A and B launch a mangled kernel (PyTorch's fill kernel) and two kernels whose
names differ only in their parameter lists and are too long to be shown whole; the text
report shows the first demangled and shortened (as dpro-info and dpro-replay show
kernels) and the two others with " [1]" and " [2]" (they would show one name), the JSON
the raw names; dpro-replay --perturb 3 on B shows its rows the same way, and dpro-export
--chrome names A's kernel slices so (args.full_name: the raw name) where --kineto keeps
the raw names; so does dpro-replay --chrome the kernels on its critical path track, and
--critical-path the rows of its text report."""
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
import replay_testlib as T  # noqa: E402
from gen_kineto import BASE_NS, Gen  # noqa: E402

DIFF = os.path.join(T.BUILD, "tools", "dpro-diff")
STEP_US = 1000.0


def trace(kernels):
    """Three steps; kernels: [(op, kernel, device us)] launched in order each step."""
    g = Gen("2.x", 0, 1, 4242)
    for n in range(1, 4):
        t0 = 1000.0 + (n - 1) * STEP_US
        g.op("ProfilerStep#%d" % n, t0, STEP_US - 10, cat=g.c_step)
        t, kt = t0 + 10, t0 + 20
        for op, kname, kus in kernels:
            g.op(op, t, 30)
            g.launch("cudaLaunchKernel", kname, t + 10, kt, kus)
            t += 40
            kt += kus + 5
        g.x("cuda_runtime", "cudaDeviceSynchronize", g.pid, g.tid, t + 500, 20,
            {"cbid": 165, "correlation": 9000 + n})
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": g.pid, "tid": 0,
             "args": {"name": "python3"}}]
    return {"schemaVersion": 1, "traceEvents": meta + g.ev, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": BASE_NS}


def run(args):
    return subprocess.run([DIFF] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def diff_json(a, b):
    p = run(["--json", "--top", "0", a, b])
    T.check(p.returncode == 0, "dpro-diff %s %s exits 0 (%s)" % (a, b, p.stderr[-300:]))
    return json.loads(p.stdout) if p.returncode == 0 else None


def imported(tmp, name, doc):
    src = os.path.join(tmp, name + ".json")
    with open(src, "w") as f:
        json.dump(doc, f)
    out = os.path.join(tmp, name)
    p = subprocess.run([T.IMPORT, "kineto", "--quiet", src, "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    T.check(p.returncode == 0, "%s imports (%s)" % (name, p.stderr[-300:]))
    return out


def row(d, cls, name):
    r = [c for c in d["changes"] if c["class"] == cls and c["name"] == name]
    return r[0] if r else None


def near(x, y):
    return x is not None and abs(x - y) < 0.01


def known(tmp):
    a = imported(tmp, "a", trace([("aten::conv", "conv_kernel", 100),
                                  ("aten::relu", "relu_kernel", 20),
                                  ("aten::drop", "drop_kernel", 5)]))
    b = imported(tmp, "b", trace([("aten::conv", "conv_kernel", 150),
                                  ("aten::relu", "relu_kernel", 10),
                                  ("aten::gelu", "gelu_kernel", 7)]))
    d = diff_json(a, b)
    if d is None:
        return
    ch = d["changes"]
    T.check(ch and ch[0]["class"] == "kernel" and ch[0]["name"] == "conv_kernel",
            "the largest change first: conv_kernel (%s)" % (ch[0]["name"] if ch else None))
    want = [("kernel", "conv_kernel", "slower", 150), ("kernel", "relu_kernel", "faster", -30),
            ("kernel", "gelu_kernel", "added", 21), ("kernel", "drop_kernel", "removed", -15),
            ("cpu_op", "aten::gelu", "added", 90), ("cpu_op", "aten::drop", "removed", -90)]
    for cls, name, status, delta in want:
        r = row(d, cls, name)
        T.check(r is not None and r["status"] == status and near(r["delta_us"], delta),
                "%s %s: %s by %+g us (%s)" % (cls, name, status, delta, r))
    T.check(row(d, "api", "cudaLaunchKernel") is None and row(d, "cpu_op", "aten::conv") is None,
            "the launches and aten::conv are unchanged")
    T.check(d["summary"]["added"] == 2 and d["summary"]["removed"] == 2 and
            d["summary"]["slower"] == 1 and d["summary"]["faster"] == 1,
            "summary: 2 added, 2 removed, 1 slower, 1 faster (%s)" % d["summary"])
    T.check(len(ch) == 6, "six changed names (%d)" % len(ch))
    deltas = [abs(c["delta_us"]) for c in ch]
    T.check(deltas == sorted(deltas, reverse=True), "sorted by the absolute change")
    k = [t for t in d["totals"] if t["class"] == "kernel"][0]
    T.check(near(k["a_us"], 375) and near(k["b_us"], 501) and k["a_count"] == 9,
            "kernel totals 375 -> 501 us, 9 kernels (%s)" % k)

    w = diff_json(a + "@1-3", b + "@2")
    if w is not None:
        r = row(w, "kernel", "conv_kernel")
        T.check(r is not None and near(r["delta_us"], 50) and near(r["a_count"], 1),
                "windows: per iteration, conv_kernel +50 us (%s)" % r)
        T.check(w["a"]["iterations"] == 3 and w["b"]["iterations"] == 1 and
                w["a"]["first_step"] == 1 and w["a"]["last_step"] == 3, "the windows' steps")
    s = diff_json(a + "@1-2", a + "@2-3")
    T.check(s is not None and s["changes"] == [] and s["summary"]["unchanged"] > 0,
            "identical steps: A@1-2 against A@2-3 is empty")
    p = run([a, a])
    T.check(p.returncode == 0 and "no differences" in p.stdout, "text: A against A, no differences")
    p = run([a, b])
    T.check(p.returncode == 0 and "conv_kernel" in p.stdout.split("status")[-1].splitlines()[1],
            "text: conv_kernel on the first changed row")

    for args, rc, what in (([a + "@7", b], 1, "no iteration marker 7"),
                           ([a + "@3-1", b], 1, "not an iteration window"),
                           ([os.path.join(tmp, "none"), b], 1, "none"),
                           ([a], 2, "two traces")):
        p = run(args)
        T.check(p.returncode == rc and what in p.stderr,
                "%s: exit %d, '%s' (%d, %s)" % (args, rc, what, p.returncode, p.stderr.strip()))


FILL = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5Array"
        "IPcLi1EEEEEviT0_T1_")
FILL_SHOWN = "at::native::vectorized_elementwise_kernel<4, FillFunctor<...>, Array<...>>"
LONG = "void ns::a_kernel_whose_name_is_too_long_to_be_shown_whole_here<float>(%s, float*)"
LONG_SHOWN = "ns::a_kernel_whose_name_is_too_long_to_be_shown_whole_here<float>"


def demangler():
    """Whether this build demangles (configure found libsupc++'s demangler)."""
    with open(os.path.join(T.BUILD, "config.h")) as f:
        return "#define HAVE_DEMANGLE_CALLBACK 1" in f.read()


def shown_rows(text, header, cols):
    """The rows of the table under the line ending with header, one a row up to the first
    empty line, each split into its cols columns (the last, the name, whole)."""
    lines = text.splitlines()
    at = [i for i, ln in enumerate(lines) if ln.rstrip().endswith(header)]
    rows = []
    for ln in lines[at[0] + 1:] if at else []:
        if not ln.strip() or ln.startswith("("):
            break
        rows.append(ln.split(None, cols - 1))
    return rows


def names(tmp):
    a = imported(tmp, "na", trace([("aten::fill_", FILL, 100), ("aten::x", LONG % "int", 20),
                                   ("aten::y", LONG % "long", 30)]))
    b = imported(tmp, "nb", trace([("aten::fill_", FILL, 150), ("aten::x", LONG % "int", 10),
                                   ("aten::y", LONG % "long", 60)]))
    fill = FILL_SHOWN if demangler() else FILL
    d = diff_json(a, b)
    got = [(c["name"], c["delta_us"]) for c in d["changes"] if c["class"] == "kernel"] if d else []
    T.check([n for n, _ in got] == [FILL, LONG % "long", LONG % "int"],
            "--json: the raw kernel names, by change (%s)" % got)
    p = run([a, b])
    rows = [r[8] for r in shown_rows(p.stdout, "name", 9) if r[7] == "kernel"]
    want = [fill, LONG_SHOWN + " [1]", LONG_SHOWN + " [2]"]
    T.check(p.returncode == 0 and rows == want,
            "text: the kernels as reports show them, the alike ones numbered (%s)" % rows)
    p = subprocess.run([T.REPLAY, b, "--perturb", "3"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    rows = [r[5] for r in shown_rows(p.stdout, "kernel", 6)]
    want = [fill, LONG_SHOWN + " [1]", LONG_SHOWN + " [2]"]
    T.check(p.returncode == 0 and rows == want,
            "dpro-replay --perturb 3: the rows as reports show kernels, the alike ones "
            "numbered (%s, %s)" % (rows, p.stderr[-300:]))
    critical_path_named(tmp)
    exported(tmp, a, fill)


def critical_path_named(tmp):
    """dpro-replay --chrome on a device-bound trace (300 us kernels the synchronisation
    waits for): the critical path's kernel pieces as reports show kernels, the raw name in
    args.full_name."""
    c = imported(tmp, "nc", trace([("aten::x", LONG % "int", 300),
                                   ("aten::y", LONG % "long", 300)]))
    chrome = os.path.join(tmp, "nc-replay.json")
    p = subprocess.run([T.REPLAY, c, "--chrome", chrome], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    T.check(p.returncode == 0, "dpro-replay --chrome (%s)" % p.stderr[-300:])
    with open(chrome) as f:
        ev = json.load(f)["traceEvents"] if p.returncode == 0 else []
    raw = {LONG_SHOWN + " [1]": LONG % "int", LONG_SHOWN + " [2]": LONG % "long"}
    cp = {(e["name"], e.get("args", {}).get("full_name")) for e in ev
          if e.get("cat") == "critical_path" and e["name"] in raw}
    T.check(len(cp) == 2 and all(full == raw[n] for n, full in cp),
            "--chrome: the critical path's kernels shown numbered, full_name raw (%s)"
            % sorted(cp))
    p = subprocess.run([T.REPLAY, c, "--critical-path"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    text = p.stdout.split("  composition:", 1)[-1].split("\n", 1)[-1]
    rows = [r for r in (ln.split(None, 5) for ln in text.splitlines()) if len(r) == 6]
    kern = sorted(r[5] for r in rows if r[3] == "kernel")
    gaps = [r[5] for r in rows if r[3] == "stream_gap"]
    T.check(p.returncode == 0 and kern == sorted(raw) and gaps and set(gaps) <= set(raw),
            "--critical-path: the text report's kernel rows numbered as reports show alike "
            "kernels, a row of the same kernel with its number (%s, %s)" % (kern, gaps))


def exported(tmp, a, fill):
    """dpro-export of A: --chrome's kernel slices as reports name kernels, the raw name in
    args.full_name; --kineto's the raw names."""
    got = {}
    for how in ("--chrome", "--kineto"):
        out = os.path.join(tmp, "export%s.json" % how)
        args = ["--chrome", out] if how == "--chrome" else ["--kineto", "-o", out]
        p = subprocess.run([os.path.join(T.BUILD, "tools", "dpro-export"), a] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        T.check(p.returncode == 0, "dpro-export %s (%s)" % (how, p.stderr[-300:]))
        with open(out) as f:
            ev = json.load(f)["traceEvents"] if p.returncode == 0 else []
        got[how] = sorted({(e["name"], e.get("args", {}).get("full_name")) for e in ev
                           if e.get("cat") == "kernel" and e.get("ph") == "X"})
    raw = [FILL, LONG % "int", LONG % "long"]
    want = sorted([(fill, FILL if fill != FILL else None),
                   (LONG_SHOWN + " [1]", LONG % "int"), (LONG_SHOWN + " [2]", LONG % "long")])
    T.check(got["--chrome"] == want,
            "--chrome: the kernel slices named as reports name them, full_name raw (%s)"
            % got["--chrome"])
    T.check(got["--kineto"] == sorted((n, None) for n in raw),
            "--kineto: the raw kernel names (%s)" % got["--kineto"])


def kernel_json(path):
    """(count, summed dur in us) of the trace's kernel events, read from the JSON."""
    with gzip.open(path, "rt") as f:
        evs = json.load(f)["traceEvents"]
    ks = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return len(ks), sum(float(e.get("dur", 0)) for e in ks)


def real(tmp):
    files = sorted(glob.glob(os.path.join(T.KINETO, "*.json.gz")))
    if not files:
        if os.environ.get("CI") == "true":
            T.check(False, "%s holds the real traces (CI=true)" % T.KINETO)
        else:
            print("no %s: the real-trace part skipped" % T.KINETO)
        return
    for f in files:
        name = os.path.basename(f)[:-len(".json.gz")]
        out = os.path.join(tmp, name)
        p = subprocess.run([T.IMPORT, "kineto", "--quiet", f, "-o", out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        T.check(p.returncode == 0, "%s imports" % name)
        d = diff_json(out, out)
        if d is None:
            continue
        T.check(d["changes"] == [] and d["summary"]["unchanged"] > 0 and
                all(d["summary"][s] == 0 for s in ("added", "removed", "slower", "faster")),
                "%s against itself: no differences (%d names)" % (name, d["summary"]["unchanged"]))
        n, us = kernel_json(f)
        k = [t for t in d["totals"] if t["class"] == "kernel"][0]
        T.check(k["a_count"] == n and abs(k["a_us"] - us) <= 1e-6 * us + 0.01,
                "%s: %d kernels, %.1f us, as the JSON says (%d, %.1f)"
                % (name, k["a_count"], k["a_us"], n, us))


def main():
    if not os.path.exists(DIFF):  # always built: missing is a failure
        print("FAIL: %s not built" % DIFF)
        return 1
    if T.missing([T.IMPORT]):  # dpro-import needs yajl (configure)
        return T.SKIP
    with tempfile.TemporaryDirectory() as tmp:
        known(tmp)
        names(tmp)
        real(tmp)
    return 1 if T.failures else 0


if __name__ == "__main__":
    sys.exit(main())
