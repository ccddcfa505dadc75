#!/usr/bin/env python3
"""dpro-info's analyses (--launch --idle --memcpy --ops --queue --sequences) against an
independent reading of the Kineto JSON (tests/info/hta_reference.py).

Synthetic: two small Kineto traces written here with hand-known answers, imported with
dpro-import: one with three streams joined by an event (launch delays, an outlier, host and
kernel wait, a pinned copy of 1 MiB, nested cpu_ops and an annotation, kernel runs), one
whose host is held by a full launch queue of 100 ops (the depth, the calls held and for how
long are known from how it was written). On every trace, dpro-replay's own inference (its
info line) must find the depth, scope, long calls and held calls that --queue finds; where
a trace links launch calls to their ops by "External id", the op found around each call in
time must be that op. Both must
give the hand-known figures and agree with hta_reference.py.
Real: every Kineto trace of ../shared/traces/kineto is imported and every figure must equal
what hta_reference.py computes from the original (skipped where the traces are absent: a
failure in CI).
"""
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

B = os.environ.get("top_builddir", ".")
S = os.environ.get("top_srcdir", ".")
INFO = os.path.join(B, "tools", "dpro-info")
IMPORT = os.path.join(B, "tools", "dpro-import")
REPLAY = os.path.join(B, "tools", "dpro-replay")
sys.path.insert(0, os.path.join(S, "tests", "info"))
import hta_reference  # noqa: E402

