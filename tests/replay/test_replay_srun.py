"""test_replay_srun: srun starts dpro-replay --mpi (and dpro-optimize --mpi) as mpirun does.

The test starts a Slurm cluster of its own: one node (this host, at 127.0.0.1, its CPUs),
munged, slurmctld and slurmd in the foreground from a slurm.conf in a temp dir (its
state, spool, logs, munge's key and socket and two free ports there; auth/munge as
clusters authenticate), and waits for the node to be idle. Then `srun --mpi=pmix -O -n P
dpro-replay --mpi DIR --json` (Open MPI from Debian finds its world through Slurm's PMIx
plugin; -O: more tasks than CPUs) on jobs
written by tests/replay/gen_traces (clock skew; a straggler), P = 2 and 4, folded and
--no-fold, is compared with the single-process dpro-replay by test_replay_mpi.py's
comparison: the JSON byte for byte and field by field, and the processes' log lines
(P processes, each reading its share, process 0 handing the graph to the others).
`srun ... dpro-optimize --mpi` is compared by test_optimize_mpi.py's comparison (P = 2
and 4). A process whose hand-over to process 0 fails (DPRO_TEST_MPI_SEND_FAIL=1) ends the
whole step (MPI_Abort under srun), non-zero, saying which and why, within 120 s.

The daemons are stopped whatever happens, SIGTERM (a harness's timeout) included, and no
process of this cluster (munged, slurmctld, slurmd, slurmscriptd, a step's slurmstepd,
zombies too) and no task of the test (srun, dpro-replay, dpro-optimize, whatever a step
runs: found by the cluster's SLURM_CONF in its environment) may be left: the test fails
if one is; a step left running on purpose (srun -n 1 sleep) is seen so, then ended. The test is the child subreaper of
what it starts, so a step's slurmstepd (a daemon slurmd forks off) is its child, reaped
and found here.

Skips (77) saying what is missing: dpro built without MPI; no Slurm (slurmctld, slurmd,
srun, sinfo, squeue, munged); not root (slurmd starts the tasks as their user: it runs
as root); a Slurm without the PMIx plugin (`srun --mpi=list` on the started cluster: it
needs a configuration).
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "optimizer"))
from replay_testlib import REPLAY, SKIP, check, exit_status  # noqa: E402
import test_replay_mpi  # noqa: E402
import test_optimize_mpi  # noqa: E402

GEN = test_replay_mpi.GEN
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
PROGRAMS = ("slurmctld", "slurmd", "srun", "sinfo", "squeue", "munged")
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmscriptd", "slurmstepd")
TASKS = ("srun", "dpro-replay", "dpro-optimize")  # what the test's steps start
PR_SET_CHILD_SUBREAPER = 36


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A one-node Slurm cluster in tmp; env: the environment its clients need."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.node = socket.gethostname().split(".")[0]
        self.conf = os.path.join(tmp, "slurm.conf")
        self.munge_socket = os.path.join(tmp, "munge.socket")
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(tmp, sub))
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=dprotest",
                "SlurmctldHost=%s(127.0.0.1)" % self.node,
                "SlurmctldPort=%d" % free_port(),
                "SlurmdPort=%d" % free_port(),
                "AuthType=auth/munge",
                "CredType=cred/munge",
                "AuthInfo=socket=%s" % self.munge_socket,
                "SlurmUser=root",
                "SlurmdUser=root",
                "StateSaveLocation=%s/state" % tmp,
                "SlurmdSpoolDir=%s/spool" % tmp,
                "SlurmctldPidFile=%s/slurmctld.pid" % tmp,
                "SlurmdPidFile=%s/slurmd.pid" % tmp,
                "MailProg=/bin/true",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "MpiDefault=none",
                "ReturnToService=2",
                "SlurmdParameters=config_overrides",
                "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN"
                % (self.node, os.cpu_count() or 1),
                "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP"
                % self.node, ""]))
        # a Slurm job around this test (its SLURM_JOB_ID...) would make srun run a step
        # there: the clients see this cluster's configuration only
        self.env = {k: v for k, v in test_replay_mpi.ENV.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = self.conf
        self.env["PATH"] = SBIN
        self.daemons = []

    def start(self):
        """Starts munged, slurmctld and slurmd; True once the node is idle (within 90 s)."""
        key = os.path.join(self.tmp, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        munged = ["-F", "--key-file=" + key, "--socket=" + self.munge_socket]
        munged += ["--%s=%s" % (k, os.path.join(self.tmp, "munged." + k.split("-")[0]))
                   for k in ("pid-file", "log-file", "seed-file")]
        for name, args in (("munged", munged),
                           ("slurmctld", ["-D", "-f", self.conf]),
                           ("slurmd", ["-D", "-f", self.conf, "-N", self.node])):
            log = open(os.path.join(self.tmp, name + ".out"), "w")
            self.daemons.append(subprocess.Popen(
                [shutil.which(name, path=SBIN)] + args, env=self.env, cwd=self.tmp,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            log.close()
            if name == "munged":  # its socket first: the others authenticate through it
                end = time.time() + 30
                while not os.path.exists(self.munge_socket) and time.time() < end:
                    time.sleep(0.2)
        end = time.time() + 90
        while time.time() < end and all(p.poll() is None for p in self.daemons):
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True,
                               text=True)
            if r.stdout.strip() == "idle":
                return True
            time.sleep(1)
        return False

    def logs(self):
        out = []
        for name in ("munged", "slurmctld", "slurmd"):
            with open(os.path.join(self.tmp, name + ".out"), errors="replace") as f:
                out.append("%s: %s" % (name, f.read()[-1500:]))
        return "\n".join(out)

    def ours(self):
        """The processes of this cluster still there, zombies too: (pid, name). Its daemons
        and the steps' slurmstepd, and the test's srun clients and their tasks
        (dpro-replay, dpro-optimize, whatever a step runs): every process whose environment
        names this cluster's configuration (SLURM_CONF, which srun passes on to the
        tasks), or, named as one of them, whose directory or files are the cluster's."""
        groups = {p.pid for p in self.daemons}
        conf = ("SLURM_CONF=%s" % self.conf).encode()
        left = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    stat = f.read()
                name = stat[stat.index("(") + 1:stat.rindex(")")]
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if conf in f.read().split(b"\0"):
                        left.append((int(pid), name))
                        continue
                if name not in DAEMONS + TASKS:
                    continue
                if int(stat[stat.rindex(")") + 2:].split()[1]) == os.getpid():
                    left.append((int(pid), name))  # a step's slurmstepd, reparented here
                    continue
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().decode(errors="replace")
                links = [os.readlink("/proc/%s/cwd" % pid)]
                links += [os.readlink("/proc/%s/fd/%s" % (pid, fd))
                          for fd in os.listdir("/proc/%s/fd" % pid)]
                if (os.getpgid(int(pid)) in groups or self.tmp in cmd
                        or any(x.startswith(self.tmp) for x in links)):
                    left.append((int(pid), name))
            except (OSError, ProcessLookupError):
                continue  # gone meanwhile
        return left

    def stop(self):
        """Lets the last steps end (within 60 s: their slurmstepd reports to the daemons),
        then stops the daemons and whatever of this cluster is left; the processes that
        were still there after 30 s of SIGTERM (killed then)."""
        end = time.time() + 60
        while time.time() < end and all(p.poll() is None for p in self.daemons):
            self.reap()
            jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env,
                                  capture_output=True, text=True)
            if not jobs.stdout.strip() and not any(n == "slurmstepd" for _, n in self.ours()):
                break
            time.sleep(0.5)
        for p in reversed(self.daemons):
            if p.poll() is None:
                p.terminate()
        end = time.time() + 30
        left = self.ours()
        while left and time.time() < end:
            time.sleep(0.5)
            for p in self.daemons:
                p.poll()
            self.reap()
            left = self.ours()
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.daemons:
            if p.poll() is None:
                p.kill()
            p.wait()
        time.sleep(0.5)
        self.reap()
        return left

    def reap(self):
        """Reaps the steps' slurmstepd that ended here (this process is their subreaper)."""
        daemons = {p.pid for p in self.daemons}
        for pid, _ in self.ours():
            if pid not in daemons:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass


