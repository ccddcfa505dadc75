# tests/replay: the replayer. Unit tests of the pure parts (alignment, cost model,
# iteration detection, simulator, critical path, graph transformations), dpro-replay and
# dpro-export on synthetic multi-rank traces written with the trace writer (known skew,
# known iteration time, faults), end to end on tests/simgpu (skipped without it: replay
# accuracy, clock skew, a what-if prediction against the realised run), what-if
# predictions on the real Kineto traces of ../shared (launch-queue backpressure; skipped
# without them), send/recv matching end to end on a pipeline-parallel job (pipe-sim),
# and the simulator benchmark (make bench).
# synth: synthetic data-parallel jobs as dataflow graphs, for the tests and benchmarks
# of tests/replay and tests/optimizer (not part of the replay library)
noinst_LTLIBRARIES += tests/replay/libdprosynth.la
tests_replay_libdprosynth_la_SOURCES = tests/replay/synth.c tests/replay/synth.h
tests_replay_libdprosynth_la_LIBADD = replay/libdproreplay.la

# the replay's pure parts: what it reads off measured times (align), the simulator and
# the graph (sim), the builder's timing inference and send/recv matching (build)
check_PROGRAMS += tests/replay/test_replay_align tests/replay/test_replay_sim \
	tests/replay/test_replay_build tests/replay/gen_traces tests/replay/test_fidelity_unit
tests_replay_test_replay_align_SOURCES = tests/replay/test_replay_align.c
tests_replay_test_replay_align_LDADD = replay/libdproreplay.la $(LIBM)
tests_replay_test_replay_sim_SOURCES = tests/replay/test_replay_sim.c
tests_replay_test_replay_sim_LDADD = tests/replay/libdprosynth.la replay/libdproreplay.la $(LIBM)
tests_replay_test_replay_build_SOURCES = tests/replay/test_replay_build.c
tests_replay_test_replay_build_LDADD = replay/libdproreplay.la
tests_replay_test_fidelity_unit_SOURCES = tests/replay/test_fidelity_unit.c
tests_replay_test_fidelity_unit_LDADD = replay/libdproreplay.la $(LIBM)
# kernel names as reports show them: demangled, shortened past a length (replay/kernels.c)
check_PROGRAMS += tests/replay/test_kernel_names
tests_replay_test_kernel_names_SOURCES = tests/replay/test_kernel_names.c tests/unit/testutil.h
tests_replay_test_kernel_names_LDADD = replay/libdproreplay.la
TESTS += tests/replay/test_kernel_names
# NCCL kernel names (replay/ncclname.c) on the real traces' names
check_PROGRAMS += tests/replay/test_ncclname
tests_replay_test_ncclname_SOURCES = tests/replay/test_ncclname.c tests/unit/testutil.h
tests_replay_test_ncclname_LDADD = replay/libdproreplay.la
TESTS += tests/replay/test_ncclname
# the compact form of a rank's events and signature sent to process 0 (replay/job_share.c)
check_PROGRAMS += tests/replay/test_job_wire
tests_replay_test_job_wire_SOURCES = tests/replay/test_job_wire.c tests/unit/testutil.h
tests_replay_test_job_wire_LDADD = replay/libdproreplay.la
TESTS += tests/replay/test_job_wire
# a host's CPUs from its ranks' host_cpu_list and host_cpus rows (replay/hostshare.c)
check_PROGRAMS += tests/replay/test_hostshare_cpus
tests_replay_test_hostshare_cpus_SOURCES = tests/replay/test_hostshare_cpus.c tests/unit/testutil.h
tests_replay_test_hostshare_cpus_LDADD = replay/libdproreplay.la $(LIBM)
TESTS += tests/replay/test_hostshare_cpus
# the what-ifs about ranks: one rank slower, more ranks (replay/whatif.c)
check_PROGRAMS += tests/replay/test_replay_whatif_ranks
tests_replay_test_replay_whatif_ranks_SOURCES = tests/replay/test_replay_whatif_ranks.c
tests_replay_test_replay_whatif_ranks_LDADD = tests/replay/libdprosynth.la replay/libdproreplay.la $(LIBM)
TESTS += tests/replay/test_replay_whatif_ranks
# the collective model's price in a protocol the trace never ran (costmodel_regime_at)
check_PROGRAMS += tests/replay/test_costmodel_proto
tests_replay_test_costmodel_proto_SOURCES = tests/replay/test_costmodel_proto.c
tests_replay_test_costmodel_proto_LDADD = replay/libdproreplay.la $(LIBM)
TESTS += tests/replay/test_costmodel_proto
TESTS += tests/replay/test_replay_whatif_jobs.py
dist_check_SCRIPTS += tests/replay/test_replay_whatif_jobs.py
tests_replay_gen_traces_SOURCES = tests/replay/gen_traces.c
tests_replay_gen_traces_LDADD = $(DPROTRACE_LINK)

