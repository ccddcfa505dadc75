"""The job id the collector writes: the ranks of one job share it, and the next job launched
with the same configuration into the same directory gets another (two same-config torchrun
jobs, run id "none", once shared one: no id at all).

Each job is a launcher process starting its ranks (coll-job with the collector preloaded)
with the environment the launcher would give them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()

# A launcher: starts one rank per argument ("RANK:LOCAL_RANK"), waits for all.
LAUNCHER = r"""
import os, subprocess, sys
job = sys.argv[1:]
ps = []
for spec in job:
    rank, local = spec.split(":")
    env = dict(os.environ, RANK=rank, LOCAL_RANK=local, LD_PRELOAD=os.environ["RANK_PRELOAD"])
    ps.append(subprocess.Popen([os.environ["COLL_JOB"], "launches", "2"], env=env))
sys.exit(max(p.wait() for p in ps))
"""

ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
            "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID",
            "SLURM_NTASKS", "PBS_JOBID", "LSB_JOBID", "OMPI_MCA_ess_base_jobid",
            "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
            "PMIX_RANK", "DPRO_JOB_ID")


def launch(out, ranks, **env_extra):
    """Runs one launcher starting ranks (list of "RANK:LOCAL_RANK"), env_extra given to
    every rank; returns {trace file: job_id} of the traces it added to out."""
    before = set(ct.traces(out))
    env = ct.sanitizer_env()
    for k in ENV_KEYS:
        env.pop(k, None)
    env.update({k: str(v) for k, v in env_extra.items()})
    env["DPRO_OUTPUT"] = out
    env["RANK_PRELOAD"] = ct.ld_preload(ct.COLLECTOR)
    env["COLL_JOB"] = ct.COLL_JOB
    r = ct.run([sys.executable, "-c", LAUNCHER] + ranks, env=env)
    if r.returncode != 0:
        ct.check(False, "launcher ran (%s)" % r.stderr.strip()[-300:])
    return {f: ct.dump(f)[0]["meta"].get("job_id", "") for f in ct.traces(out)
            if f not in before}


def ids(traces):
    return sorted(set(traces.values()))


def shared_then_distinct(what, first, second, nranks):
    """The ranks of each launch share one non-empty id; the two launches' ids differ."""
    a, b = ids(first), ids(second)
    ct.check(len(first) == nranks and len(second) == nranks,
             "%s: %d traces per launch (%d, %d)" % (what, nranks, len(first), len(second)))
    ct.check(len(a) == 1 and a[0] != "", "%s: the ranks of one job share an id (%s)" % (what, a))
    ct.check(len(b) == 1 and b[0] != "", "%s: ... in the next job too (%s)" % (what, b))
    ct.check(a != b, "%s: two jobs back to back get two ids (%s, %s)" % (what, a, b))


# A single-node torchrun: its default run id "none", the agent the ranks' parent.
torch_local = dict(WORLD_SIZE=2, LOCAL_WORLD_SIZE=2, TORCHELASTIC_RUN_ID="none",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=29500)
out = ct.tmpdir()
shared_then_distinct("single-node torchrun, run id none",
                     launch(out, ["0:0", "1:1"], **torch_local),
                     launch(out, ["0:0", "1:1"], **torch_local), 2)

# The same inside one batch-script step of a Slurm allocation: the allocation's id is the
# same for both torchrun jobs, their launchers are not.
out = ct.tmpdir()
in_slurm = dict(torch_local, SLURM_JOB_ID=4242, SLURM_PROCID=0)
shared_then_distinct("single-node torchrun in one Slurm batch step",
                     launch(out, ["0:0", "1:1"], **in_slurm),
                     launch(out, ["0:0", "1:1"], **in_slurm), 2)

# srun: a step per launch.
out = ct.tmpdir()
srun = dict(WORLD_SIZE=2, SLURM_JOB_ID=4242)
shared_then_distinct("two sruns in one allocation",
                     launch(out, ["0:0", "1:1"], SLURM_STEP_ID=0, **srun),
                     launch(out, ["0:0", "1:1"], SLURM_STEP_ID=1, **srun), 2)

# A multi-node torchrun with no scheduler: each node's agent starts its own ranks; the
# ranks agree on the rendezvous, and a job on another port is another job.
out = ct.tmpdir()
multi = dict(WORLD_SIZE=2, LOCAL_WORLD_SIZE=1, TORCHELASTIC_RUN_ID="none",
             MASTER_ADDR="10.0.0.1")
job1 = launch(out, ["0:0"], MASTER_PORT=29500, **multi)
job1.update(launch(out, ["1:0"], MASTER_PORT=29500, **multi))
job2 = launch(out, ["0:0"], MASTER_PORT=29501, **multi)
job2.update(launch(out, ["1:0"], MASTER_PORT=29501, **multi))
shared_then_distinct("multi-node torchrun, run id none, one launcher per node", job1, job2, 2)

# A launcher's own run id and DPRO_JOB_ID are taken as they are.
out = ct.tmpdir()
t = launch(out, ["0:0", "1:1"], WORLD_SIZE=2, LOCAL_WORLD_SIZE=2, TORCHELASTIC_RUN_ID="abc")
ct.check(ids(t) == ["abc"], "torchrun's run id kept (%s)" % ids(t))
t = launch(out, ["0:0", "1:1"], WORLD_SIZE=2, TORCHELASTIC_RUN_ID="abc", DPRO_JOB_ID="mine")
ct.check(ids(t) == ["mine"], "DPRO_JOB_ID first (%s)" % ids(t))

# Two single-process runs (no rank): two jobs.
out = ct.tmpdir()
env = ct.env_with(out)
for k in ENV_KEYS:
    env.pop(k, None)
for _ in range(2):
    ct.run([ct.COLL_JOB, "launches", "2"], env=env)
single = [ct.dump(f)[0]["meta"].get("job_id", "") for f in ct.traces(out)]
ct.check(len(single) == 2 and len(set(single)) == 2 and "" not in single,
         "two single-process runs: two ids (%s)" % single)
ct.finish()