ALL = ["--json", "--launch=1000000", "--idle", "--memcpy", "--ops=1000000", "--queue",
       "--sequences=1000000"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(args, want_rc=0, env=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    check(p.returncode == want_rc,
          "%s: exit %d, expected %d: %s" % (" ".join(args), p.returncode, want_rc, p.stderr))
    return p


def ns(us):
    return round(us * 1000)


def near(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-9


def analyses_of(path, tmp, extra=ALL):
    out = os.path.join(tmp, os.path.basename(path) + ".d")
    run([IMPORT, "kineto", "-q", "-o", out, path])
    got = json.loads(run([INFO] + extra + [out]).stdout)
    return got["analyses"]["per_rank"][0], out


def cmp_summary(label, g, r):
    check(ns(g["p50_us"]) == r["p50"] and ns(g["p95_us"]) == r["p95"] and
          ns(g["max_us"]) == r["max"] and near(g["mean_us"] * 1000, r["mean"]),
          "%s: %r, expected %r" % (label, g, r))


def cmp_launch(label, g, r):
    for k in ("launches", "unlaunched_kernels", "other_launched", "cpu_outliers",
              "delay_outliers"):
        check(g[k] == r[k], "%s: launch %s %r, expected %r" % (label, k, g[k], r[k]))
    cmp_summary(label + ": launch cpu", g["cpu"], r["cpu"])
    cmp_summary(label + ": launch delay", g["delay"], r["delay"])
    check(g["kernel_names"] == len(r["kernels"]), "%s: launch kernel_names" % label)
    prev = None
    for k in g["kernels"]:
        w = r["kernels"].get(k["name"])
        if not check(w is not None, "%s: launch kernel %r unknown" % (label, k["name"][:60])):
            continue
        check(k["count"] == w["cpu"]["count"], "%s: %r count" % (label, k["name"][:60]))
        cmp_summary("%s: %r cpu" % (label, k["name"][:60]), k["cpu"], w["cpu"])
        cmp_summary("%s: %r delay" % (label, k["name"][:60]), k["delay"], w["delay"])
        check(prev is None or prev >= k["count"], "%s: launch rows not by count" % label)
        prev = k["count"]
    for o in g["outliers"]:
        w = r["kernels"][o["name"]][o["what"]]
        floor = (hta_reference.OUTLIER_DELAY_MIN_NS if o["what"] == "delay"
                 else hta_reference.OUTLIER_CPU_MIN_NS)
        check(ns(o["median_us"]) == w["p50"] and ns(o["us"]) > floor and
              ns(o["us"]) > hta_reference.OUTLIER_FACTOR * max(w["p50"], 0),
              "%s: outlier %r does not pass the rule" % (label, o))


def cmp_idle(label, g, r):
    check(g["waits"] == r["waits"], "%s: idle waits %r, expected %r" % (label, g["waits"],
                                                                         r["waits"]))
    check(len(g["streams"]) == len(r["streams"]), "%s: idle streams" % label)
    for s in g["streams"]:
        w = r["streams"].get(str(s["stream"]))
        if not check(w is not None, "%s: idle stream %r unknown" % (label, s["stream"])):
            continue
        got = dict(ops=s["ops"], gaps=s["gaps"], span_ns=ns(s["span_us"]),
                   busy_ns=ns(s["busy_us"]), host_ns=ns(s["host_wait_us"]),
                   kernel_ns=ns(s["kernel_wait_us"]), other_ns=ns(s["other_us"]))
        check(got == w, "%s: idle stream %d: %r, expected %r" % (label, s["stream"], got, w))
        check(ns(s["idle_us"]) == w["span_ns"] - w["busy_ns"] ==
              w["host_ns"] + w["kernel_ns"] + w["other_ns"],
              "%s: idle stream %d does not add up" % (label, s["stream"]))


def cmp_memcpy(label, g, r):
    n = 0
    for k in g["kinds"]:
        base = [k["op"], k["kind"], k["memory"]]
        for key, row in [(base + [None], k)] + [
                (base + [[s["size_min"], s["size_max"]]], s) for s in k["sizes"]]:
            n += 1
            w = r.get(json.dumps(key))
            check(w is not None and w == dict(count=row["count"], bytes=row["bytes"],
                                              ns=ns(row["us"])),
                  "%s: memcpy %r: %r, expected %r" % (label, key, row, w))
            if row["us"]:
                check(near(row["gb_per_s"], row["bytes"] / ns(row["us"])),
                      "%s: memcpy %r bandwidth" % (label, key))
    check(n == len(r), "%s: memcpy %d rows, expected %d" % (label, n, len(r)))


def cmp_ops(label, g, r):
    check(g["device_ops"] == r["device_ops"] and ns(g["device_us"]) == r["device_ns"],
          "%s: ops device totals" % label)
    for key, ck in (("cpu_ops", "cpu_op"), ("annotations", "annotation")):
        w = r[key]
        check(g["charged"][ck]["device_ops"] == w["charged_ops"] and
              ns(g["charged"][ck]["device_us"]) == w["charged_ns"],
              "%s: ops charged %s %r, expected %d %d" % (label, ck, g["charged"][ck],
                                                         w["charged_ops"], w["charged_ns"]))
        check(g["op_names" if key == "cpu_ops" else "annotation_names"] == len(w["rows"]),
              "%s: %s names" % (label, key))
        prev = None
        for row in g[key]:
            x = w["rows"].get(row["name"])
            if not check(x is not None, "%s: %s %r unknown" % (label, key, row["name"])):
                continue
            got = (row["instances"], ns(row["host_us"]), row["launches"], row["device_ops"],
                   ns(row["device_us"]), row["kernel_names"])
            want = (x["instances"], x["host_ns"], x["launches"], x["device_ops"],
                    x["device_ns"], len(x["kernels"]))
            check(got == want, "%s: %s %r: %r, expected %r" % (label, key, row["name"], got, want))
            if x["device_ops"]:
                check(near(row["launch_delay_mean_us"] * 1000, x["delay"] / x["device_ops"]),
                      "%s: %s %r: delay" % (label, key, row["name"]))
            for k in row["kernels"]:
                check(x["kernels"].get(k["name"]) == [k["count"], ns(k["device_us"])],
                      "%s: %s %r kernel %r" % (label, key, row["name"], k["name"][:60]))
            ks = sorted((v[1] for v in x["kernels"].values()), reverse=True)
            check([ns(k["device_us"]) for k in row["kernels"]] == ks[:len(row["kernels"])],
                  "%s: %s %r: not its top kernels" % (label, key, row["name"]))
            check(prev is None or prev >= ns(row["device_us"]), "%s: %s order" % (label, key))
            prev = ns(row["device_us"])


def cmp_queue(label, g, r):
    for k in ("depth", "scope", "long_calls", "explained", "blocked_calls"):
        check(g[k] == r[k], "%s: queue %s %r, expected %r" % (label, k, g[k], r[k]))
    check(ns(g["blocked_us"]) == r["blocked_ns"] and ns(g["launch_cost_us"]) ==
          r["launch_cost_ns"] and ns(g["long_us"]) == r["long_ns"], "%s: queue times" % label)
    check(len(g["streams"]) == len(r["streams"]), "%s: queue streams" % label)
    for s in g["streams"]:
        w = r["streams"].get(str(s["stream"]))
        if not check(w is not None, "%s: queue stream %r unknown" % (label, s["stream"])):
            continue
        check(s["ops"] == w["ops"] and s["max_len"] == w["max_len"] and
              ns(s["window_us"]) == w["window_ns"] and near(s["mean_len"], w["mean_len"]) and
              s["blocked_calls"] == w["blocked_calls"] and
              ns(s["blocked_us"]) == w["blocked_ns"],
              "%s: queue stream %d: %r, expected %r" % (label, s["stream"], s, w))


def cmp_sequences(label, g, r):
    check(ns(g["device_us"]) == r["device_ns"], "%s: sequences device time" % label)
    for bl in g["by_length"]:
        n = bl["n"]
        want = {k: v for k, v in r["grams"].items() if v["n"] == n}
        check(bl["distinct"] == len(want), "%s: %d-grams: %d distinct, expected %d" %
              (label, n, bl["distinct"], len(want)))
        shown = set()
        prev = None
        for t in bl["top"]:
            key = " -> ".join(t["names"])
            shown.add(key)
            w = want.get(key)
            check(w is not None and w["count"] == t["count"] and w["ns"] == ns(t["device_us"]),
                  "%s: %d-gram %r: %r, expected %r" % (label, n, key[:80], t, w))
            check(prev is None or prev >= t["count"], "%s: %d-grams order" % (label, n))
            prev = t["count"]
        rest = [v["count"] for k, v in want.items() if k not in shown]
        check(not rest or (prev is not None and max(rest) <= prev),
              "%s: %d-grams: a more frequent one is not listed" % (label, n))


QUEUE_LINE = re.compile(r"launch queue of (\d+) ops per (stream|device) \((\d+) of (\d+) long "
                        r"launch calls found it full; (\d+) calls held")


def cmp_replay_queue(label, q, trace_dir):
    """dpro-replay's own inference (its info line) must find what --queue found."""
    p = run([REPLAY, trace_dir], env=dict(os.environ, DPRO_LOG="info"))
    m = QUEUE_LINE.search(p.stderr)
    if m is None:
        check(q["depth"] == 0, "%s: --queue depth %d, dpro-replay found none" % (label, q["depth"]))
        return
    want = (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))
    got = (q["depth"], q["scope"], q["explained"], q["long_calls"], q["blocked_calls"])
    check(got == want, "%s: --queue %r, dpro-replay %r" % (label, got, want))


def cmp_ops_external_id(label, got, path):
    """Where Kineto links each launch call to its op by "External id" (newer traces: the
    call carries the id of the op on top of the profiler's stack), that op must be the one
    dpro-info found around the call in time: per op name, the same device ops. Older traces
    number their calls by correlation instead; they are left out (not every call finds an
    op by its id)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        events = json.load(f)["traceEvents"]
    op_of = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            op_of.setdefault((e.get("args") or {}).get("External id"), e["name"])
    call_op, devices = {}, []
    for e in events:
        a = e.get("args") or {}
        if e.get("ph") != "X" or not a.get("correlation"):
            continue
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            call_op.setdefault(a["correlation"], op_of.get(a.get("External id")))
        elif e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            devices.append(a["correlation"])
    names = [call_op.get(c, "") for c in devices if c in call_op]
    if not names or None in names:
        return 0
    want = {}
    for n in names:
        want[n] = want.get(n, 0) + 1
    have = {r["name"]: r["device_ops"] for r in got["ops"]["cpu_ops"] if r["device_ops"]}
    check(have == want, "%s: device ops per cpu_op by time %r, by External id %r" %
          (label, sorted(have.items())[:5], sorted(want.items())[:5]))
    return len(names)


def compare(label, got, ref):
    cmp_launch(label, got["launch"], ref["launch"])
    cmp_idle(label, got["idle"], ref["idle"])
    cmp_memcpy(label, got["memcpy"], ref["memcpy"])
    cmp_ops(label, got["ops"], ref["ops"])
    cmp_queue(label, got["queue"], ref["queue"])
    cmp_sequences(label, got["sequences"], ref["sequences"])


def reference(path):
    # through JSON, as the script prints it (keys become text)
    return json.loads(json.dumps(hta_reference._jsonable(hta_reference.reference(path))))


def X(cat, name, ts, dur, tid, **args):
    return dict(ph="X", cat=cat, name=name, pid=1 if tid else 0, tid=tid, ts=ts, dur=dur,
                args=args)


def multistream_trace():
    """Three streams; every figure below is worked out by hand from these times (us)."""
    T = 100
    ev = [X("user_annotation", "ProfilerStep#1", 0, 600, T),
          X("user_annotation", "fwd", 0, 200, T),
          X("cpu_op", "aten::mm", 0, 100, T), X("cpu_op", "aten::addmm", 55, 20, T),
          X("cpu_op", "aten::relu", 99, 51, T),
          X("cuda_runtime", "cudaLaunchKernel", 10, 5, T, correlation=1),
          X("kernel", "kA", 20, 30, 7, stream=7, correlation=1),
          X("cuda_runtime", "cudaLaunchKernel", 16, 4, T, correlation=2),
          X("kernel", "kC", 22, 8, 8, stream=8, correlation=2),
          X("cuda_runtime", "cudaLaunchKernel", 60, 5, T, correlation=3),
          X("kernel", "kB", 70, 10, 7, stream=7, correlation=3),
          X("cuda_runtime", "cudaEventRecord", 66, 1, T, correlation=4),
          X("cuda_runtime", "cudaStreamWaitEvent", 68, 1, T, correlation=5),
          X("cuda_sync", "Stream Wait Event", 69, 1, 8, stream=8, correlation=5,
            cuda_sync_kind="Stream Wait Event", wait_on_stream=7,
            wait_on_cuda_event_record_corr_id=4, wait_on_cuda_event_id=1),
          X("cuda_runtime", "cudaLaunchKernel", 70, 2, T, correlation=6),
          X("kernel", "kA", 81, 9, 8, stream=8, correlation=6)]
    for i in range(5):  # kD: launch delays 1, 1, 1, 1, 200 us
        t = 100 + 10 * i
        ev.append(X("cuda_runtime", "cudaLaunchKernel", t, 2, T, correlation=10 + i))
        ev.append(X("kernel", "kD", t + 3 if i < 4 else t + 202, 2, 9, stream=9,
                    correlation=10 + i))
    ev += [X("cuda_runtime", "cudaMemcpyAsync", 400, 3, T, correlation=20),
           X("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 405, 100, 10, stream=10,
             correlation=20, bytes=1048576),
           X("cuda_runtime", "cudaMemsetAsync", 410, 2, T, correlation=21),
           X("gpu_memset", "Memset (Device)", 510, 1, 10, stream=10, correlation=21, bytes=0)]
    return dict(traceEvents=ev)


def check_multistream(got, label):
    L = got["launch"]
    check(L["launches"] == 9 and L["delay_outliers"] == 1 and L["cpu_outliers"] == 0,
          "%s: launches %d, outliers %d/%d" % (label, L["launches"], L["cpu_outliers"],
                                                L["delay_outliers"]))
    kd = [k for k in L["kernels"] if k["name"] == "kD"]
    check(kd and kd[0]["count"] == 5 and kd[0]["delay"]["p50_us"] == 1 and
          kd[0]["delay"]["max_us"] == 200 and near(kd[0]["delay"]["mean_us"], 40.8) and
          kd[0]["cpu"]["p95_us"] == 2, "%s: kD launch statistics %r" % (label, kd))
    check(L["outliers"] and L["outliers"][0]["name"] == "kD" and
          L["outliers"][0]["what"] == "delay" and L["outliers"][0]["us"] == 200,
          "%s: outliers %r" % (label, L["outliers"]))
    ka = [k for k in L["kernels"] if k["name"] == "kA"][0]
    check(ka["cpu"]["max_us"] == 5 and ka["delay"]["p50_us"] == 5 and ka["delay"]["max_us"] == 9,
          "%s: kA %r" % (label, ka))
    st = {s["stream"]: s for s in got["idle"]["streams"]}
    want = {7: (20, 15, 0, 5), 8: (51, 42, 8, 1), 9: (231, 28, 0, 203), 10: (5, 0, 0, 5)}
    for s, (idle, host, kw, other) in want.items():
        g = st.get(s, {})
        check((g.get("idle_us"), g.get("host_wait_us"), g.get("kernel_wait_us"),
               g.get("other_us")) == (idle, host, kw, other),
              "%s: idle stream %d: %r, expected %r" % (label, s, g, (idle, host, kw, other)))
    kinds = {(k["op"], k["kind"], k["memory"]): k for k in got["memcpy"]["kinds"]}
    h2d = kinds.get(("memcpy", "HtoD", "pinned"))
    check(h2d and h2d["bytes"] == 1048576 and h2d["us"] == 100 and
          near(h2d["gb_per_s"], 10.48576) and
          [(s["size_min"], s["size_max"]) for s in h2d["sizes"]] == [(1048576, 4194304)],
          "%s: memcpy HtoD pinned %r" % (label, h2d))
    ms = kinds.get(("memset", "memset", "device"))
    check(ms and ms["count"] == 1 and [(s["size_min"], s["size_max"]) for s in ms["sizes"]] ==
          [(0, 1)], "%s: memset %r" % (label, ms))
    ops = {o["name"]: o for o in got["ops"]["cpu_ops"]}
    want = {"aten::mm": (2, 38, 3.5), "aten::addmm": (2, 19, 7), "aten::relu": (5, 10, 40.8)}
    for name, (n, us, delay) in want.items():
        o = ops.get(name, {})
        check(o.get("device_ops") == n and near(o.get("device_us", -1), us) and
              near(o.get("launch_delay_mean_us", -1), delay),
              "%s: cpu_op %s %r, expected %r" % (label, name, o, (n, us, delay)))
    anns = {a["name"]: a for a in got["ops"]["annotations"]}
    check(set(anns) == {"fwd"} and anns["fwd"]["device_ops"] == 9 and
          near(anns["fwd"]["device_us"], 67), "%s: annotations %r" % (label, anns))
    q = got["queue"]
    s9 = [s for s in q["streams"] if s["stream"] == 9][0]
    check(q["depth"] == 0 and s9["max_len"] == 1 and near(s9["mean_len"], 224 / 244),
          "%s: queue %r" % (label, q))
    seq = {bl["n"]: {" -> ".join(t["names"]): t["count"] for t in bl["top"]}
           for bl in got["sequences"]["by_length"]}
    check(seq == {2: {"kD -> kD": 4, "kA -> kB": 1, "kC -> kA": 1},
                  3: {"kD -> kD -> kD": 3}, 4: {"kD -> kD -> kD -> kD": 2}},
          "%s: sequences %r" % (label, seq))


Q, NK, KDUR, COST, STEP = 100, 400, 100, 2, 1


def queue_trace():
    """One stream, kernels of 100 us back to back from 10 us; the host launches one every
    3 us (2 us calls) but a call cannot end before the op 100 places earlier ended. Returns
    the trace, the calls held and their summed wait (ns)."""
    ev, t, ends, held, held_ns = [], 0, [], 0, 0
    for i in range(NK):
        start = 10 + i * KDUR
        ends.append(start + KDUR)
        e = t + COST
        if i >= Q and ends[i - Q] > e:
            e = ends[i - Q]
        if i >= Q and ends[i - Q] > t:
            held += 1
            held_ns += (ends[i - Q] - t) * 1000
        ev.append(X("cuda_runtime", "cudaLaunchKernel", t, e - t, 100, correlation=i + 1))
        ev.append(X("kernel", "kQ", start, KDUR, 7, stream=7, correlation=i + 1))
        t = e + STEP
    return dict(traceEvents=ev), held, held_ns


def main():
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "multistream.json")
        with open(p, "w") as f:
            json.dump(multistream_trace(), f)
        got, _ = analyses_of(p, tmp)
        check_multistream(got, "synthetic")
        compare("synthetic", got, reference(p))

        p = os.path.join(tmp, "queue.json")
        doc, held, held_ns = queue_trace()
        with open(p, "w") as f:
            json.dump(doc, f)
        got, out = analyses_of(p, tmp)
        q = got["queue"]
        check(q["depth"] == Q and q["scope"] == "stream" and q["blocked_calls"] == held and
              ns(q["blocked_us"]) == held_ns and held > 100,
              "queue: %r, expected depth %d, %d calls held %d ns" % (q, Q, held, held_ns))
        compare("queue", got, reference(p))
        cmp_replay_queue("queue", q, out)

        # the text output names every analysis; the options refuse a bad K
        txt = run([INFO, "--analyses", out]).stdout
        for h in ("launch statistics", "idle time by stream", "memcpy and memset bandwidth",
                  "device work by cpu_op", "launch queues", "frequent kernel sequences"):
            check(h in txt, "text output lacks %r" % h)
        run([INFO, "--launch=0", out], want_rc=2)
        run([INFO, "--quick", "--idle", out], want_rc=2)
        one = json.loads(run([INFO, "--json", "--idle", out]).stdout)["analyses"]["per_rank"][0]
        check(set(one) == {"path", "rank", "idle"}, "--idle alone gives %r" % sorted(one))

        traces = sorted(glob.glob(os.path.join(S, "..", "shared", "traces", "kineto",
                                               "*.json.gz")))
        if not traces:
            print("SKIP real traces: ../shared/traces/kineto not found")
        for path in traces:
            label = os.path.basename(path)
            got, out = analyses_of(path, tmp)
            compare(label, got, reference(path))
            cmp_replay_queue(label, got["queue"], out)
            linked = cmp_ops_external_id(label, got, path)
            print("%s: launches %d, queue depth %d, %d cpu_op names, %d device ops checked "
                  "by External id" % (label, got["launch"]["launches"], got["queue"]["depth"],
                                      got["ops"]["op_names"], linked))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
