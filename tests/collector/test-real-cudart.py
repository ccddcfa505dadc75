"""The real libcudart of the toolkit (no GPU on this machine) under the collector: every
call passes through with the code the runtime gave (compared with a run without the
collector), and every call is recorded with that code."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
if not os.path.exists(ct.REAL_CUDART):
    print("skip: real-cudart not built")
    sys.exit(ct.SKIP)

plain = ct.run([ct.REAL_CUDART])
outdir = ct.tmpdir()
traced = ct.run([ct.REAL_CUDART], env=ct.env_with(outdir))
ct.check(plain.returncode == 0 and traced.returncode == 0, "real-cudart runs with and without")
ct.check(plain.stdout == traced.stdout,
         "same return codes with the collector:\n" + plain.stdout + "vs\n" + traced.stdout)

codes = dict(line.split("=") for line in plain.stdout.split())
files = ct.traces(outdir)
ct.check(len(files) == 1, "one trace file (%s)" % files)
if files:
    doc = ct.dump(files[0])[0]
    ct.check(doc["meta"].get("source") == "collector", "meta source=collector")
    ct.check(doc["meta"].get("cupti") in ("missing", "busy", "enabled"),
             "meta cupti says what happened to CUPTI: %s (%s)"
             % (doc["meta"].get("cupti"), doc["meta"].get("cupti_error")))
    ct.check("cuda_runtime_version" in doc["meta"], "runtime version in meta")
    recorded = {}
    for e in doc["events"]:
        if e["kind"] == "api":
            recorded.setdefault(e["name"], e["result"])
        elif e["kind"] == "memory":
            recorded.setdefault("cudaMalloc" if e["sub"] == 1 else "cudaFree", 0)
    for name, code in codes.items():
        ct.check(recorded.get(name) == int(code),
                 "%s recorded with code %s (got %s)" % (name, code, recorded.get(name)))
ct.finish()
