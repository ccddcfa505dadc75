# tests/simgpu: the simulated GPU device (stand-in libcudart.so.13, libcuda.so.1,
# libnccl.so.2, libcupti.so.13 over libsimgpu.so.0), the simrun launcher, the
# ddp-sim job and their tests.  See tests/simgpu/README.md.
EXTRA_DIST += tests/simgpu/README.md tests/simgpu/cudart.map tests/simgpu/cupti.map \
	tests/simgpu/simgpu_test.py tests/simgpu/thread_cpu.py tests/simgpu/sync_late.py

if HAVE_CUDA
SIMGPU_CPPFLAGS = $(AM_CPPFLAGS) @CUDA_CPPFLAGS@ -I$(top_srcdir)/tests/simgpu
# Shared libraries that are not installed: -rpath makes libtool build them shared.
SIMGPU_LIBFLAGS = -rpath /nowhere -no-undefined

noinst_LTLIBRARIES += tests/simgpu/libsimgpu.la tests/simgpu/libcudart.la \
	tests/simgpu/libcuda.la tests/simgpu/libnccl.la tests/simgpu/libcupti.la

tests_simgpu_libsimgpu_la_SOURCES = tests/simgpu/core.c tests/simgpu/core_graph.c \
	tests/simgpu/core_props.c tests/simgpu/core_event.c tests/simgpu/core_mem.c \
	tests/simgpu/core_mta.c tests/simgpu/cupti_core.c tests/simgpu/cupti_clock.c \
	tests/simgpu/env.c \
	tests/simgpu/world.c tests/simgpu/nccl_model.c tests/simgpu/world.h \
	tests/simgpu/simgpu.h tests/simgpu/simgpu_internal.h
tests_simgpu_libsimgpu_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libsimgpu_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 0:0:0
tests_simgpu_libsimgpu_la_LIBADD = $(PTHREAD_LIBS) $(LIBM) -ldl

tests_simgpu_libcudart_la_SOURCES = tests/simgpu/cudart.c tests/simgpu/cudart_launch.c
tests_simgpu_libcudart_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libcudart_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 13:0:0
tests_simgpu_libcudart_la_LIBADD = tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) -ldl
EXTRA_tests_simgpu_libcudart_la_DEPENDENCIES = $(srcdir)/tests/simgpu/cudart.map

tests_simgpu_libcuda_la_SOURCES = tests/simgpu/cuda_driver.c tests/simgpu/cuda_driver_api.h
tests_simgpu_libcuda_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libcuda_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 1:0:0
tests_simgpu_libcuda_la_LIBADD = tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)

tests_simgpu_libnccl_la_SOURCES = tests/simgpu/nccl.c tests/simgpu/nccl_coll.c \
	tests/simgpu/nccl_data.c
tests_simgpu_libnccl_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libnccl_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 2:0:0
tests_simgpu_libnccl_la_LIBADD = tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) $(LIBM) -lrt -ldl

tests_simgpu_libcupti_la_SOURCES = tests/simgpu/cupti.c
tests_simgpu_libcupti_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libcupti_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 13:0:0
tests_simgpu_libcupti_la_LIBADD = tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
EXTRA_tests_simgpu_libcupti_la_DEPENDENCIES = $(srcdir)/tests/simgpu/cupti.map

if HAVE_LD_VERSION_SCRIPT
tests_simgpu_libcudart_la_LDFLAGS += -Wl,--version-script=$(srcdir)/tests/simgpu/cudart.map
tests_simgpu_libcupti_la_LDFLAGS += -Wl,--version-script=$(srcdir)/tests/simgpu/cupti.map
endif

# The launcher and the job.  -no-install: real binaries (no libtool wrapper
# scripts), so LD_PRELOAD and simrun see the program itself.
noinst_PROGRAMS += tests/simgpu/simrun tests/simgpu/ddp-sim tests/simgpu/nccl-perf
tests_simgpu_simrun_SOURCES = tests/simgpu/simrun.c
tests_simgpu_simrun_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/simgpu
tests_simgpu_simrun_LDFLAGS = -no-install

