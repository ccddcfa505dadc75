# tests/torch: real PyTorch on the simulated device.  `make venv` makes venv/ in the build
# tree with torch from PyPI (DPRO_TORCH_SPEC, the CUDA 13 wheel).  The wheels are kept in
# DPRO_WHEELS (pip download skips those already there) and installed from there, so that
# a rerun or a second build tree downloads nothing (pip's own HTTP cache keeps nothing
# when the index answers no-store); the stamp makes a rerun a no-op (make clean keeps
# venv/: rm -rf venv removes it).  tools/quickstart runs it unless DPRO_TORCH=0; without
# venv/ the torch tests skip and say so.
DPRO_TORCH_SPEC = torch==2.15.0
DPRO_WHEELS = $${XDG_CACHE_HOME:-$$HOME/.cache}/dpro-wheels
TORCH_VENV_STAMP = venv/.dpro-torch-stamp

venv: $(TORCH_VENV_STAMP)
$(TORCH_VENV_STAMP):
	@test "x$(PYTHON3)" != xno || { echo "make venv: python3 not found by configure" >&2; exit 1; }
	$(PYTHON3) -m venv venv
	$(MKDIR_P) "$(DPRO_WHEELS)"
	venv/bin/pip download --disable-pip-version-check -q -d "$(DPRO_WHEELS)" '$(DPRO_TORCH_SPEC)'
	venv/bin/pip install --disable-pip-version-check -q --no-index --find-links "$(DPRO_WHEELS)" \
		'$(DPRO_TORCH_SPEC)'
	venv/bin/python -c 'import torch; print("make venv: torch", torch.__version__)'
	touch $@
.PHONY: venv

EXTRA_DIST += tests/torch/census.py tests/torch/torchlib.py tests/torch/ddp_train.py \
	tests/torch/fsdp_train.py tests/torch/closed_loop_torch.py tests/torch/traced_train.py \
	tests/torch/bench_torch_overhead.py tests/torch/measure_launch_idle.py \
	tests/torch/measure_step_calls.py tests/torch/compile_model.py \
	tests/torch/measure_ddp_buckets.py tests/torch/measure_microbatches.py \
	tests/torch/measure_thread_sched.py tests/torch/measure_wait_stall.py \
	tests/torch/measure_step_phases.py
if HAVE_PYTHON3
# What torch's libraries import from the six CUDA libraries against what the stand-ins
# export (tests/torch/census.py), enforced for the libraries the stand-ins complete.
dist_check_SCRIPTS += tests/torch/test_census.py tests/torch/test_torch_env.py
TESTS += tests/torch/test_census.py tests/torch/test_torch_env.py
endif

if HAVE_PYTHON3
# Stock torch on the simulated device: start, zeros, a cuBLAS GEMM, synchronise; plain and
# under the collector (the trace's kernels, their launches, grids); a 2-rank NCCL all_reduce.
dist_check_SCRIPTS += tests/torch/test_torch_basic.py tests/torch/test_torch_allreduce.py
TESTS += tests/torch/test_torch_basic.py tests/torch/test_torch_allreduce.py
endif

if HAVE_PYTHON3
# torch.compile (Inductor + Triton) on the device: one rank and DDP on two under the
# collector; the Triton kernels, their driver launches and times in the traces.
dist_check_SCRIPTS += tests/torch/test_torch_compile.py
TESTS += tests/torch/test_torch_compile.py
endif

if HAVE_PYTHON3
# torch DDP (ddp_train.py) on 2 ranks: bucket sizes, gradient_as_bucket_view, static_graph,
# no_sync accumulation, checkpointing, the fp16 hook; parameters and gradients agree across
# the ranks; under the collector: kernels, matched collectives, replay.  FSDP2 (fsdp_train.py):
# resharding and prefetch settings, the gathered parameters agree across the ranks.
dist_check_SCRIPTS += tests/torch/test_torch_ddp.py tests/torch/test_torch_fsdp.py
TESTS += tests/torch/test_torch_ddp.py tests/torch/test_torch_fsdp.py
endif

if HAVE_PYTHON3
# dpro-optimize's peak-memory estimate of torch DDP and FSDP2 (the caching allocator's
# segments of the first step) against torch.cuda.max_memory_reserved(), with and without
# accumulation, on three jobs: within 10 %.
dist_check_SCRIPTS += tests/torch/test_torch_memest.py
TESTS += tests/torch/test_torch_memest.py
# The same estimate from dpro-optimize's -n/-w window against every event read (memest_dump,
# dpro-optimize's memory advice) on DDP and FSDP2 traces with step ranges, the first step's
# segments before the first marked one; and its fields against torch's memory_reserved().
dist_check_SCRIPTS += tests/torch/test_torch_memest_window.py
TESTS += tests/torch/test_torch_memest_window.py
endif

# The closed loop on real PyTorch DDP and FSDP2 (tests/torch/closed_loop_torch.py):
# profile, advise, apply the advice through ddp_train.py's and fsdp_train.py's options,
# measure.  A timed run of about 13 traced jobs per configuration, too long for make
# check: its own target.  Without the venv it skips (and the target succeeds); a missed
# goal fails it.
closed-loop-torch: all
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	HAVE_CUDA='$(HAVE_CUDA_VALUE)' DPRO_SANITIZERS='$(SANITIZERS_VALUE)' \
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON3) $(srcdir)/tests/torch/closed_loop_torch.py || \
	test $$? -eq 77
.PHONY: closed-loop-torch

if HAVE_PYTHON3
# The collector inside torch DDP (traced_train.py, 2 ranks, under dpro-run): every device
# operation linked to its launch, NVTX of torch.cuda.nvtx / record_function / emit_nvtx,
# the autograd threads, the caching allocator's segments, collectives and kernel counts
# matched across ranks.
dist_check_SCRIPTS += tests/torch/test_torch_collector.py
TESTS += tests/torch/test_torch_collector.py
# The same DDP run traced by the collector and by torch.profiler at once: Kineto's trace
# (dpro-import) against the collector's, launch by launch through correlation ids.
dist_check_SCRIPTS += tests/torch/test_torch_profiler.py
TESTS += tests/torch/test_torch_profiler.py
endif

if HAVE_PYTHON3
# make bench: the collector's overhead on a torch DDP iteration: the hooks' cost per call
# (tests/bench/hook_mix), the collector's threads' CPU, and plain and traced runs
# interleaved (says so and does nothing without venv/).  `make bench-overhead` runs it
# alone.
BENCHMARKS += tests/torch/bench_torch_overhead.py
bench-overhead: all
	$(PYTHON3) $(srcdir)/tests/torch/bench_torch_overhead.py
endif
