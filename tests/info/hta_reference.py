#!/usr/bin/env python3
"""hta_reference.py FILE.json[.gz]: the figures of dpro-info's analyses, read straight from a
Kineto trace, as an independent check of replay/analyses/ (analyses.h says what each figure
is). The file is json-loaded whole with the standard library (times as exact decimals, then
whole nanoseconds rounded half up, as dpro-import stores them); nothing of dpro is used.

Prints one JSON object: launch, idle, memcpy, ops, queue, sequences, with every row (no top
cut) and times in integer nanoseconds (keys ending in _ns).
"""
import bisect
import decimal
import heapq
import gzip
import json
import re
import sys

OUTLIER_FACTOR = 10
OUTLIER_CPU_MIN_NS = 50000
OUTLIER_DELAY_MIN_NS = 100000
BQ_LONG_MIN_NS, BQ_LONG_FACTOR, BQ_MIN_LONG, BQ_MIN_DEPTH = 50000, 8, 8, 64
KIND_ORDER = {"kernel": 2, "gpu_memcpy": 3, "gpu_memset": 4}
COPY_KINDS = [("HtoD", "HtoD"), ("DtoH", "DtoH"), ("DtoD", "DtoD"), ("HtoH", "HtoH"),
              ("PtoP", "PtoP"), ("Peer", "PtoP"), ("HtoA", "HtoD"), ("AtoH", "DtoH"),
              ("AtoD", "DtoD"), ("DtoA", "DtoD"), ("AtoA", "DtoD")]


