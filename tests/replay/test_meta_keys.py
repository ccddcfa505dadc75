"""test_meta_keys: the meta keys read of a loaded rank are one list, the one its reader
carries to process 0 under --mpi, so that a key the single-process replay reads arrives
under --mpi (where a missing one would read NULL, under --mpi only).

The list is replay/job.h's job_meta_key (names: job_meta_names); a rank's meta is read
through job_rank_meta / job_rank_meta_int, which answer only those keys, and
job_share_pack_reader packs a reader with exactly them (test_job_wire checks that each
arrives with its value). This test scans the sources for what would bypass the list:
in replay/ and optimizer/, dpro_reader_meta and dpro_reader_meta_int are called only in
replay/job.c, by the accessors (with job_meta_names, or job_local_meta_names: the keys
only the measured export of one process reads, which no --mpi reader carries) and on a
file being opened
(o->r: the rank, world size and job id, which travel to every process with the files'
outcomes, job_share_opened); in tools/, never on a job's rank's reader (`reader` as a
member: the commands that call them, dpro-info and dpro-export, open their own); and
the only dpro_reader_pack in replay/ is job_share_pack_reader's, with job_meta_names.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import SRC, check, exit_status  # noqa: E402

CALL = re.compile(r"\bdpro_reader_(meta|meta_int|pack)\s*\(")
OPEN_KEYS = {"DPRO_META_JOB_ID", "DPRO_META_RANK", "DPRO_META_WORLD_SIZE"}


def calls(path):
    """The calls in path: (name, line, [arguments as text])."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    for m in CALL.finditer(text):
        depth, args, cur, i = 1, [], "", m.end()
        while i < len(text) and depth > 0:
            c = text[i]
            depth += (c == "(") - (c == ")")
            if depth == 1 and c == ",":
                args.append(cur.strip())
                cur = ""
            elif depth > 0:
                cur += c
            i += 1
        args.append(cur.strip())
        yield m.group(1), text.count("\n", 0, m.start()) + 1, args


def sources(*dirs):
    for d in dirs:
        for root, _, files in os.walk(os.path.join(SRC, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(root, f), SRC)


def main():
    bad, packs, seen = [], [], 0
    for rel in sources("replay", "optimizer", "tools"):
        for name, line, args in calls(os.path.join(SRC, rel)):
            where = "%s:%d dpro_reader_%s(%s)" % (rel, line, name, ", ".join(args))
            seen += 1
            if name == "pack":
                packs.append(where)
                if not (rel.startswith("replay/") and args[2:3] == ["job_meta_names"]):
                    bad.append(where)
            elif rel.startswith("tools/"):
                if re.search(r"(->|\.)reader\b", args[0]):
                    bad.append(where)
            elif rel != "replay/job.c":
                bad.append(where)
            elif not (args[1:2] in (["job_meta_names[k]"], ["job_local_meta_names[k]"]) or
                      (args[0] == "o->r" and args[1:2] and args[1] in OPEN_KEYS)):
                bad.append(where)
    for b in bad:
        print("  outside the list: " + b)
    check(seen > 0, "the sources were found (%d calls to the meta readers and the packer "
          "under %s)" % (seen, SRC))
    check(not bad, "a loaded rank's meta is read only through job_rank_meta, whose keys "
          "are the ones its reader carries to process 0 (%d calls outside)" % len(bad))
    check(len(packs) == 1, "one reader packer in replay/ and tools/, with job_meta_names "
          "(%s)" % packs)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
