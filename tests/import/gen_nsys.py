#!/usr/bin/env python3
"""Writes small Nsight Systems SQLite exports (the schema `nsys export --type sqlite`
writes, as NVIDIA's "SQLite Export Schema Reference" documents it) of a two-rank data-parallel
job, for tests/import/test_import_nsys.sh.

  gen_nsys.py OUTDIR [--steps N]

writes OUTDIR/rank0.sqlite and OUTDIR/rank1.sqlite (one process each, as `nsys profile` of one
rank writes) and OUTDIR/both.sqlite (both processes in one export, as `nsys profile mpirun ...`
writes; with a third process, pid 4199, that made one CUDA call and ran no device op). Each
rank runs N steps: a ProfilerStep#k push/pop range (text through textId), five
compute kernels launched with cudaLaunchKernel, one launched with cuLaunchKernel (driver
table), an all-reduce (an ncclAllReduce range in NVTX domain "NCCL" with NCCL's payload as JSON,
around the launch of ncclDevKernel_AllReduce_Sum_f32_RING_LL), a copy each way and a memset.
Once per rank: a broadcast kernel launched outside any NCCL range (a collective from its
kernel name only), a start/end range, a mark, a range without an end, and a
cudaStreamSynchronize that starts no device op. Times are ns since the session start.
"""
import os
import sqlite3
import sys

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL,
    name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
    busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER,
    memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT,
    luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxId INTEGER, computeMajor INTEGER,
    computeMinor INTEGER);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,
    srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,
    dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,
    virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
    int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
    floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