tests_simgpu_ddp_sim_SOURCES = tests/simgpu/ddp_sim.c tests/simgpu/ddp_model.c \
	tests/simgpu/ddp_sim.h tests/simgpu/simrun_rdzv.h
tests_simgpu_ddp_sim_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_ddp_sim_LDFLAGS = -no-install
tests_simgpu_ddp_sim_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	$(PTHREAD_LIBS) $(LIBM) -ldl

# The all-reduce sweep a user runs to measure a network (nccl-tests' all_reduce_perf).
tests_simgpu_nccl_perf_SOURCES = tests/simgpu/nccl_perf.c tests/simgpu/simrun_rdzv.h
tests_simgpu_nccl_perf_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_nccl_perf_LDFLAGS = -no-install
tests_simgpu_nccl_perf_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la $(PTHREAD_LIBS)

# Test programs.
check_PROGRAMS += tests/simgpu/test_streams tests/simgpu/test_cupti tests/simgpu/test_coll \
	tests/simgpu/test_physics tests/simgpu/test_wake tests/simgpu/test_settings
tests_simgpu_test_streams_SOURCES = tests/simgpu/test_streams.c tests/simgpu/simgpu_check.h
tests_simgpu_test_streams_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_streams_LDFLAGS = -no-install
tests_simgpu_test_streams_LDADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS)

tests_simgpu_test_settings_SOURCES = tests/simgpu/test_settings.c tests/simgpu/simgpu_check.h
tests_simgpu_test_settings_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_settings_LDFLAGS = -no-install
tests_simgpu_test_settings_LDADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS) $(LIBM)

tests_simgpu_test_wake_SOURCES = tests/simgpu/test_wake.c tests/simgpu/simgpu_check.h
tests_simgpu_test_wake_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_wake_LDFLAGS = -no-install
tests_simgpu_test_wake_LDADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS) $(LIBM)

tests_simgpu_test_cupti_SOURCES = tests/simgpu/test_cupti.c tests/simgpu/simgpu_check.h
tests_simgpu_test_cupti_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_cupti_LDFLAGS = -no-install
tests_simgpu_test_cupti_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcuda.la \
	tests/simgpu/libcupti.la tests/simgpu/libnccl.la tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)

tests_simgpu_test_physics_SOURCES = tests/simgpu/test_physics.c tests/simgpu/simgpu_check.h
tests_simgpu_test_physics_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_physics_LDFLAGS = -no-install
tests_simgpu_test_physics_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) $(LIBM)

tests_simgpu_test_coll_SOURCES = tests/simgpu/test_coll.c tests/simgpu/simgpu_check.h \
	tests/simgpu/simrun_rdzv.h
tests_simgpu_test_coll_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_coll_LDFLAGS = -no-install
tests_simgpu_test_coll_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)

TESTS += tests/simgpu/test_streams tests/simgpu/test_cupti tests/simgpu/test_physics \
	tests/simgpu/test_wake tests/simgpu/test_settings

# bench_simgpu: the simulated device's host cost per device operation (make bench).
BENCHMARKS += tests/bench/bench_simgpu
noinst_PROGRAMS += tests/bench/bench_simgpu
tests_bench_bench_simgpu_SOURCES = tests/bench/bench_simgpu.c
tests_bench_bench_simgpu_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_bench_bench_simgpu_LDFLAGS = -no-install
tests_bench_bench_simgpu_LDADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS)
# hook_mix: one torch step's CUDA and NCCL calls, repeated (bench_torch_overhead.py
# times it with and without the collector: the hooks' cost on the calling thread).
noinst_PROGRAMS += tests/bench/hook_mix
tests_bench_hook_mix_SOURCES = tests/bench/hook_mix.c
tests_bench_hook_mix_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_bench_hook_mix_LDFLAGS = -no-install
tests_bench_hook_mix_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/simgpu/test_collective.py tests/simgpu/test_ddp.py \
	tests/simgpu/test_dying_rank.py tests/simgpu/test_world.py
