# tests/optimizer: unit tests of libdproopt on hand-made and synthetic graphs, the
# closed loop on tests/simgpu (profile ddp-sim, optimize, apply, measure; skipped
# without CUDA headers), and the search benchmark (make bench).
check_PROGRAMS += tests/optimizer/test_optimizer
tests_optimizer_test_optimizer_SOURCES = tests/optimizer/test_optimizer.c tests/optimizer/optjobs.c \
	tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer
# the learnt models: the fixed cost, the hinge, the contention correction
check_PROGRAMS += tests/optimizer/test_optimizer_models
tests_optimizer_test_optimizer_models_SOURCES = tests/optimizer/test_optimizer_models.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_models_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_models
# the FSDP strategies (keep unsharded, prefetch) and their absence on DDP jobs
check_PROGRAMS += tests/optimizer/test_optimizer_fsdp
tests_optimizer_test_optimizer_fsdp_SOURCES = tests/optimizer/test_optimizer_fsdp.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_fsdp_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_fsdp
# torch.compile's fusion on a DDP step, its iterations cut at the step or in the backward
check_PROGRAMS += tests/optimizer/test_optimizer_fusion
tests_optimizer_test_optimizer_fusion_SOURCES = tests/optimizer/test_optimizer_fusion.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_fusion_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_fusion
# DDP's buckets over the layers' gradients (ddp-sim) at several caps
check_PROGRAMS += tests/optimizer/test_optimizer_buckets
tests_optimizer_test_optimizer_buckets_SOURCES = tests/optimizer/test_optimizer_buckets.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_buckets_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_buckets
# the search over a profile with one outlier iteration: ranked on the steady state
check_PROGRAMS += tests/optimizer/test_optimizer_outliers
tests_optimizer_test_optimizer_outliers_SOURCES = tests/optimizer/test_optimizer_outliers.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_test_optimizer_outliers_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_outliers
# where a captured step's graph launch stands, its iterations cut at the step or at a kernel
check_PROGRAMS += tests/optimizer/test_optimizer_capture
tests_optimizer_test_optimizer_capture_SOURCES = tests/optimizer/test_optimizer_capture.c
tests_optimizer_test_optimizer_capture_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
TESTS += tests/optimizer/test_optimizer_capture
# every field of dpro-optimize's memory estimate of a job, for test_memest_window.py
check_PROGRAMS += tests/optimizer/memest_dump
tests_optimizer_memest_dump_SOURCES = tests/optimizer/memest_dump.c
tests_optimizer_memest_dump_LDADD = optimizer/libdproopt.la
if HAVE_PYTHON3
# the documented --json keys of dpro-replay and dpro-optimize on a real (imported) trace
dist_check_SCRIPTS += tests/optimizer/test_json_keys.py
TESTS += tests/optimizer/test_json_keys.py
# more than 512 layers (the plan's recompute flags): deterministic under --seed, ASan-clean
dist_check_SCRIPTS += tests/optimizer/test_framework.py
TESTS += tests/optimizer/test_framework.py
# the advice on the real Kineto traces: a capture no faster than the device, text = JSON
dist_check_SCRIPTS += tests/optimizer/test_real_advice.py
TESTS += tests/optimizer/test_real_advice.py
dist_check_SCRIPTS += tests/optimizer/test_many_layers.py
TESTS += tests/optimizer/test_many_layers.py
# the peak memory of recomputation through ddp-sim's caching allocator (memest.h)
dist_check_SCRIPTS += tests/optimizer/test_memest_reuse.py
TESTS += tests/optimizer/test_memest_reuse.py
# the memory estimate from -n/-w's window against the one from every event, field by field
dist_check_SCRIPTS += tests/optimizer/test_memest_window.py
TESTS += tests/optimizer/test_memest_window.py
# accumulation's micro-batch in the simple physics: the weight floor where the kernels'
# time is their FLOPs' (a consistency check)
dist_check_SCRIPTS += tests/optimizer/test_accum_simple.py
TESTS += tests/optimizer/test_accum_simple.py
dist_check_SCRIPTS += tests/optimizer/closed_loop.py
TESTS += tests/optimizer/closed_loop.py
# dpro-optimize folded (alike ranks as weighted classes, the default) against --no-fold
dist_check_SCRIPTS += tests/optimizer/test_optimize_fold.py
TESTS += tests/optimizer/test_optimize_fold.py
# dpro-optimize --mpi: the JSON of mpirun -n 2 to 4 against the single process's (it skips
# when configure found no MPI)
dist_check_SCRIPTS += tests/optimizer/test_optimize_mpi.py
TESTS += tests/optimizer/test_optimize_mpi.py
endif

BENCHMARKS += tests/optimizer/bench_optimizer
noinst_PROGRAMS += tests/optimizer/bench_optimizer
tests_optimizer_bench_optimizer_SOURCES = tests/optimizer/bench_optimizer.c
tests_optimizer_bench_optimizer_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
# tensor partition's time where no participant has a gating kernel (copy_preds)
noinst_PROGRAMS += tests/optimizer/bench_partition
tests_optimizer_bench_partition_SOURCES = tests/optimizer/bench_partition.c \
	tests/optimizer/optjobs.c tests/optimizer/optjobs.h
tests_optimizer_bench_partition_LDADD = optimizer/libdproopt.la tests/replay/libdprosynth.la
EXTRA_DIST += tests/optimizer/measure_fusion_model.py tests/optimizer/measure_memest_pairs.py \
	tests/optimizer/measure_accum_floor.py
