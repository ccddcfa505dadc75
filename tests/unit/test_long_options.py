#!/usr/bin/env python3
"""Every long option a command's --help lists is one its option parser takes, with the
argument the help shows (`--top K`: one; `--kernels[=K]`: optional; `--json`: none).

Each option is given alone before --help (`CMD --top=1 --help`, `CMD --json --help`):
whatever it does with the value, the parser must not answer "unrecognized option",
"requires an argument" or "doesn't allow an argument".
"""
import os
import re
import subprocess
import sys

B = os.environ.get("top_builddir", ".")
COMMANDS = ("dpro-info", "dpro-diff", "dpro-replay", "dpro-export", "dpro-optimize", "dpro-run",
            "dpro-import")
# "  -t, --top K   ...", "      --partial   ...", "  --kernels[=K]  ...", "  --help, --version"
OPTION = re.compile(r"^\s+(?:-\w, )?--([a-z][a-z0-9-]*)(\[=[A-Z]+\])?( [A-Z][A-Z-]*)?(?:,|\s|$)")
PARSER_ERRORS = ("unrecognized option", "requires an argument", "doesn't allow an argument")


def run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def main():
    failures, checked = [], 0
    for name in COMMANDS:
        cmd = os.path.join(B, "tools", name)
        if not os.path.exists(cmd):
            continue
        rc, out, err = run([cmd, "--help"])
        if rc != 0:
            failures.append("%s --help: exit %d" % (name, rc))
            continue
        opts = {}
        for line in out.splitlines():
            m = OPTION.match(line)
            if m:
                opts[m.group(1)] = bool(m.group(2) or m.group(3))
        if not opts:
            failures.append("%s --help lists no long option" % name)
        for opt, takes_value in sorted(opts.items()):
            arg = "--%s=1" % opt if takes_value else "--%s" % opt
            rc, out, err = run([cmd, arg, "--help"])
            checked += 1
            bad = [e for e in PARSER_ERRORS if e in err]
            if bad:
                failures.append("%s %s: %s" % (name, arg, err.strip().splitlines()[0]))
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if failures:
        return 1
    print("test_long_options: %d options ok" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
