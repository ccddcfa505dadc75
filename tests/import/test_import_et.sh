#!/bin/sh
# dpro-import et: a PyTorch execution trace and the Kineto trace of the same steps
# (fixtures/et-mlp.*: real torch on the simulated device, made by et/make_et_fixture.py)
# are imported together; dpro-export --kineto of the trace is checked against an
# independent reading of the two JSON files (et/check_et.py: every op's ET id, parent and
# data dependencies). Bad input is refused with the file and the place named (exit 1),
# nothing written; a usage error (no --kineto, or a --kineto count that does not match)
# exits 2.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }
imp="$b/tools/dpro-import"
et="$s/tests/import/fixtures/et-mlp.et.json.gz"
kin="$s/tests/import/fixtures/et-mlp.kineto.json.gz"

"$imp" et "$et" --kineto "$kin" -o "$tmp/out" 2> "$tmp/err"
ok test $? -eq 0
cat "$tmp/err"
ok grep -q "270 nodes, 267 with a Record function id, 267 of them joined" "$tmp/err"
ok grep -q "et.joined: 267" "$tmp/err"
trace=$(ls "$tmp"/out/*.dpro)
"$b/tools/dpro-export" "$tmp/out" --kineto -o "$tmp/export.json"
ok test $? -eq 0
python3 "$s/tests/import/et/check_et.py" "$et" "$kin" "$tmp/export.json"
ok test $? -eq 0
"$b/tools/dpro-info" --json "$trace" > "$tmp/info.json"
ok test $? -eq 0
ok python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['events_by_kind']['kernel'] == 45, d" "$tmp/info.json"

# a Kineto trace recorded without shapes: the joined ops take the execution trace's
gzip -dc "$kin" | python3 -c "
import json, sys
d = json.load(sys.stdin)
for e in d['traceEvents']:
    for k in ('Input Dims', 'Input type', 'Input Strides', 'Concrete Inputs'):
        e.get('args', {}).pop(k, None)
json.dump(d, open(sys.argv[1], 'w'))" "$tmp/noshapes.json"
"$imp" -q et "$et" --kineto "$tmp/noshapes.json" -o "$tmp/noshapes"
ok test $? -eq 0
"$b/tools/dpro-export" "$tmp/noshapes" --kineto -o "$tmp/noshapes-export.json"
ok test $? -eq 0
python3 "$s/tests/import/et/check_et.py" "$et" "$tmp/noshapes.json" \
    "$tmp/noshapes-export.json" --shapes-from-et
ok test $? -eq 0

# refused(STATUS PATTERN ARGS...): dpro-import ARGS exits STATUS, says PATTERN, writes no trace
refused() {
    want=$1 pat=$2
    shift 2
    rm -rf "$tmp/bad"
    "$imp" "$@" -o "$tmp/bad" 2> "$tmp/bad.err"
    st=$?
    if [ $st -ne "$want" ] || ! grep -q -- "$pat" "$tmp/bad.err" ||
       [ -n "$(ls "$tmp/bad" 2>/dev/null)" ]; then
        echo "dpro-import $*: exit $st (want $want), stderr:" >&2
        cat "$tmp/bad.err" >&2
        return 1
    fi
}
ok refused 2 "give each execution trace the Kineto trace" et "$et"
ok refused 2 "give each execution trace the Kineto trace" et "$et" "$et" --kineto "$kin"
ok refused 2 "is for dpro-import et" kineto "$kin" --kineto "$kin"
ok refused 1 "$tmp/none.json: cannot open" et "$tmp/none.json" --kineto "$kin"
# a Kineto trace given as the execution trace
ok refused 1 "$kin: no \"nodes\" array" et "$kin" --kineto "$kin"
# cut in the middle of a node: the byte offset and line of the damage
gzip -dc "$et" | head -c 3000 > "$tmp/cut.json"
ok refused 1 "$tmp/cut.json: byte 3000, line [0-9]*: not JSON" et "$tmp/cut.json" --kineto "$kin"
# nodes of the wrong form: the node is named by its index and id
gzip -dc "$et" | python3 -c "
import json, sys
d = json.load(sys.stdin)
d['nodes'][5]['ctrl_deps'] = 'x'
json.dump(d, open(sys.argv[1], 'w'))" "$tmp/parent.json"
ok refused 1 "$tmp/parent.json: nodes\[5\] (id [0-9]*): \"ctrl_deps\" is not a node id" \
    et "$tmp/parent.json" --kineto "$kin"
gzip -dc "$et" | python3 -c "
import json, sys
d = json.load(sys.stdin)
d['nodes'][7]['inputs'] = [1]
json.dump(d, open(sys.argv[1], 'w'))" "$tmp/inputs.json"
ok refused 1 "$tmp/inputs.json: nodes\[7\] (id [0-9]*): \"inputs\" is not an object" \
    et "$tmp/inputs.json" --kineto "$kin"
gzip -dc "$et" | python3 -c "
import json, sys
d = json.load(sys.stdin)
d['nodes'][3]['attrs'][0]['value'] = -4
json.dump(d, open(sys.argv[1], 'w'))" "$tmp/rf.json"
ok refused 1 "$tmp/rf.json: nodes\[3\] (id [0-9]*): attrs\[0\] rf_id is not an integer" \
    et "$tmp/rf.json" --kineto "$kin"
# an execution trace given to dpro-import kineto: named as one
ok refused 1 "a PyTorch execution trace, which dpro-import et imports" kineto "$et"
printf '\037\213garbage' > "$tmp/gz.json.gz"
ok refused 1 "$tmp/gz.json.gz" et "$tmp/gz.json.gz" --kineto "$kin"

echo "test_import_et: $pass passed, $fail failed"
[ $fail -eq 0 ]