TESTS += tests/simgpu/test_collective.py tests/simgpu/test_ddp.py tests/simgpu/test_dying_rank.py \
	tests/simgpu/test_world.py
endif
endif
# the world physics' NCCL across processes: counts, synchronisation, staggered exits;
# simulated nodes (simrun --gpus-per-node) and what the replay learns of them; simrun
# --bind-cpus (a rank on one CPU)
if HAVE_CUDA
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/simgpu/test_world_nccl.py tests/simgpu/test_nodes.py \
	tests/simgpu/test_bind.py
TESTS += tests/simgpu/test_world_nccl.py tests/simgpu/test_nodes.py tests/simgpu/test_bind.py
endif
endif

# nvcc programs on the simulated device (issue 14, torch1): fat-binary registration,
# <<<>>> launches, modules/libraries, attributes and occupancy.  See tests/simgpu/cu/.
if HAVE_CUDA
tests_simgpu_libsimgpu_la_SOURCES += tests/simgpu/core_module.c
tests_simgpu_libcudart_la_SOURCES += tests/simgpu/cudart_module.c tests/simgpu/cudart_symbol.c \
	tests/simgpu/cudart_torch.c
tests_simgpu_libcuda_la_SOURCES += tests/simgpu/cuda_driver_torch.c tests/simgpu/cuda_driver_triton.c
endif

# The CUDA programs, built by the toolkit's nvcc against the stand-ins (-cudart shared
# links libcudart.so.13 dynamically; the RUNPATH finds tests/simgpu/.libs), before
# test_nvcc.py runs them.  Without nvcc the test skips and says so.
EXTRA_DIST += tests/simgpu/cu/check.h tests/simgpu/cu/vecadd.cu tests/simgpu/cu/streams.cu \
	tests/simgpu/cu/module.cu tests/simgpu/cu/kmod.cu tests/simgpu/cu/attrs.cu
if HAVE_CUDA
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/simgpu/test_nvcc.py
TESTS += tests/simgpu/test_nvcc.py
endif
if HAVE_NVCC
SIMGPU_CU = tests/simgpu/cu
SIMGPU_CU_PROGS = $(SIMGPU_CU)/vecadd $(SIMGPU_CU)/streams $(SIMGPU_CU)/module $(SIMGPU_CU)/attrs
SIMGPU_CU_DEPS = tests/simgpu/libcudart.la tests/simgpu/libcuda.la $(srcdir)/$(SIMGPU_CU)/check.h
SIMGPU_NVCC = $(NVCC) -cudart shared -arch=sm_90 -I$(srcdir)/$(SIMGPU_CU) -I$(SIMGPU_CU) \
	-Ltests/simgpu/.libs -Xlinker -rpath=$(abs_builddir)/tests/simgpu/.libs
CLEANFILES += $(SIMGPU_CU_PROGS) $(SIMGPU_CU)/kmod.fatbin $(SIMGPU_CU)/kmod_fatbin.h \
	$(SIMGPU_CU)/kmod.ptx
$(SIMGPU_CU)/vecadd: $(srcdir)/$(SIMGPU_CU)/vecadd.cu $(SIMGPU_CU_DEPS)
	@$(MKDIR_P) $(SIMGPU_CU)
	$(AM_V_GEN)$(SIMGPU_NVCC) -o $@ $(srcdir)/$(SIMGPU_CU)/vecadd.cu
$(SIMGPU_CU)/streams: $(srcdir)/$(SIMGPU_CU)/streams.cu $(SIMGPU_CU_DEPS)
	@$(MKDIR_P) $(SIMGPU_CU)
	$(AM_V_GEN)$(SIMGPU_NVCC) -o $@ $(srcdir)/$(SIMGPU_CU)/streams.cu