def ns(v):
    d = decimal.Decimal(str(v)) * 1000
    return int(d.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def num(v, dflt=None):
    """A number the way Kineto writes it: an int, a float, or a decimal or hex string."""
    if v is None or isinstance(v, bool):
        return dflt
    if isinstance(v, (int, decimal.Decimal, float)):
        return int(v)
    try:
        return int(v, 0)
    except (TypeError, ValueError):
        return dflt


def api_class(name):
    """launch, graph, memcpy_sync, memcpy, memset or other, as dpro_api_classify decides."""
    base = re.sub(r"^(cuda|cu|hip)", "", name)
    base = re.sub(r"(_ptsz|_ptds|_spt|_v\d+)+$", "", base)
    if re.match(r"^(LaunchKernel|LaunchCooperativeKernel|ExtLaunchKernel|ModuleLaunchKernel|"
                r"ExtModuleLaunchKernel|LaunchByPtr|LaunchGrid)", base):
        return "launch"
    if base.startswith("GraphLaunch"):
        return "graph"
    if base.startswith("Memcpy"):
        return "memcpy" if "Async" in base else "memcpy_sync"
    if base.startswith("Memset"):
        return "memset"
    return "other"


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    apis, ops, ranges, waits = [], [], [], []
    for idx, e in enumerate(events):
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat, a = e.get("cat"), e.get("args") or {}
        ts, dur = ns(e["ts"]), max(ns(e.get("dur", 0)), 0)
        tid = num(e.get("tid"), 0)
        thread = tid if tid and tid > 0 else 0
        corr = num(a.get("correlation"), 0)
        corr = corr if corr > 0 else 0
        name = e.get("name", "")
        if cat in ("cuda_runtime", "cuda_driver"):
            if corr:
                apis.append(dict(start=ts, end=ts + dur, corr=corr, thread=thread,
                                 cls=api_class(name), idx=idx))
        elif cat in KIND_ORDER:
            s = num(a.get("stream"), -1)
            stream = s if s >= 0 else (tid if tid >= 0 else 0)
            ops.append(dict(kind=cat, name=name, start=ts, end=ts + dur, corr=corr,
                            stream=stream, bytes=max(num(a.get("bytes"), 0), 0), idx=idx))
        elif cat == "cuda_sync":
            kind = a.get("cuda_sync_kind") or name
            rec, peer = num(a.get("wait_on_cuda_event_record_corr_id"), -1), \
                num(a.get("wait_on_stream"), -1)
            if "Wait Event" in kind and rec > 0 and peer >= 0:
                s = num(a.get("stream"), -1)
                waits.append(dict(stream=s if s >= 0 else 0, corr_wait=corr, rec_stream=peer,
                                  corr_rec=rec))
        elif cat == "cpu_op" or cat == "user_annotation":
            if cat == "user_annotation" and re.fullmatch(r"ProfilerStep#\d+", name):
                continue
            if cat == "user_annotation" and not thread:
                continue
            ranges.append(dict(start=ts, end=ts + dur, thread=thread, name=name,
                               cpu_op=cat == "cpu_op", idx=idx))
    kcorr = {o["corr"] for o in ops if o["kind"] == "kernel" and o["corr"]}
    apis = [x for x in apis if x["cls"] != "other" or x["corr"] in kcorr]
    first = {}
    for x in sorted(apis, key=lambda x: (x["corr"], x["start"])):
        first.setdefault(x["corr"], x)
    for o in ops:
        o["api"] = first.get(o["corr"]) if o["corr"] else None
    ops.sort(key=lambda o: (o["start"], KIND_ORDER[o["kind"]], o["idx"]))
    return apis, ops, ranges, waits


def summary(vals):
    v = sorted(vals)
    n = len(v)
    if not n:
        return dict(count=0, mean=0.0, p50=0, p95=0, max=0)
    rank = lambda p: v[max((p * n + 99) // 100, 1) - 1]
    return dict(count=n, mean=sum(v) / n, p50=rank(50), p95=rank(95), max=v[-1])


def launch(ops):
    by, allc, alld, unl, other = {}, [], [], 0, 0
    for o in ops:
        if o["kind"] != "kernel":
            continue
        a = o["api"]
        if a is None:
            unl += 1
            continue
        if a["cls"] != "launch":
            other += 1
            continue
        cpu, delay = a["end"] - a["start"], o["start"] - a["end"]
        by.setdefault(o["name"], []).append((cpu, delay))
        allc.append(cpu)
        alld.append(delay)
    rows, nout = {}, [0, 0]
    for name, s in by.items():
        c, d = summary([x for x, _ in s]), summary([y for _, y in s])
        rows[name] = dict(cpu=c, delay=d)
        for cpu, delay in s:
            nout[0] += cpu > OUTLIER_CPU_MIN_NS and cpu > OUTLIER_FACTOR * max(c["p50"], 0)
            nout[1] += delay > OUTLIER_DELAY_MIN_NS and delay > OUTLIER_FACTOR * max(d["p50"], 0)
    return dict(launches=len(allc), unlaunched_kernels=unl, other_launched=other,
                cpu=summary(allc), delay=summary(alld), kernels=rows, cpu_outliers=nout[0],
                delay_outliers=nout[1])


def streams(ops):
    by = {}
    for o in ops:
        by.setdefault(o["stream"], []).append(o)
    return by


def last_before(stream_ops, corr):
    best = None
    for o in stream_ops:
        if o["corr"] and o["corr"] < corr and (best is None or o["corr"] > best["corr"]):
            best = o
    return best


def idle(ops, waits):
    by = streams(ops)
    uniq = {}
    for w in waits:
        uniq.setdefault((w["stream"], w["corr_wait"]), w)
    rows = {}
    for s, so in by.items():
        ws = sorted((w for (ws_, _), w in uniq.items() if ws_ == s), key=lambda w: w["corr_wait"])
        end, seen = so[0]["end"], so[0]["corr"]
        ws = [w for w in ws if w["corr_wait"] >= seen]
        r = dict(ops=len(so), gaps=0, busy_ns=so[0]["end"] - so[0]["start"], host_ns=0,
                 kernel_ns=0, other_ns=0)
        wi = 0
        for b in so[1:]:
            dep = 0
            while b["corr"] and wi < len(ws) and ws[wi]["corr_wait"] < b["corr"]:
                w = ws[wi]
                wi += 1
                if w["rec_stream"] != s and w["rec_stream"] in by:
                    x = last_before(by[w["rec_stream"]], w["corr_rec"])
                    if x is not None:
                        dep = max(dep, x["end"])
            if b["start"] > end:
                gap = b["start"] - end
                host = 0
                if b["api"] is not None:
                    host = min(max(b["api"]["end"] - end, 0), gap)
                kw = max(min(dep, b["start"]) - (end + host), 0)
                r["gaps"] += 1
                r["host_ns"] += host
                r["kernel_ns"] += kw
                r["other_ns"] += gap - host - kw
                r["busy_ns"] += b["end"] - b["start"]
                end = b["end"]
            elif b["end"] > end:
                r["busy_ns"] += b["end"] - end
                end = b["end"]
        r["span_ns"] = end - so[0]["start"]
        rows[s] = r
    return dict(waits=len(uniq), streams=rows)


def memory_of(name):
    for tok, m in (("Pinned", "pinned"), ("Pageable", "pageable"), ("Managed", "managed"),
                   ("Device", "device")):
        if tok in name:
            return m
    return "unknown"


def memcpy(ops):
    rows = {}
    for o in ops:
        if o["kind"] == "kernel":
            continue
        if o["kind"] == "gpu_memcpy":
            op, kind = "memcpy", next((k for t, k in COPY_KINDS if t in o["name"]), "Default")
        else:
            op, kind = "memset", "memset"
        b = o["bytes"]
        k = -1
        while b:
            k += 1
            b >>= 2
        smin, smax = (0, 1) if k < 0 else (4 ** k, 4 ** (k + 1))
        for key in ((op, kind, memory_of(o["name"]), None), (op, kind, memory_of(o["name"]),
                                                            (smin, smax))):
            r = rows.setdefault(key, dict(count=0, bytes=0, ns=0))
            r["count"] += 1
            r["bytes"] += o["bytes"]
            r["ns"] += o["end"] - o["start"]
    return rows


def enclosing(ranges, starts, t):
    """The range of ranges (sorted by start, longest first, file order) around t with the
    latest start (then the shortest, then the last in the file), or None."""
    i = bisect.bisect_right(starts, t)
    while i > 0:
        i -= 1
        if ranges[i]["end"] >= t:
            return ranges[i]
    return None


def ops_map(ops, ranges):
    out = {}
    for cpu_op in (True, False):
        by_thread = {}
        for g in sorted(ranges, key=lambda g: (g["start"], -g["end"], g["idx"])):
            if g["cpu_op"] == cpu_op:
                by_thread.setdefault(g["thread"], []).append(g)
        starts = {t: [g["start"] for g in gs] for t, gs in by_thread.items()}
        rows = {}
        for g in ranges:
            if g["cpu_op"] == cpu_op:
                r = rows.setdefault(g["name"], dict(instances=0, host_ns=0, launches=set(),
                                                    device_ops=0, device_ns=0, delay=0,
                                                    kernels={}))
                r["instances"] += 1
                r["host_ns"] += g["end"] - g["start"]
        charged = [0, 0]
        cache = {}
        for o in ops:
            a = o["api"]
            if a is None:
                continue
            key = id(a)
            if key not in cache:
                cache[key] = enclosing(by_thread.get(a["thread"], []),
                                       starts.get(a["thread"], []), a["start"])
            g = cache[key]
            if g is None:
                continue
            r = rows[g["name"]]
            d = o["end"] - o["start"]
            r["device_ops"] += 1
            r["device_ns"] += d
            r["delay"] += o["start"] - a["end"]
            r["launches"].add(key)
            k = r["kernels"].setdefault(o["name"], [0, 0])
            k[0] += 1
            k[1] += d
            charged[0] += 1
            charged[1] += d
        for r in rows.values():
            r["launches"] = len(r["launches"])
        out["cpu_ops" if cpu_op else "annotations"] = dict(rows=rows, charged_ops=charged[0],
                                                           charged_ns=charged[1])
    out["device_ops"] = len(ops)
    out["device_ns"] = sum(o["end"] - o["start"] for o in ops)
    return out


def queue(ops):
    launched = [o for o in ops if o["api"] is not None]
    q = dict(depth=0, scope="none", long_calls=0, explained=0, blocked_calls=0, blocked_ns=0,
             streams={})
    # launch ids: the calls in correlation order, as the C side numbers them
    order = sorted({id(o["api"]): o["api"] for o in launched}.values(),
                   key=lambda a: (a["corr"], a["start"]))
    lid = {id(a): i for i, a in enumerate(order)}
    pos = {id(o): i for i, o in enumerate(ops)}
    rec = [dict(ls=o["api"]["start"], le=o["api"]["end"], me=o["end"], launch=lid[id(o["api"])],
                res=o["stream"], op=pos[id(o)], blocking=o["api"]["cls"] == "memcpy_sync")
           for o in launched]
    for s in {r["res"] for r in rec}:
        steps = []
        for r in rec:
            if r["res"] == s:
                steps += [(r["ls"], 1), (max(r["me"], r["ls"]), -1)]
        steps.sort(key=lambda x: (x[0], x[1]))
        length = mx = 0
        area = 0
        for i, (t, d) in enumerate(steps):
            if i:
                area += length * (t - steps[i - 1][0])
            length += d
            mx = max(mx, length)
        window = steps[-1][0] - steps[0][0]
        q["streams"][s] = dict(ops=len(steps) // 2, max_len=mx, window_ns=window,
                               mean_len=area / window if window else 0.0, blocked_calls=0,
                               blocked_ns=0)
    if not rec:
        return q
    dev_key = lambda r: (r["ls"], r["launch"], r["op"])
    rec.sort(key=dev_key)
    costs = []
    for i, r in enumerate(rec):
        if i == 0 or r["launch"] != rec[i - 1]["launch"]:
            costs.append(r["le"] - r["ls"])
    costs.sort()
    cost = max(costs[len(costs) // 10], 0)
    long_ns = max(cost * BQ_LONG_FACTOR, BQ_LONG_MIN_NS)

    def occupancy(per_stream):
        u, live = [], []
        for i, r in enumerate(rec):
            new = i == 0 or (per_stream and r["res"] != rec[i - 1]["res"])
            if new:
                live = []
            if new or r["launch"] != rec[i - 1]["launch"]:
                while live and live[0] <= r["ls"]:
                    heapq.heappop(live)
                u.append(len(live))
            else:
                u.append(-1)
            heapq.heappush(live, r["me"])
        return u

    def depth(u):
        ls = sorted(u[i] for i, r in enumerate(rec)
                    if u[i] >= 0 and not r["blocking"] and r["le"] - r["ls"] > long_ns)
        if len(ls) < BQ_MIN_LONG:
            return 0, len(ls), 0
        d = ls[len(ls) // 2]
        if d < BQ_MIN_DEPTH:
            return 0, len(ls), 0
        near = sum(1 for x in ls if d - d // 8 <= x <= d + d // 8)
        if 2 * near < len(ls):
            return 0, len(ls), 0
        return d, len(ls), near

    u = occupancy(False)
    q_dev, n_long, e_dev = depth(u)
    q["long_calls"] = n_long
    rec.sort(key=lambda r: (r["res"],) + dev_key(r))
    u = occupancy(True)
    q_str, _, e_str = depth(u)
    per_stream = 0
    if q_str > 0 and e_str >= e_dev:
        q.update(depth=q_str, scope="stream", explained=e_str)
        per_stream = 1
    elif q_dev > 0:
        q.update(depth=q_dev, scope="device", explained=e_dev)
        rec.sort(key=dev_key)
        u = occupancy(False)
    d, qstart = q["depth"], 0
    for i in range(len(rec) if d else 0):
        if i > 0 and per_stream and rec[i]["res"] != rec[i - 1]["res"]:
            qstart = i
        if u[i] < 0 or i - qstart < d:
            continue
        src, h = rec[i - d], rec[i]
        if src["launch"] == h["launch"] or src["me"] > h["le"]:
            continue
        if src["me"] > h["ls"]:
            st = q["streams"][h["res"]]
            st["blocked_calls"] += 1
            st["blocked_ns"] += src["me"] - h["ls"]
            q["blocked_calls"] += 1
            q["blocked_ns"] += src["me"] - h["ls"]
    q["launch_cost_ns"], q["long_ns"] = cost, long_ns
    return q


def sequences(ops):
    grams = {}
    for s, so in streams(ops).items():
        run = []
        for o in so:
            if o["kind"] != "kernel":
                run = []
                continue
            run.append((o["name"], o["end"] - o["start"]))
            for n in range(2, 5):
                if len(run) >= n:
                    w = run[-n:]
                    g = grams.setdefault(tuple(x for x, _ in w), [0, 0])
                    g[0] += 1
                    g[1] += sum(d for _, d in w)
    return dict(device_ns=sum(o["end"] - o["start"] for o in ops),
                grams={" -> ".join(k): dict(n=len(k), count=v[0], ns=v[1])
                       for k, v in grams.items()})


def reference(path):
    apis, ops, ranges, waits = load(path)
    return dict(launch=launch(ops), idle=idle(ops, waits), memcpy=memcpy(ops),
                ops=ops_map(ops, ranges), queue=queue(ops), sequences=sequences(ops))


def _jsonable(x):
    if isinstance(x, dict):
        return {(k if isinstance(k, str) else json.dumps(k)): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


if __name__ == "__main__":
    json.dump(_jsonable(reference(sys.argv[1])), sys.stdout, indent=1, sort_keys=True)
    print()