# test_chrome_estimate: the Chrome export's size estimate against the export (driven by
# test_chrome_estimate.py)
check_PROGRAMS += tests/replay/test_chrome_estimate
tests_replay_test_chrome_estimate_SOURCES = tests/replay/test_chrome_estimate.c \
	tests/unit/testutil.h
tests_replay_test_chrome_estimate_LDADD = replay/libdproreplay.la
# its own allocator, which fails on demand (the estimate's out-of-memory path)
tests_replay_test_chrome_estimate_LDFLAGS = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
TESTS += tests/replay/test_chrome_estimate.py
dist_check_SCRIPTS += tests/replay/test_chrome_estimate.py

# test_replay_window: the window and the threads of job_load against the whole load
# (driven by test_replay_window.py)
check_PROGRAMS += tests/replay/test_replay_window
tests_replay_test_replay_window_SOURCES = tests/replay/test_replay_window.c tests/unit/testutil.h
tests_replay_test_replay_window_LDADD = replay/libdproreplay.la
TESTS += tests/replay/test_replay_window.py
dist_check_SCRIPTS += tests/replay/test_replay_window.py
# dpro-diff: known differences of synthetic traces, real traces against themselves
TESTS += tests/replay/test_dpro_diff.py
dist_check_SCRIPTS += tests/replay/test_dpro_diff.py
# the critical path's composition by what ran (cpu_op, api, launch delay, kernel, ...)
TESTS += tests/replay/test_replay_cp_classes.py
dist_check_SCRIPTS += tests/replay/test_replay_cp_classes.py
# the host-share model of --what-if-ranks on synthetic traces; the collector's CPU rows
TESTS += tests/replay/test_replay_hostshare.py
dist_check_SCRIPTS += tests/replay/test_replay_hostshare.py
# a host's CPUs when each rank is bound to a core: the union of the ranks' CPU sets
TESTS += tests/replay/test_replay_cpuset.py
dist_check_SCRIPTS += tests/replay/test_replay_cpuset.py
# rank folding: folded and explicit (--no-fold) replays agree
TESTS += tests/replay/test_replay_fold.py
dist_check_SCRIPTS += tests/replay/test_replay_fold.py
# -q: only the final figure, no warnings
TESTS += tests/replay/test_replay_quiet.py
dist_check_SCRIPTS += tests/replay/test_replay_quiet.py
# what -q skips and what a failing drawn replay keeps (DPRO_TEST_FIDELITY_FAIL)
TESTS += tests/replay/test_replay_fidelity_fault.py
dist_check_SCRIPTS += tests/replay/test_replay_fidelity_fault.py
# --what-if-network on traces that record no host: said so
TESTS += tests/replay/test_replay_nohost.py
dist_check_SCRIPTS += tests/replay/test_replay_nohost.py
# the meta keys read of a loaded rank are the ones its reader carries under --mpi: read
# only through job_rank_meta (a scan of the sources; test_job_wire: each one arrives)
TESTS += tests/replay/test_meta_keys.py
dist_check_SCRIPTS += tests/replay/test_meta_keys.py

TESTS += tests/replay/test_replay_align tests/replay/test_replay_sim \
	tests/replay/test_replay_build tests/replay/test_fidelity_unit \
	tests/replay/test_replay_traces.py \
	tests/replay/test_replay_simgpu.py tests/replay/test_replay_whatif.py \
	tests/replay/test_replay_kineto_whatif.py tests/replay/test_replay_p2p.py \
	tests/replay/test_replay_bad_input.py tests/replay/test_perturbation.py \
	tests/replay/test_replay_testlib.py
dist_check_SCRIPTS += tests/replay/test_replay_testlib.py tests/replay/replay_testlib.py tests/replay/test_replay_traces.py tests/replay/test_replay_simgpu.py \
	tests/replay/test_replay_whatif.py tests/replay/test_replay_kineto_whatif.py \
	tests/replay/test_replay_p2p.py tests/replay/test_replay_bad_input.py \
	tests/replay/test_perturbation.py