$(SIMGPU_CU)/attrs: $(srcdir)/$(SIMGPU_CU)/attrs.cu $(SIMGPU_CU_DEPS)
	@$(MKDIR_P) $(SIMGPU_CU)
	$(AM_V_GEN)$(SIMGPU_NVCC) -o $@ $(srcdir)/$(SIMGPU_CU)/attrs.cu
$(SIMGPU_CU)/kmod.fatbin: $(srcdir)/$(SIMGPU_CU)/kmod.cu
	@$(MKDIR_P) $(SIMGPU_CU)
	$(AM_V_GEN)$(NVCC) -fatbin -arch=sm_90 -o $@ $(srcdir)/$(SIMGPU_CU)/kmod.cu
$(SIMGPU_CU)/kmod.ptx: $(srcdir)/$(SIMGPU_CU)/kmod.cu
	@$(MKDIR_P) $(SIMGPU_CU)
	$(AM_V_GEN)$(NVCC) -ptx -arch=sm_90 -o $@ $(srcdir)/$(SIMGPU_CU)/kmod.cu
$(SIMGPU_CU)/kmod_fatbin.h: $(SIMGPU_CU)/kmod.fatbin
	$(AM_V_GEN)$(BIN2C) -c -n kmod_fatbin $(SIMGPU_CU)/kmod.fatbin > $@.tmp && \
	mv $@.tmp $@
$(SIMGPU_CU)/module: $(srcdir)/$(SIMGPU_CU)/module.cu $(SIMGPU_CU)/kmod_fatbin.h $(SIMGPU_CU_DEPS)
	$(AM_V_GEN)$(SIMGPU_NVCC) -o $@ $(srcdir)/$(SIMGPU_CU)/module.cu -lcuda
tests/simgpu/test_nvcc.log: $(SIMGPU_CU_PROGS) $(SIMGPU_CU)/kmod.ptx
endif
endif

# Device images without nvcc: a fat binary and cubin built by the test itself.
if HAVE_CUDA
check_PROGRAMS += tests/simgpu/test_module
tests_simgpu_test_module_SOURCES = tests/simgpu/test_module.c tests/simgpu/simgpu_check.h
tests_simgpu_test_module_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_module_LDFLAGS = -no-install
tests_simgpu_test_module_LDADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS)
TESTS += tests/simgpu/test_module
endif

# cuBLAS and cuBLASLt stand-ins (torch's GEMMs): libcublas.so.13 and libcublasLt.so.13 with
# the real version nodes; each GEMM is a kernel timed by the device's physics.
EXTRA_DIST += tests/simgpu/cublas.map tests/simgpu/cublaslt.map
if HAVE_CUDA
noinst_LTLIBRARIES += tests/simgpu/libcublasLt.la tests/simgpu/libcublas.la
tests_simgpu_libcublasLt_la_SOURCES = tests/simgpu/cublaslt.c tests/simgpu/simblas.c \
	tests/simgpu/simblas.h
tests_simgpu_libcublasLt_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libcublasLt_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 13:0:0
tests_simgpu_libcublasLt_la_LIBADD = tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la \
	$(PTHREAD_LIBS) $(LIBM)
EXTRA_tests_simgpu_libcublasLt_la_DEPENDENCIES = $(srcdir)/tests/simgpu/cublaslt.map
tests_simgpu_libcublas_la_SOURCES = tests/simgpu/cublas.c tests/simgpu/cublas_unsupported.c \
	tests/simgpu/simblas.c tests/simgpu/simblas.h