"""

EVENT_TYPES = [(33, "NvtxCategory"), (34, "NvtxMark"), (39, "NvtxThread"),
               (59, "NvtxPushPopRange"), (60, "NvtxStartEndRange"), (75, "NvtxDomainCreate"),
               (76, "NvtxDomainDestroy")]
COPY_KINDS = [(0, "unknown"), (1, "HtoD"), (2, "DtoH"), (8, "DtoD"), (10, "PtoP")]
COMPUTE = ["void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
           "ampere_sgemm_128x64_nn", "void at::native::reduce_kernel<512, 1>()",
           "ampere_sgemm_64x32_tn", "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>()"]
DRIVER_KERNEL = "triton_poi_fused_add_0"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
BROADCAST = "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMM_ID = 0x5a17c0ffee123456
HW = 1  # the hardware id in the top bits of globalPid / globalTid


class Export:
    def __init__(self, path):
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        self.strings = {}
        self.db.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
                            [(i, n, n) for i, n in EVENT_TYPES])
        self.db.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
                            [(i, n, n) for i, n in COPY_KINDS])
        self.db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES "
                        "(1764741600000000000, '2025-12-03T06:00:00Z', '')")
        self.db.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'x', 'Hostname', 1, "
                        "'node7')")
        for dev in (0, 1):
            self.db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, "
                            "clockRate, smCount, cuDevice, computeMajor, computeMinor) "
                            "VALUES (0, ?, 'NVIDIA A100-SXM4-80GB', 85899345920, 1410000000, "
                            "108, ?, 8, 0)", (dev, dev))

    def sid(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[text], text))
        return self.strings[text]

    def close(self):
        self.db.commit()
        self.db.close()


def write_rank(x, rank, steps):
    """One process: pid 4100 + rank on device `rank`, main thread and a launcher thread."""
    pid = 4100 + rank
    gpid = (HW << 48) | (pid << 24)
    main, side = gpid | pid, gpid | (pid + 7)
    db, dev = x.db, rank
    db.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (x.sid("python3"), main))
    db.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (x.sid("pt_autograd_0"), side))
    db.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES "
               "(1000, 75, 'NCCL', ?, 1)", (main,))
    corr, t = 1, 100000 + 3000 * rank
    busy = {}  # stream -> end of its last op: ops of one stream run one after the other

    def on_stream(stream, ready, dur):
        start = max(ready, busy.get(stream, 0) + 1000)
        busy[stream] = start + dur
        return start

    def launch(table, api, name, stream, dur, tid=main, grid=(80, 1, 1)):
        nonlocal corr, t
        db.execute(f"INSERT INTO {table} VALUES (?, ?, 0, ?, ?, ?, 0, 0)",
                   (t, t + 4000, tid, corr, x.sid(api)))
        ks = on_stream(stream, t + 9000, dur)
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, "
                   "streamId, correlationId, globalPid, demangledName, shortName, "
                   "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
                   "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
                   "localMemoryTotal, gridId) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 32, ?, ?, ?, "
                   "128, 1, 1, 1024, 2048, 0, 0, ?)",
                   (ks, ks + dur, dev, stream, corr, gpid, x.sid(name),
                    x.sid(name.split("(")[0].split("<")[0]), grid[0], grid[1], grid[2], corr))
        corr += 1
        t += 5000

    def copy(api, kind, nbytes, src, dst, memset=False):
        nonlocal corr, t
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, 0)",
                   (t, t + 3000, main, corr, x.sid(api)))
        size = 2000 if memset else nbytes // 1000
        cs = on_stream(7, t + 6000, size)
        if memset:
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, "
                       "contextId, streamId, correlationId, globalPid, value, bytes, memKind) "
                       "VALUES (?, ?, ?, 1, 7, ?, ?, 0, ?, 3)",
                       (cs, cs + size, dev, corr, gpid, nbytes))
        else:
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, "
                       "contextId, streamId, correlationId, globalPid, bytes, copyKind, "
                       "srcKind, dstKind) VALUES (?, ?, ?, 1, 7, ?, ?, ?, ?, ?, ?)",
                       (cs, cs + size, dev, corr, gpid, nbytes, kind, src, dst))
        corr += 1
        t += 5000

    for step in range(steps):
        s0 = t
        copy("cudaMemcpyAsync_v3020", 1, 1 << 20, 1, 3)  # HtoD, pageable -> device
        for i, k in enumerate(COMPUTE):
            launch("CUPTI_ACTIVITY_KIND_RUNTIME", "cudaLaunchKernel_v7000", k, 7,
                   20000 + 3000 * i + 500 * rank)
        launch("CUPTI_ACTIVITY_KIND_DRIVER", "cuLaunchKernel", DRIVER_KERNEL, 7, 15000)
        r0 = t
        payload = ('{"NCCL communicator ID": %d, "Message size [bytes]": 4194304, '
                   '"Reduction operation": "ncclSum"}' % COMM_ID)
        launch("CUPTI_ACTIVITY_KIND_RUNTIME", "cudaLaunchKernelExC_v11060", ALLREDUCE, 13,
               300000, grid=(2, 1, 1))
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, "
                   "jsonText) VALUES (?, ?, 59, 'ncclAllReduce', ?, 1, ?)",
                   (r0 - 500, t - 200, main, payload))
        copy("cudaMemsetAsync_v3020", 0, 4096, 0, 0, memset=True)
        copy("cudaMemcpyAsync_v3020", 2, 1 << 18, 3, 2)  # DtoH, device -> pinned
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, textId, globalTid, "
                   "domainId) VALUES (?, ?, 59, 0, ?, ?, 0)",
                   (s0 - 100, t + 400000, x.sid("ProfilerStep#%d" % (step + 1)), main))
        t += 400000
    launch("CUPTI_ACTIVITY_KIND_RUNTIME", "cudaLaunchKernel_v7000", BROADCAST, 13, 50000,
           tid=side)
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, 0, ?, 0, 0)",
               (t, t + 700000, main, x.sid("cudaStreamSynchronize_v3020")))
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, "
               "endGlobalTid, domainId) VALUES (?, ?, 60, 17, 'data_load', ?, ?, 0)",
               (200, t + 900, main, side))
    db.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES "
               "(?, 34, 'checkpoint', ?, 0)", (t + 50, main))
    db.execute("INSERT INTO NVTX_EVENTS (start, eventType, rangeId, text, globalTid, domainId) "
               "VALUES (?, 60, 18, 'never_ended', ?, 0)", (t + 60, main))


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3
    os.makedirs(out, exist_ok=True)
    for r in (0, 1):
        x = Export(os.path.join(out, "rank%d.sqlite" % r))
        write_rank(x, r, steps)
        x.close()
    x = Export(os.path.join(out, "both.sqlite"))
    write_rank(x, 0, steps)
    write_rank(x, 1, steps)
    # a helper process that asked CUDA a question and ran nothing on the device
    helper = (HW << 48) | (4199 << 24) | 4199
    x.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (5000, 6000, 0, ?, 1, ?, 0, 0)",
                 (helper, x.sid("cudaGetDeviceCount_v3020")))
    x.close()


if __name__ == "__main__":
    main()
