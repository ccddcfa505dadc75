#!/usr/bin/env python3
"""gen_kineto.py GEN OUT.json [--rank R] [--world W] [--steps N] [--first-step S]:
a small PyTorch profiler (Kineto) trace in the spelling of one Kineto generation.

GEN is one of:
  1.8    PyTorch 1.8-1.9: categories Operator (ops, and the ProfilerStep#N ranges),
         Runtime, Kernel, Memcpy, Memset, User (GPU ranges); flows "async" named "launch";
         every tid written as a string ("1234", "stream 7", "stream 7 user"); "external id"
  1.10   cpu_op, user_annotation, gpu_user_Annotation (tid "stream 7 annotations");
         Runtime, Kernel, Memcpy, Memset; flows "async_gpu", "forward_backward"
  1.11   cuda_runtime; Kernel, Memcpy, Memset; gpu_user_Annotation; flows
         "async_cpu_to_gpu" named "async_gpu", "forward_backward" named "fwd_bwd"
  1.13   PyTorch 1.12-1.13: kernel, gpu_memcpy, gpu_memset, gpu_user_annotation,
         cuda_runtime; flows as 1.11
  2.x    today's: flows "ac2g", "fwdbwd"; times relative to baseTimeNanoseconds with
         three decimals; cuda_driver, cuda_sync; the collective's arguments on the NCCL
         kernel; record_param_comms; distributedInfo with pg_config; [memory] instants
  rocm   2.x on ROCm (roctracer / rocprofiler of Kineto): HIP API names (hipLaunchKernel,
         hipExtModuleLaunchKernel, hipMemcpyAsync, hipMemsetAsync); integers of the API
         calls written as strings ("stream": "0x0", "size": "2560", "bytes": "2560"), the
         copy's own record without its size (ROCm 6.2);
         kernels with "kind": "Dispatch Kernel"; the RCCL kernel ncclDevKernel_Generic
         whose operation only the enclosing record_param_comms / nccl:all_reduce names

The spellings follow pytorch/kineto's libkineto/src/output_json.cpp, ActivityType.cpp,
CuptiActivity.tpp and Roctracer/Rocprof*Activity of each era. Every step holds two
framework ops with a kernel each, a host-to-device copy, a set, a GPU range and an NCCL
all-reduce (launched inside record_param_comms, itself inside nccl:all_reduce); 2.x and
rocm add a grouped all-to-all (a SendRecv kernel under c10d::alltoall_base_ /
record_param_comms / nccl:all_to_all) for the ranks to match. The checks read this JSON
back with the standard library (count_kineto.py), not through what wrote it.
"""
import argparse
import json

GENS = ("1.8", "1.10", "1.11", "1.13", "2.x", "rocm")

CATS = {
    #        op          step        runtime        kernel    memcpy        memset
    #        gpu range               flow (ac2g)    flow name            fwdbwd
    "1.8": ("Operator", "Operator", "Runtime", "Kernel", "Memcpy", "Memset",
             "User", "async", "launch", None),
    "1.10": ("cpu_op", "user_annotation", "Runtime", "Kernel", "Memcpy", "Memset",
              "gpu_user_Annotation", "async_gpu", None, "forward_backward"),
    "1.11": ("cpu_op", "user_annotation", "cuda_runtime", "Kernel", "Memcpy", "Memset",
              "gpu_user_Annotation", "async_cpu_to_gpu", "async_gpu", "forward_backward"),
    "1.13": ("cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset",
              "gpu_user_annotation", "async_cpu_to_gpu", "async_gpu", "forward_backward"),
    "2.x": ("cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset",
             "gpu_user_annotation", "ac2g", "ac2g", "fwdbwd"),
    "rocm": ("cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset",
              "gpu_user_annotation", "ac2g", "ac2g", "fwdbwd"),
}

BASE_NS = 1711964646000000000  # a quarter-year boundary, as Kineto's base time is


