#!/usr/bin/env python3
"""copy_ranks.py SRC.json[.gz] OUTDIR N [--plain]: a many-file Kineto job made of one real
trace: N copies of SRC as ranks 0..N-1 of a world of N (distributedInfo's rank and
world_size rewritten, nothing else), OUTDIR/rank<R>.json.gz (gzip level 6, as the
profiler's own .gz), or plain .json with --plain. For the importer's many-file figures
(docs/figures.md, Importer): the inputs are a real profiler's, only their count is made."""
import argparse
import gzip
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("outdir")
    ap.add_argument("n", type=int)
    ap.add_argument("--plain", action="store_true")
    a = ap.parse_args()
    opener = gzip.open if a.src.endswith(".gz") else open
    with opener(a.src, "rb") as f:
        text = f.read()
    at = text.find(b'"distributedInfo"')
    rank = re.compile(rb'"rank"\s*:\s*\d+')
    world = re.compile(rb'"world_size"\s*:\s*\d+')
    mr = rank.search(text, at) if at >= 0 else None
    mw = world.search(text, at) if at >= 0 else None
    if not mr or not mw:
        sys.exit("copy_ranks: %s: no distributedInfo with rank and world_size" % a.src)
    # the first "rank" and "world_size" after the key are distributedInfo's own
    cuts = sorted([(mr.start(), mr.end(), b'"rank": %d'), (mw.start(), mw.end(),
                                                          b'"world_size": %d')])
    os.makedirs(a.outdir, exist_ok=True)
    for r in range(a.n):
        parts, pos = [], 0
        for start, end, form in cuts:
            parts += [text[pos:start], form % (r if form.startswith(b'"rank"') else a.n)]
            pos = end
        data = b"".join(parts) + text[pos:]
        if a.plain:
            with open(os.path.join(a.outdir, "rank%d.json" % r), "wb") as f:
                f.write(data)
        else:
            with gzip.open(os.path.join(a.outdir, "rank%d.json.gz" % r), "wb", 6) as f:
                f.write(data)


if __name__ == "__main__":
    main()