def prerequisites():
    """What is missing to run the test, or None."""
    if not test_replay_mpi.mpi_built():
        return ("dpro was built without MPI (dpro-replay has no --mpi; test_replay_mpi.py "
                "says why)")
    absent = [p for p in PROGRAMS if shutil.which(p, path=SBIN) is None]
    if absent:
        return ("no Slurm: %s not found (Debian: apt-get install slurmctld slurmd "
                "slurm-client munge; tools/quickstart installs them)" % ", ".join(absent))
    if os.geteuid() != 0:
        return "not root: slurmd starts a job's tasks as their user and must run as root"
    return None


def no_pmix(cluster):
    """Why srun cannot start Open MPI here (no PMIx plugin: `srun --mpi=list`), or None."""
    r = subprocess.run(["srun", "--mpi=list"], env=cluster.env, capture_output=True, text=True)
    said = (r.stdout + r.stderr).strip().replace("\n", " ")
    if "pmix" in said:
        return None
    return "Slurm has no PMIx plugin (srun --mpi=list: %s): Open MPI's srun start needs it" % said


def main():
    why = prerequisites()
    if why:
        print("skip: " + why)
        return SKIP
    # slurmd starts a step's slurmstepd as a daemon: made this process's descendant (its
    # parent when slurmd's fork ends), it is reaped here and seen if left
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # a test harness's timeout (SIGTERM) still stops the cluster: the finally below runs
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    with tempfile.TemporaryDirectory(prefix="dpro-srun-") as tmp:
        os.chmod(tmp, 0o711)  # munged wants its socket's directories searchable by all
        cluster = Cluster(os.path.join(tmp, "slurm"))
        srun_path = shutil.which("srun", path=SBIN)

        def srun(n, *cmd, env=None, timeout=600):
            """srun --mpi=pmix -O -n n cmd on the cluster (a CompletedProcess, bytes); the
            tasks start in the cluster's directory, so cmd's program is made absolute."""
            cmd = [os.path.abspath(cmd[0])] + list(cmd[1:])
            return subprocess.run([srun_path, "--mpi=pmix", "-O", "-n", str(n)] + cmd,
                                  env=dict(cluster.env, **(env or {})), cwd=cluster.tmp,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=timeout)
        why = None
        try:
            up = cluster.start()
            check(up, "the one-node Slurm cluster started (its node idle)")
            if not up:
                print(cluster.logs())
            else:
                why = no_pmix(cluster)
                if why is None:
                    run_jobs(tmp, srun)
                    lingering_step(cluster, srun_path)
        finally:
            left = cluster.stop()
        check(not left, "no process of the cluster was left after stopping it (%s)" % left)
        check(not cluster.ours(), "none is there now")
    if why and exit_status() == 0:
        print("skip: " + why)
        return SKIP
    return exit_status()