# pipe-sim: a pipeline-parallel job (send/recv between stages) on the simulated GPU, for
# test_replay_p2p.py; linked like the tests/simgpu programs (-no-install: a real binary
# that finds the stand-ins through its RUNPATH).
if HAVE_CUDA
check_PROGRAMS += tests/replay/pipe-sim
tests_replay_pipe_sim_SOURCES = tests/replay/pipe_sim.c
tests_replay_pipe_sim_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_replay_pipe_sim_LDFLAGS = -no-install
tests_replay_pipe_sim_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
endif

# test_dfg_memory: bytes per graph node and edge (dfg_memory) within docs/models.md's figures
check_PROGRAMS += tests/replay/test_dfg_memory
tests_replay_test_dfg_memory_SOURCES = tests/replay/test_dfg_memory.c
tests_replay_test_dfg_memory_LDADD = tests/replay/libdprosynth.la replay/libdproreplay.la
TESTS += tests/replay/test_dfg_memory

BENCHMARKS += tests/replay/bench_replay
noinst_PROGRAMS += tests/replay/bench_replay
tests_replay_bench_replay_SOURCES = tests/replay/bench_replay.c
tests_replay_bench_replay_LDADD = tests/replay/libdprosynth.la replay/libdproreplay.la

# the typical-duration replay's figures (docs/figures.md): run by hand, not a test
EXTRA_DIST += tests/replay/fig_typical_replay.py
EXTRA_DIST += tests/replay/measure_coll_model.py tests/replay/measure_contention.py \
	tests/replay/measure_more_ranks.py tests/replay/measure_unseen_proto.py

# bench_scale: a large job written as real trace files, replayed by dpro-replay: time and
# peak memory, and the same job traced 5x longer (make bench; sizes in the program)
BENCHMARKS += tests/replay/bench_scale
noinst_PROGRAMS += tests/replay/bench_scale
tests_replay_bench_scale_SOURCES = tests/replay/bench_scale.c
tests_replay_bench_scale_LDADD = $(DPROTRACE_LINK)

# dpro-replay --mpi: the distributed simulation node for node against the single one
# (test_mpi_sim, under mpirun) and the report of mpirun -n 2 and 3 against the
# single-process one (test_replay_mpi.py drives both; it skips when configure found no
# MPI).
if HAVE_MPI
check_PROGRAMS += tests/replay/test_mpi_sim
tests_replay_test_mpi_sim_SOURCES = tests/replay/test_mpi_sim.c
tests_replay_test_mpi_sim_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_replay_test_mpi_sim_LDADD = tests/replay/libdprosynth.la replay/libdprompi.la \
	replay/libdproreplay.la $(MPI_LIBS)
endif
TESTS += tests/replay/test_replay_mpi.py
dist_check_SCRIPTS += tests/replay/test_replay_mpi.py
# dpro-replay --mpi and dpro-optimize --mpi under valgrind: no uninitialised byte sent or
# inflated (skips without MPI or valgrind, and in a sanitizer build)
TESTS += tests/replay/test_share_memcheck.py
dist_check_SCRIPTS += tests/replay/test_share_memcheck.py
EXTRA_DIST += tests/replay/openmpi.supp
# srun starts dpro-replay --mpi and dpro-optimize --mpi as mpirun does: a one-node Slurm
# cluster the test starts and stops (it skips without MPI, Slurm or root)
TESTS += tests/replay/test_replay_srun.py
dist_check_SCRIPTS += tests/replay/test_replay_srun.py
# test_bench_scale: its generator writes the events it promises, and the benchmark runs
# (folded, --no-fold, 5x longer) at 4 ranks x 2,000 events
if HAVE_PYTHON3
TESTS += tests/replay/test_bench_scale.py
dist_check_SCRIPTS += tests/replay/test_bench_scale.py
# test_replay_open_files: 150 ranks replay with 64 open files allowed (detached readers)
TESTS += tests/replay/test_replay_open_files.py
dist_check_SCRIPTS += tests/replay/test_replay_open_files.py
endif

check_PROGRAMS += tests/replay/test_threadsched
tests_replay_test_threadsched_SOURCES = tests/replay/test_threadsched.c tests/unit/testutil.h
tests_replay_test_threadsched_LDADD = replay/libdproreplay.la
TESTS += tests/replay/test_threadsched
