"""test_framework: dpro-optimize recognises the framework from the trace and advises in its
terms (optimizer/framework.h).

1. Real Kineto traces of ../shared, imported: the V100 and A100 DDP jobs and the 128-rank
   one are pytorch-ddp by DDP's markers, the A100 AlexNet benchmark is plain pytorch; the
   evidence names what decided. On the A100 2-rank job:
   - --json has the `framework` key (name, detected, evidence, capture_scope);
   - knobs carry PyTorch's names (torch_args, DistributedDataParallel.bucket_cap_mb,
     torch.compile.mode, no_sync) and no ddp-sim flags; the advice reads
     DDP(model, bucket_cap_mb=...) and says DDP has no first-bucket knob;
   - --what-if round trip: every winner's torch_args, evaluated with --what-if, gives
     the same kind and predicted time;
   - capture: under DDP torch.cuda.graph covers the whole step (DDP's all-reduces inside),
     names it, and predicts what ddp-sim's --cuda-graph (the whole step) predicts on the
     same trace; mode=reduce-overhead (plain PyTorch's capture) covers the forward and
     backward compute only and predicts less; under DDP it is refused; --strategies
     capture advises the capture alone;
   - --framework pytorch-fsdp: no bucket or capture plan is searched, and such a
     --what-if is refused (status 2); --framework unknown: no options, the advice names
     the all-reduces, --what-if refused;
   - --framework ddp-sim keeps ddp_sim_args.
2. ddp-sim on 2 ranks of the simulated device under the collector: ddp-sim, by its
   traced command; ddp_sim_args in the knobs. The same job run through a link named
   `trainer`: unknown (its kernels are not PyTorch's). Skips this part without CUDA
   headers.
3. torch DDP and FSDP on the simulated device under the collector (tests/torch):
   pytorch-ddp and pytorch-fsdp by their collectives and kernels. Skipped, saying so,
   without the venv (make venv), except in CI (CI=true), where it must run.

A missing ../shared is a failure when CI=true, a skip elsewhere.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replay"))
from replay_testlib import (  # noqa: E402
    BUILD, DDP_SIM, DPRO_RUN, IMPORT, KINETO, LIBDIR, SIMRUN, SKIP, check, exit_status,
    missing, shared_path)

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from torchlib import sanitizer_env  # noqa: E402
VENV_PY = os.path.join(BUILD, "venv", "bin", "python")
TORCH_DIR = os.path.join(HERE, "..", "torch")


def run(cmd, timeout=300, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def optimize_json(d, *extra):
    p = run([OPTIMIZE, d, "--json", "-q", "--seed", "1", "--max-evals", "80"] + list(extra))
    if p.returncode != 0:
        check(False, "dpro-optimize %s %s: status %d: %s" % (d, extra, p.returncode,
                                                             p.stderr[-300:]))
        return None
    return json.loads(p.stdout)


def framework_line(d):
    """The framework line of the text output (said even when the trace cannot be analysed)."""
    p = run([OPTIMIZE, d, "-q", "--max-evals", "10"])
    lines = [l for l in p.stdout.splitlines() if l.startswith("framework: ")]
    return lines[0] if lines else "(none: status %d, %s)" % (p.returncode, p.stderr[-200:])


def kineto(tmp):
    names = {"v100-1rank-training": ("pytorch-ddp", "DistributedDataParallel.forward"),
             "a100-2rank-allreduce-rank0": ("pytorch-ddp", "DistributedDataParallel.forward"),
             "128rank-sampled-rank0": ("pytorch-ddp", "DistributedDataParallel.forward"),
             "a100-alexnet-1rank": ("pytorch", "aten::")}
    dirs = {}
    for name, (fw, evidence) in sorted(names.items()):
        src = shared_path(os.path.join(KINETO, name + ".json.gz"))
        d = os.path.join(tmp, name)
        p = run([IMPORT, "kineto", src, "-o", d, "-q"])
        check(p.returncode == 0, "import %s: %s" % (name, p.stderr[-200:]))
        dirs[name] = d
        line = framework_line(d)
        check(line.startswith("framework: %s, recognised from the trace: " % fw)
              and evidence in line, "%s: %s by %s: %s" % (name, fw, evidence, line))
    return dirs["a100-2rank-allreduce-rank0"]


def torch_knobs(d):
    o = optimize_json(d)
    if not o:
        return
    f = o.get("framework", {})
    check(f.get("name") == "pytorch-ddp" and f.get("detected") == "pytorch-ddp"
          and "DistributedDataParallel" in f.get("evidence", "")
          and f.get("capture_scope") == "step",
          "a100: framework key %s" % f)
    check(len(o["strategies"]) > 0, "a100: strategies")
    for s in o["strategies"]:
        k = s["knobs"]
        check("torch_args" in k and "ddp_sim_args" not in k,
              "a100 %s: torch_args, no ddp_sim_args (%s)" % (s["kind"], sorted(k)))
        check("--" not in k.get("torch_args", "") and "--" not in s.get("advice", ""),
              "a100 %s: no ddp-sim flag in the advice: %s / %s"
              % (s["kind"], k.get("torch_args"), s.get("advice")))
        # --what-if round trip
        w = optimize_json(d, "--what-if", k.get("torch_args", ""))
        if w and w["strategies"]:
            t = w["strategies"][0]
            check(t["kind"] == s["kind"] and abs(t["predicted_iter_us"] - s["predicted_iter_us"])
                  < 1e-6 * s["predicted_iter_us"],
                  "a100: --what-if '%s' gives %s %.3f us, the search %s %.3f us"
                  % (k.get("torch_args"), t["kind"], t["predicted_iter_us"], s["kind"],
                     s["predicted_iter_us"]))
    w = optimize_json(d, "--what-if", "bucket_cap_mb=4 torch.compile no_sync=2", "--batch", "32")
    top = w["strategies"][0] if w and w["strategies"] else {}
    k = top.get("knobs", {})
    check(k.get("DistributedDataParallel", {}).get("bucket_cap_mb") == 4
          and k.get("torch.compile", {}).get("mode") == "default"
          and k.get("no_sync") == {"micro_batches": 2, "micro_batch": 16}
          and k.get("torch_args") == "bucket_cap_mb=4 torch.compile no_sync=2 micro_batch=16",
          "a100: knobs by PyTorch's names: %s" % k)
    adv = top.get("advice", "")
    check("DDP(model, bucket_cap_mb=4)" in adv and "the first bucket too takes the cap" in adv
          and k.get("first_bucket_cap_mb") == 4
          and "torch.compile(model)" in adv and "no_sync()" in adv,
          "a100: advice in PyTorch's terms: %s" % adv.replace("\n", " / "))
    # capture: under DDP the whole step (torch.cuda.graph, DDP's all-reduces inside): the
    # region ddp-sim's --cuda-graph captures, the same prediction; the compiled forward and
    # backward only (mode=reduce-overhead, plain PyTorch's capture) predict less
    torch_cg = optimize_json(d, "--what-if", "torch.cuda.graph")
    sim_cg = optimize_json(d, "--framework", "ddp-sim", "--what-if", "--cuda-graph")
    comp_cg = optimize_json(d, "--framework", "pytorch", "--what-if", "mode=reduce-overhead")
    if torch_cg and sim_cg and comp_cg:
        a, b, c = (x["strategies"][0] for x in (torch_cg, sim_cg, comp_cg))
        check("the training step" in a["description"]
              and "with torch.cuda.graph(g): the whole step" in a["advice"]
              and "DDP's all-reduces" in a["advice"]
              and a["knobs"].get("torch.cuda.graph", {}).get("captured", "").startswith(
                  "the whole step") and a["knobs"].get("torch_args") == "torch.cuda.graph",
              "a100: the capture names its region: %s / %s / %s"
              % (a["description"], a["advice"], a["knobs"]))
        check(abs(a["predicted_iter_us"] - b["predicted_iter_us"]) < 1e-6 * b["predicted_iter_us"],
              "a100: torch.cuda.graph under DDP (%.3f us) predicts the whole step as ddp-sim's "
              "--cuda-graph (%.3f us)" % (a["predicted_iter_us"], b["predicted_iter_us"]))
        check("forward and backward compute" in c["description"]
              and "torch.compile(model, mode=\"reduce-overhead\")" in c["advice"]
              and c["predicted_iter_us"] > a["predicted_iter_us"],
              "a100: capturing the compute (%.0f us: %s) predicts less than the whole step "
              "(%.0f us)" % (c["predicted_iter_us"], c["description"], a["predicted_iter_us"]))
        print("a100: baseline %.0f us; mode=reduce-overhead %.0f us (%.2fx); whole step "
              "captured (torch.cuda.graph) %.0f us (%.2fx)"
              % (torch_cg["baseline_iter_us"], c["predicted_iter_us"], c["predicted_speedup"],
                 a["predicted_iter_us"], a["predicted_speedup"]))
    # --strategies capture: the capture alone, no operator fusion
    cap = optimize_json(d, "--strategies", "capture")
    if cap:
        kinds = [x["kind"] for x in cap["strategies"]]
        check(kinds == ["cuda_graph"], "a100: --strategies capture: the capture alone: %s" % kinds)


def overrides(d):
    o = optimize_json(d, "--framework", "pytorch-fsdp")
    if o:
        check(o["framework"]["name"] == "pytorch-fsdp" and o["framework"]["detected"]
              == "pytorch-ddp" and o["framework"]["cannot_express"],
              "--framework pytorch-fsdp: %s" % o["framework"])
        kinds = [s["kind"] for s in o["strategies"]]
        check(not any("tensor" in k or "cuda_graph" in k for k in kinds),
              "pytorch-fsdp: no bucket or capture plan (%s)" % kinds)
    for fw, args in (("pytorch-fsdp", "bucket_cap_mb=25"), ("pytorch-fsdp", "mode=reduce-overhead"),
                     ("unknown", "bucket_cap_mb=25"), ("pytorch-ddp", "--bucket-mb 25"),
                     ("pytorch-ddp", "checkpoint=3-1"), ("pytorch-ddp", "mode=reduce-overhead")):
        p = run([OPTIMIZE, d, "-q", "--framework", fw, "--what-if", args])
        check(p.returncode == 2, "--framework %s --what-if '%s' refused: status %d"
              % (fw, args, p.returncode))
    p = run([OPTIMIZE, d, "-q", "--framework", "tensorflow"])
    check(p.returncode == 2, "--framework tensorflow refused: status %d" % p.returncode)
    o = optimize_json(d, "--framework", "unknown")
    for s in (o or {}).get("strategies", []):
        check("torch_args" not in s["knobs"] and "ddp_sim_args" not in s["knobs"],
              "unknown: no options (%s)" % sorted(s["knobs"]))
        if "tensor" in s["kind"]:
            check("allreduce" in s["advice"], "unknown: names the all-reduces: %s" % s["advice"])
    o = optimize_json(d, "--framework", "ddp-sim", "--what-if", "--bucket-mb 25 --first-bucket-mb 1")
    k = o["strategies"][0]["knobs"] if o and o["strategies"] else {}
    check(k.get("ddp_sim_args") == "--bucket-mb 25 --first-bucket-mb 1",
          "--framework ddp-sim: ddp_sim_args (%s)" % k)


def traced_ddp_sim(d, program):
    """Runs program (ddp-sim, or a link to it) on 2 ranks under the collector into d;
    returns whether it ran."""
    env = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=LIBDIR)
    p = run([SIMRUN, "-n", "2", "--", DPRO_RUN, "-o", d, "--", program, "--iterations", "3",
             "--warmup", "1", "--layers", "8"], env=env, timeout=200)
    check(p.returncode == 0, "%s under dpro-run: %s" % (program, p.stderr[-300:]))
    return p.returncode == 0


def ddp_sim(tmp):
    if missing((DDP_SIM, SIMRUN, DPRO_RUN)):
        return
    # the same job under another program name: nothing in it is PyTorch's or ddp-sim's
    other = os.path.join(tmp, "trainer")
    os.symlink(os.path.abspath(DDP_SIM), other)
    d = os.path.join(tmp, "trainer-trace")
    if traced_ddp_sim(d, other):
        line = framework_line(d)
        check(line.startswith("framework: unknown, recognised from the trace: no ddp-sim")
              and "allreduce" in line, "ddp-sim named trainer: unknown: %s" % line)
    d = os.path.join(tmp, "ddp-sim")
    if not traced_ddp_sim(d, DDP_SIM):
        return
    o = optimize_json(d)
    if o:
        check(o["framework"]["name"] == "ddp-sim" and "ddp-sim" in o["framework"]["evidence"],
              "ddp-sim: %s" % o["framework"])
        check(all("ddp_sim_args" in s["knobs"] and "torch_args" not in s["knobs"]
                  for s in o["strategies"]), "ddp-sim: ddp_sim_args in every strategy")


def torch_jobs(tmp):
    if os.environ.get("HAVE_CUDA", "1") == "0":
        print("SKIP part 3: configured without the CUDA headers: no stand-ins")
        return
    if os.environ.get("DPRO_TORCH") == "0":
        print("SKIP part 3: DPRO_TORCH=0: the torch tests are off")
        return
    if not os.path.exists(os.path.join(BUILD, "venv", ".dpro-torch-stamp")):
        if os.environ.get("CI") == "true":
            check(False, "CI=true: the torch jobs must run, and the build has no venv")
        else:
            print("SKIP part 3: no venv with torch in the build tree (make venv)")
        return
    env = sanitizer_env(dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60"))
    jobs = (("pytorch-ddp", "ddp_train.py", ["--runs", "transformer:bucket=0.05", "--steps", "3"]),
            ("pytorch-fsdp", "fsdp_train.py", ["--runs", "1:0"]))
    for fw, script, args in jobs:
        d, out = os.path.join(tmp, fw), os.path.join(tmp, fw + "-out")
        os.mkdir(out)
        p = run([DPRO_RUN, "-o", d, "--", SIMRUN, "-n", "2", "--timeout", "250", "--", VENV_PY,
                 os.path.join(TORCH_DIR, script), "--out", out] + args, env=env, timeout=300)
        check(p.returncode == 0, "%s under dpro-run: %s" % (script, p.stderr[-300:]))
        if p.returncode == 0:
            line = framework_line(d)
            check(line.startswith("framework: %s, recognised from the trace: " % fw)
                  and "PyTorch kernels" in line, "%s: %s" % (script, line))


def main():
    if missing((IMPORT, OPTIMIZE)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-framework-")
    try:
        a100 = kineto(tmp)
        torch_knobs(a100)
        overrides(a100)
        ddp_sim(tmp)
        torch_jobs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
