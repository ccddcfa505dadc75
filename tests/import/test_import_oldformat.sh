#!/bin/sh
# A trace of an older format minor (2.1, fixtures/v2.1-gen2x.dpro, written by the build
# before op arguments and flows were stored) still reads: dpro-info counts the same events
# by kind as that build did, dpro-export --chrome writes byte for byte what that build
# wrote, and --kineto writes its events with none of the newer fields (no flows, no
# sequence numbers, no shapes).
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
fx="$s/tests/import/fixtures"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

mkdir "$tmp/old" && cp "$fx/v2.1-gen2x.dpro" "$tmp/old/rank0-import-4000.dpro"
ok test $? -eq 0
"$b/tools/dpro-info" --json "$tmp/old" > "$tmp/info.json"
ok test $? -eq 0
python3 - "$tmp/info.json" "$fx/v2.1-gen2x.info.json" <<'PY'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got_kinds = {k: v for k, v in got["events_by_kind"].items() if v}
want_kinds = {k: v for k, v in want["events_by_kind"].items() if v}
print("events", got["events"], got_kinds)
sys.exit(0 if got["events"] == want["events"] and got_kinds == want_kinds else 1)
PY
ok test $? -eq 0
"$b/tools/dpro-export" "$tmp/old" --chrome "$tmp/chrome.json" 2> /dev/null
ok test $? -eq 0
ok cmp "$tmp/chrome.json" "$fx/v2.1-gen2x.chrome.json"
"$b/tools/dpro-export" "$tmp/old" --kineto -o "$tmp/kineto.json"
ok test $? -eq 0
python3 - "$tmp/kineto.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
flows = [e for e in ev if e.get("ph") in ("s", "f", "t")]
newer = [e for e in ev if {"Sequence number", "Input Dims", "Record function id"} & set(e.get("args", {}))]
kernels = [e for e in ev if e.get("cat") == "kernel"]
print("kineto export of the old trace:", len(ev), "events,", len(kernels), "kernels")
sys.exit(0 if not flows and not newer and len(kernels) == 15 else 1)
PY
ok test $? -eq 0
echo "$pass passed, $fail failed"
test "$fail" -eq 0