tests_simgpu_libcublas_la_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_libcublas_la_LDFLAGS = $(SIMGPU_LIBFLAGS) -version-info 13:0:0
tests_simgpu_libcublas_la_LIBADD = tests/simgpu/libcublasLt.la tests/simgpu/libcudart.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) $(LIBM)
EXTRA_tests_simgpu_libcublas_la_DEPENDENCIES = $(srcdir)/tests/simgpu/cublas.map
if HAVE_LD_VERSION_SCRIPT
tests_simgpu_libcublasLt_la_LDFLAGS += -Wl,--version-script=$(srcdir)/tests/simgpu/cublaslt.map
tests_simgpu_libcublas_la_LDFLAGS += -Wl,--version-script=$(srcdir)/tests/simgpu/cublas.map
endif

check_PROGRAMS += tests/simgpu/test_cublas
tests_simgpu_test_cublas_SOURCES = tests/simgpu/test_cublas.c tests/simgpu/simgpu_check.h
tests_simgpu_test_cublas_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_cublas_LDFLAGS = -no-install
tests_simgpu_test_cublas_LDADD = tests/simgpu/libcublas.la tests/simgpu/libcublasLt.la \
	tests/simgpu/libcudart.la tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_cublas
endif

# libnccl.so.2: the rest of what ProcessGroupNCCL imports (nccl_api.c) and the entry
# points the device does not do (nccl_unsupported.c).
if HAVE_CUDA
tests_simgpu_libnccl_la_SOURCES += tests/simgpu/nccl_api.c tests/simgpu/nccl_unsupported.c
endif

# libcupti.so.13: the rest of Kineto's activity API (cupti_api.c); callback names come from
# the toolkit's cbid headers (runtime names without their _vNNNN suffix).
if HAVE_CUDA
tests_simgpu_libcupti_la_SOURCES += tests/simgpu/cupti_api.c
tests_simgpu_libcupti_la_CPPFLAGS += -Itests/simgpu
BUILT_SOURCES += tests/simgpu/cupti_cbid_names.h
CLEANFILES += tests/simgpu/cupti_cbid_names.h
tests/simgpu/cupti_cbid_names.h: $(CUDA_DIR)/include/cupti_runtime_cbid.h \
		$(CUDA_DIR)/include/cupti_driver_cbid.h
	$(AM_V_GEN)$(MKDIR_P) tests/simgpu && { \
	  echo '/* generated by tests/simgpu/local.mk from the CUPTI cbid headers */'; \
	  echo 'static const struct cbid_name g_runtime_names[] = {'; \
	  sed -n 's/^ *CUPTI_RUNTIME_TRACE_CBID_\(_*cu[A-Za-z0-9_]*\)_v[0-9]* *= *\([0-9][0-9]*\),.*/    {\2, "\1"},/p' \
	    $(CUDA_DIR)/include/cupti_runtime_cbid.h; \
	  echo '};'; \
	  echo 'static const struct cbid_name g_driver_names[] = {'; \
	  sed -n 's/^ *CUPTI_DRIVER_TRACE_CBID_\(cu[A-Za-z0-9_]*\) *= *\([0-9][0-9]*\),.*/    {\2, "\1"},/p' \
	    $(CUDA_DIR)/include/cupti_driver_cbid.h; \
	  echo '};'; } > $@-t && mv $@-t $@
endif

# Tests of the NCCL and CUPTI calls torch makes beyond test_coll's and test_cupti's.
EXTRA_DIST += tests/simgpu/test_nccl_api.sh
if HAVE_CUDA
check_PROGRAMS += tests/simgpu/test_cupti_api tests/simgpu/test_nccl_api
tests_simgpu_test_cupti_api_SOURCES = tests/simgpu/test_cupti_api.c tests/simgpu/simgpu_check.h
tests_simgpu_test_cupti_api_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_cupti_api_LDFLAGS = -no-install
tests_simgpu_test_cupti_api_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcupti.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
tests_simgpu_test_nccl_api_SOURCES = tests/simgpu/test_nccl_api.c tests/simgpu/simgpu_check.h \
	tests/simgpu/simrun_rdzv.h
tests_simgpu_test_nccl_api_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_nccl_api_LDFLAGS = -no-install
tests_simgpu_test_nccl_api_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_cupti_api tests/simgpu/test_nccl_api.sh