class Gen:
    def __init__(self, gen, rank, world, pid):
        self.gen, self.rank, self.world = gen, rank, world
        (self.c_op, self.c_step, self.c_rt, self.c_k, self.c_cp, self.c_set, self.c_gann,
         self.c_flow, self.flow_name, self.c_fwdbwd) = CATS[gen]
        self.pid, self.tid, self.tid2 = pid, pid + 5, pid + 9
        self.dev = 2 if gen == "rocm" else 0  # the ROCm sample's GPU 2
        self.stream, self.comm_stream = (0, 3) if gen == "rocm" else (7, 20)
        self.ev = []
        self.corr = 100 + rank * 7
        self.ext = 1000
        self.flow = 1
        self.hip = gen == "rocm"
        self.rel = gen in ("2.x", "rocm")  # times relative to the base time, decimals

    def ts(self, us):
        if self.rel:
            return round(us + 0.125, 3)
        return int(us) + 1682725897000000  # absolute, as before the base time

    def htid(self, tid):
        return str(tid) if self.gen == "1.8" else tid

    def dtid(self, stream, what=""):
        if self.gen == "1.8":
            return "stream %d%s" % (stream, " user" if what == "ann" else "")
        if what == "ann" and self.gen in ("1.10", "1.11"):
            return "stream %d annotations" % stream
        return stream

    def x(self, cat, name, pid, tid, ts, dur, args=None):
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": self.ts(ts),
             "dur": round(dur, 3) if self.rel else int(dur)}
        if args is not None:
            e["args"] = args
        self.ev.append(e)
        return e

    def op(self, name, ts, dur, cat=None, extra=None, tid=None):
        self.ext += 1
        cat = cat or self.c_op
        if self.gen == "1.8":
            args = {"Input dims": [], "Input type": [], "Input names": [], "Output dims": [],
                    "Output type": [], "Output names": [], "Device": -1,
                    "External id": self.ext, "Extra arguments": {}, "Call stack": "",
                    "Trace name": "PyTorch Profiler", "Trace iteration": 0}
        else:
            args = {"External id": self.ext, "Record function id": 0}
            if self.gen in ("1.10", "1.11"):
                args.update({"Trace name": "PyTorch Profiler", "Trace iteration": 0})
        args.update(extra or {})
        return self.x(cat, name, self.pid, self.htid(tid or self.tid), ts, dur, args)

    def flows(self, corr, rt, dev):
        """The launch -> device op flow of each era."""
        s = {"ph": "s", "id": corr, "pid": rt["pid"], "tid": rt["tid"], "ts": rt["ts"],
             "cat": self.c_flow, "name": self.flow_name or rt["name"]}
        f = {"ph": "f", "id": corr, "pid": dev["pid"], "tid": dev["tid"], "ts": dev["ts"],
             "cat": self.c_flow, "name": self.flow_name or rt["name"], "bp": "e"}
        if self.gen == "1.8":
            s["tid"] = int(rt["tid"])
        elif self.gen in ("1.10", "1.11", "1.13"):
            s["bp"] = "e"
        self.ev += [s, f]

    def launch(self, api, kname, t, kt, kdur, kind="kernel", nbytes=0, kargs=None, tid=None,
               stream=None):
        """A launch call at t and its device op at kt."""
        self.corr += 1
        c = self.corr
        tid = tid or self.tid
        stream = self.stream if stream is None else stream
        ext = self.ext
        if self.gen == "1.8" or (self.gen == "1.10"):
            rargs = {"cbid": 211 if kind == "kernel" else 41, "correlation": c,
                     "external id": ext, "external ts": self.ts(t - 1)}
        elif self.hip:
            rargs = {"External id": ext, "cid": 107 if kind == "kernel" else 153,
                     "correlation": c, "stream": "0x0"}
            if kind == "kernel":
                rargs.update({"kernel": kname, "grid": [1, 1, 1], "block": [256, 1, 1],
                              "shared memory": 0})
            else:
                rargs.update({"src": "0x55674ecd4180", "dst": "0x7fda0e810200",
                              "size": str(nbytes), "bytes": str(nbytes), "kind": "1"})
        else:
            rargs = {"External id": ext, "cbid": 211, "correlation": c}
        cat_rt = self.c_rt
        if api.startswith("cu") and not api.startswith("cuda"):
            cat_rt = "cuda_driver"
        rt = self.x(cat_rt, api, self.pid, self.htid(tid), t, 4, rargs)
        dargs = {"device": self.dev, "context": 1, "stream": stream, "correlation": c}
        if self.gen == "1.8" or self.gen == "1.10":
            dargs["external id"] = ext
        elif self.gen != "1.11":
            dargs = {"External id": ext, **dargs}
        if self.hip:
            dargs.pop("context")
            dargs["kind"] = {"kernel": "Dispatch Kernel", "memcpy": "HtoD",
                             "memset": "Memset"}[kind]
        if kind == "kernel":
            if not self.hip:
                dargs.update({"queued": 0, "registers per thread": 32,
                              "shared memory": 1024, "warps per SM": 4.0,
                              "grid": [80, 1, 1], "block": [128, 1, 1]})
            cat, name = self.c_k, kname
        elif kind == "memcpy":
            if not self.hip:  # ROCm 6.2's copy records hold no size: their call's "size" does
                dargs.update({"bytes": nbytes, "memory bandwidth (GB/s)": 1.5})
            cat, name = self.c_cp, ("Memcpy HtoD (Host -> Device)" if self.hip
                                    else "Memcpy HtoD (Pinned -> Device)")
        else:
            dargs.update({"bytes": nbytes, "memory bandwidth (GB/s)": 2.5})
            cat, name = self.c_set, "Memset (Device)"
        dargs.update(kargs or {})
        dev = self.x(cat, name, self.dev, self.dtid(stream), kt, kdur, dargs)
        self.flows(c, rt, dev)
        return dev

    def step(self, n, t0):
        """ProfilerStep#n from t0 (us): 1000 us long."""
        hip = self.hip
        lk = "hipLaunchKernel" if hip else "cudaLaunchKernel"
        self.op("ProfilerStep#%d" % n, t0, 1000, cat=self.c_step)
        mm = self.op("aten::mm", t0 + 10, 60,
                     extra=None if self.gen == "1.8" else {"Input Dims": [[64, 64], [64, 64]],
                                                           "Input type": ["float", "float"],
                                                           "Sequence number": n})
        self.launch("hipExtModuleLaunchKernel" if hip else lk,
                    "Cijk_Alik_Bljk_SB_MT64x16x32" if hip else "ampere_sgemm_64x64_nn",
                    t0 + 20, t0 + 30, 100)
        self.op("aten::add", t0 + 80, 30)
        self.launch(lk, "void at::native::vectorized_elementwise_kernel<4, add>(int)",
                    t0 + 85, t0 + 140, 20)
        self.op("aten::copy_", t0 + 120, 30)
        self.launch("hipMemcpyAsync" if hip else "cudaMemcpyAsync", "", t0 + 125, t0 + 170,
                    10, kind="memcpy", nbytes=2560)
        self.op("aten::zero_", t0 + 160, 20)
        self.launch("hipMemsetAsync" if hip else "cudaMemsetAsync", "", t0 + 165, t0 + 190,
                    5, kind="memset", nbytes=1024)
        if self.gen == "2.x":
            # a launch through the driver, and a host wait on an event
            self.op("aten::relu", t0 + 200, 20)
            self.launch("cuLaunchKernel", "triton_poi_fused_relu_0", t0 + 205, t0 + 215, 8)
            self.x("cuda_sync", "Event Sync", self.dev, self.stream, t0 + 230, 12,
                   {"cuda_sync_kind": "Event Sync", "wait_on_cuda_event_record_corr_id": 0,
                    "wait_on_cuda_event_id": 3, "wait_on_stream": -1, "device": self.dev})
            self.ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                            "pid": self.pid, "tid": self.tid, "ts": self.ts(t0 + 240),
                            "args": {"Total Reserved": 2097152, "Total Allocated": 1024,
                                     "Bytes": 1024, "Addr": 140000000 + n, "Device Id": 0,
                                     "Device Type": 1}})
        # a GPU range over the first kernel
        self.ext += 1
        self.x(self.c_gann, "Optimizer.step#SGD.step", self.dev, self.dtid(self.stream, "ann"),
               t0 + 30, 100, {"External id": self.ext})
        # the all-reduce: nccl:all_reduce > record_param_comms > the launch
        ann = "nccl:all_reduce"
        self.op(ann, t0 + 300, 60, cat=self.c_step)
        rpc = {}
        if self.gen in ("2.x", "rocm"):
            rpc = {"Collective name": "allreduce", "In msg nelems": 4096, "Out msg nelems": 4096,
                   "Group size": self.world, "dtype": "Float", "Process Group Name": "0",
                   "Process Group Ranks": str(list(range(self.world)))}
        if self.gen == "2.x":
            rpc["Seq"] = (n - 1) * 2  # c10d's per process group number: 2 a step
        self.op("record_param_comms", t0 + 305, 50, extra=rpc)
        kargs = {}
        if self.gen == "2.x":
            kargs = dict(rpc)
        kname = ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)" if hip else
                 "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
        self.launch(lk, kname, t0 + 310, t0 + 400, 200, kargs=kargs, stream=self.comm_stream)
        if self.gen in ("2.x", "rocm"):
            # a grouped all-to-all: one SendRecv kernel, no argument naming the operation
            # on the kernel; c10d::alltoall_base_ > record_param_comms > nccl:all_to_all
            self.op("c10d::alltoall_base_", t0 + 600, 80)
            a2a = {"Collective name": "all_to_all", "In msg nelems": 8192,
                   "Out msg nelems": 8192, "Group size": self.world, "dtype": "Float",
                   "Process Group Name": "0"}
            if self.gen == "2.x":
                a2a["Seq"] = (n - 1) * 2 + 1
            self.op("record_param_comms", t0 + 605, 70, extra=a2a)
            self.op("nccl:all_to_all", t0 + 610, 60, cat=self.c_step)
            self.launch(lk, ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)" if hip
                             else "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"),
                        t0 + 620, t0 + 700, 150, stream=self.comm_stream)
        if self.c_fwdbwd:
            fid = 10 + n
            self.ev.append({"ph": "s", "id": fid, "pid": self.pid, "tid": self.tid,
                            "ts": mm["ts"], "cat": self.c_fwdbwd,
                            "name": "fwd_bwd" if self.gen != "2.x" and self.gen != "rocm"
                            else "fwdbwd"})
            self.ev.append({"ph": "f", "id": fid, "pid": self.pid, "tid": self.tid2,
                            "ts": self.ts(t0 + 900), "cat": self.c_fwdbwd, "bp": "e",
                            "name": "fwd_bwd" if self.gen != "2.x" and self.gen != "rocm"
                            else "fwdbwd"})
            self.op("autograd::engine::evaluate_function: MmBackward0", t0 + 890, 40,
                    tid=self.tid2)

    def trace(self, steps, first_step):
        """Steps first_step .. first_step + steps - 1; step n begins at the same time on
        every rank (1000 + 1100 (n - 1) us, 3 us later a rank)."""
        t0 = 1000.0 + self.rank * 3
        for i in range(first_step, first_step + steps):
            self.step(i, t0 + (i - 1) * 1100)
        end = t0 + (first_step + steps - 1) * 1100
        meta = [{"name": "process_name", "ph": "M", "ts": self.ts(0), "pid": self.pid,
                 "tid": 0, "args": {"name": "python3"}},
                {"name": "thread_name", "ph": "M", "ts": self.ts(0), "pid": self.pid,
                 "tid": self.htid(self.tid), "args": {"name": "thread %d (python3)" % self.tid}},
                {"name": "thread_name", "ph": "M", "ts": self.ts(0), "pid": self.dev,
                 "tid": self.dtid(self.stream), "args": {"name": "stream %d " % self.stream}}]
        begin = t0 + (first_step - 1) * 1100 - 100
        span = {"ph": "X", "cat": "Trace", "ts": self.ts(begin), "dur": int(end - begin),
                "pid": "Spans" if self.gen != "1.8" else "Traces", "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
        inst = [{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",
                 "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": self.ts(begin)}]
        tail = [{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "",
                 "ts": self.ts(end + 10)}]
        doc = {"schemaVersion": 1}
        if self.gen not in ("1.8", "1.10"):
            dist = {"backend": "nccl", "rank": self.rank, "world_size": self.world}
            if self.gen in ("2.x", "rocm"):
                dist.update({"pg_count": 1, "pg_config": [
                    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                     "pg_size": self.world, "ranks": list(range(self.world))}],
                    "nccl_version": "2.18.3" if not self.hip else "2.20.5"})
            doc["distributedInfo"] = dist
            doc["deviceProperties"] = [{"id": self.dev, "name": "AMD Instinct MI300X" if self.hip
                                        else "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920,
                                        "computeMajor": 9 if self.hip else 8, "computeMinor": 0,
                                        "numSms": 304 if self.hip else 108}]
        doc["traceEvents"] = meta + [span] + inst + self.ev + tail
        if self.rel:
            doc.update({"traceName": "rank%d.json" % self.rank, "displayTimeUnit": "ms",
                        "baseTimeNanoseconds": BASE_NS})
        return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gen", choices=GENS)
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--first-step", type=int, default=1)
    a = ap.parse_args()
    doc = Gen(a.gen, a.rank, a.world, 4000 + a.rank).trace(a.steps, a.first_step)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