def lingering_step(cluster, srun_path):
    """A step still running is the cluster's, so that one left would fail the test: `srun
    -n 1 sleep 300`, its srun, slurmstepd and task seen by cluster.ours() (within 60 s),
    then ended (SIGTERM to srun, which cancels the step)."""
    p = subprocess.Popen([srun_path, "-n", "1", "sleep", "300"], env=cluster.env,
                         cwd=cluster.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    want, seen = {"srun", "slurmstepd", "sleep"}, set()
    end = time.time() + 60
    while time.time() < end and not want <= seen and p.poll() is None:
        time.sleep(0.5)
        seen = {n for _, n in cluster.ours()}
    check(want <= seen, "a running step's srun, slurmstepd and task are the cluster's (%s)"
          % sorted(seen))
    p.terminate()
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_jobs(tmp, srun):
    jobs = [("skew", ["--ranks", "4", "--iters", "6", "--skew", "1:200", "--skew", "3:-90"]),
            ("straggler", ["--ranks", "6", "--iters", "8", "--straggler", "2:1.3", "--skew",
                           "4:120"])]
    for name, gen in jobs:
        d = os.path.join(tmp, name)
        subprocess.run([GEN, d] + gen, check=True, stdout=subprocess.DEVNULL)
        for n in (2, 4):
            test_replay_mpi.compare(name, d, n, [], launch=srun)
            test_replay_mpi.compare(name, d, n, ["--no-fold"], launch=srun)
    d = os.path.join(tmp, "skew")
    for n in (2, 4):
        test_optimize_mpi.compare("skew", d, n, ["--max-evals", "61"], launch=srun)
    # process 1 fails handing its reads to process 0 while process 0 waits for them: its
    # MPI_Abort ends the whole step
    try:
        r = srun(3, REPLAY, "--mpi", d, "--json", env={"DPRO_TEST_MPI_SEND_FAIL": "1"},
                 timeout=120)
    except subprocess.TimeoutExpired:
        r = None
    err = r.stderr.decode(errors="replace") if r else ""
    check(r is not None and r.returncode != 0 and "process 1 of 3: out of memory" in err
          and not r.stdout,
          "send failure on process 1, srun -n 3: every process ends, non-zero (%s), saying "
          "which and why (%s)" % (r.returncode if r else "a hang", err[-300:]))


if __name__ == "__main__":
    sys.exit(main())