# The data the NCCL stand-in moves between ranks (nccl_data.c): exact results of every
# operation on 2 and 4 ranks.
EXTRA_DIST += tests/simgpu/test_nccl_data.sh
check_PROGRAMS += tests/simgpu/test_nccl_data
tests_simgpu_test_nccl_data_SOURCES = tests/simgpu/test_nccl_data.c tests/simgpu/simgpu_check.h \
	tests/simgpu/simrun_rdzv.h
tests_simgpu_test_nccl_data_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_nccl_data_LDFLAGS = -no-install
tests_simgpu_test_nccl_data_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) $(LIBM)
TESTS += tests/simgpu/test_nccl_data.sh

# A synchronize after a large collective returns at its modeled end (its data do not
# move), small messages move theirs, ranks that disagree fail.
EXTRA_DIST += tests/simgpu/test_nccl_sync.sh
check_PROGRAMS += tests/simgpu/test_nccl_sync
tests_simgpu_test_nccl_sync_SOURCES = tests/simgpu/test_nccl_sync.c tests/simgpu/simgpu_check.h \
	tests/simgpu/simrun_rdzv.h
tests_simgpu_test_nccl_sync_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_nccl_sync_LDFLAGS = -no-install
tests_simgpu_test_nccl_sync_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_nccl_sync.sh

# A captured step's closing synchronize returns at the graph's modeled end (workers
# starved), and the ops behind its all-reduce cost the stream workers no wake-up each.
EXTRA_DIST += tests/simgpu/test_graph_tail.sh
check_PROGRAMS += tests/simgpu/test_graph_tail
tests_simgpu_test_graph_tail_SOURCES = tests/simgpu/test_graph_tail.c tests/simgpu/simgpu_check.h \
	tests/simgpu/simrun_rdzv.h
tests_simgpu_test_graph_tail_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_graph_tail_LDFLAGS = -no-install
tests_simgpu_test_graph_tail_LDADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_graph_tail.sh
endif

# The libcudart and libcuda calls torch makes beyond the other tests' (cudart_torch.c,
# cuda_driver_torch.c).
if HAVE_CUDA
check_PROGRAMS += tests/simgpu/test_torch_api
tests_simgpu_test_torch_api_SOURCES = tests/simgpu/test_torch_api.c tests/simgpu/simgpu_check.h
tests_simgpu_test_torch_api_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_torch_api_LDFLAGS = -no-install
tests_simgpu_test_torch_api_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcuda.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_torch_api

# The errors the libcuda memset and stream-write calls answer with: the caller's mistakes,
# and the device's sticky error after a failed collective (cuda_driver_api.h's mapping).
check_PROGRAMS += tests/simgpu/test_drv_errors
tests_simgpu_test_drv_errors_SOURCES = tests/simgpu/test_drv_errors.c tests/simgpu/simgpu_check.h
tests_simgpu_test_drv_errors_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_drv_errors_LDFLAGS = -no-install
tests_simgpu_test_drv_errors_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcuda.la \
	tests/simgpu/libnccl.la tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_drv_errors

# The libcuda calls Triton's launcher (torch.compile) makes beyond the others
# (cuda_driver_triton.c), and the time of kernels named by their class (Triton's, torch's eager
# at::native kernels).
check_PROGRAMS += tests/simgpu/test_triton_api
tests_simgpu_test_triton_api_SOURCES = tests/simgpu/test_triton_api.c tests/simgpu/simgpu_check.h
tests_simgpu_test_triton_api_CPPFLAGS = $(SIMGPU_CPPFLAGS)
tests_simgpu_test_triton_api_LDFLAGS = -no-install
tests_simgpu_test_triton_api_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcuda.la \
	tests/simgpu/libsimgpu.la $(PTHREAD_LIBS)
TESTS += tests/simgpu/test_triton_api
endif
