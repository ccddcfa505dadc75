# tests/collector: the collector's tests (end to end on tests/simgpu, the real libcudart,
# one test per awkward case) and its benchmarks. Python drivers read traces back through
# trace-dump (libdprotrace's reader). In a sanitizer build (--enable-sanitizers,
# --enable-tsan) they run too: colltest.py preloads the collector's sanitizer runtime
# ahead of it, so that it loads into programs built without one (sh, python3).
if HAVE_CUDA
COLLTEST_CPPFLAGS = $(AM_CPPFLAGS) @CUDA_CPPFLAGS@

noinst_PROGRAMS += tests/collector/trace-dump
tests_collector_trace_dump_SOURCES = tests/collector/trace-dump.c
tests_collector_trace_dump_LDADD = $(DPROTRACE_LINK)

# A do-nothing libcudart for the awkward cases and the launch benchmark (built with `make`
# so that `make bench` needs no `make check` first).
noinst_LTLIBRARIES += tests/collector/libcollstub.la
tests_collector_libcollstub_la_SOURCES = tests/collector/stub-cudart.c
tests_collector_libcollstub_la_CPPFLAGS = $(COLLTEST_CPPFLAGS)
tests_collector_libcollstub_la_LDFLAGS = -shared -avoid-version -rpath /nowhere $(AM_LDFLAGS)

noinst_PROGRAMS += tests/collector/coll-job
tests_collector_coll_job_SOURCES = tests/collector/coll-job.c
tests_collector_coll_job_CPPFLAGS = $(COLLTEST_CPPFLAGS)
tests_collector_coll_job_LDADD = tests/collector/libcollstub.la $(PTHREAD_LIBS) -ldl
tests_collector_coll_job_LDFLAGS = -no-install -rdynamic $(AM_LDFLAGS)

# The real libcudart of the toolkit (no GPU here: every call fails, codes pass through).
check_PROGRAMS += tests/collector/real-cudart
tests_collector_real_cudart_SOURCES = tests/collector/real-cudart.c
tests_collector_real_cudart_CPPFLAGS = $(COLLTEST_CPPFLAGS)
tests_collector_real_cudart_LDADD = -L$(CUDA_DIR)/lib64 -lcudart
tests_collector_real_cudart_LDFLAGS = -no-install -rdynamic -Wl,-rpath,$(CUDA_DIR)/lib64 $(AM_LDFLAGS)

# Driver launches, hooked and not (simgpu's libcuda).
check_PROGRAMS += tests/collector/drv-job
tests_collector_drv_job_SOURCES = tests/collector/drv-job.c
tests_collector_drv_job_CPPFLAGS = $(COLLTEST_CPPFLAGS)
tests_collector_drv_job_LDADD = tests/simgpu/libcuda.la -ldl
tests_collector_drv_job_LDFLAGS = -no-install $(AM_LDFLAGS)

# A CUPTI activity client that starts after the collector, as torch.profiler's Kineto does
# (simgpu's libcuda and libcupti): the collector shares CUPTI with it.
check_PROGRAMS += tests/collector/share-job
tests_collector_share_job_SOURCES = tests/collector/share-job.c
tests_collector_share_job_CPPFLAGS = $(COLLTEST_CPPFLAGS)
tests_collector_share_job_LDADD = tests/simgpu/libcuda.la tests/simgpu/libcupti.la
tests_collector_share_job_LDFLAGS = -no-install $(AM_LDFLAGS)

# A Python extension module's stand-in (test-python-dlopen.py opens it RTLD_LOCAL, as Python
# opens torch/_C.so): a module linked against simgpu's libcudart and libnccl.
check_LTLIBRARIES += tests/collector/fake-torch-ext.la
tests_collector_fake_torch_ext_la_SOURCES = tests/collector/fake-torch-ext.c
tests_collector_fake_torch_ext_la_CPPFLAGS = $(COLLTEST_CPPFLAGS) -I$(top_srcdir)/tests/simgpu
tests_collector_fake_torch_ext_la_LDFLAGS = -module -avoid-version -rpath /nowhere \
	-no-undefined $(AM_LDFLAGS)
tests_collector_fake_torch_ext_la_LIBADD = tests/simgpu/libcudart.la tests/simgpu/libnccl.la \
	tests/simgpu/libsimgpu.la -ldl

# The same module linked against a private, renamed copy of the runtime, as wheels bundle
# theirs (auditwheel: libcudart-<hash>.so.N, whose soname is that name too): simgpu's
# libcudart built once more under that name.
check_LTLIBRARIES += tests/collector/libcudart-5f1c2a9e.la tests/collector/fake-torch-ext-bundled.la
tests_collector_libcudart_5f1c2a9e_la_SOURCES = tests/simgpu/cudart.c tests/simgpu/cudart_launch.c \
	tests/simgpu/cudart_module.c tests/simgpu/cudart_symbol.c \
	tests/simgpu/cudart_torch.c
tests_collector_libcudart_5f1c2a9e_la_CPPFLAGS = $(COLLTEST_CPPFLAGS) -I$(top_srcdir)/tests/simgpu
tests_collector_libcudart_5f1c2a9e_la_LDFLAGS = -rpath /nowhere -no-undefined -version-info 13:0:0 \
	$(AM_LDFLAGS)
tests_collector_libcudart_5f1c2a9e_la_LIBADD = tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) -ldl
EXTRA_tests_collector_libcudart_5f1c2a9e_la_DEPENDENCIES = $(srcdir)/tests/simgpu/cudart.map
if HAVE_LD_VERSION_SCRIPT
tests_collector_libcudart_5f1c2a9e_la_LDFLAGS += \
	-Wl,--version-script=$(srcdir)/tests/simgpu/cudart.map
endif
tests_collector_fake_torch_ext_bundled_la_SOURCES = tests/collector/fake-torch-ext.c
tests_collector_fake_torch_ext_bundled_la_CPPFLAGS = $(tests_collector_fake_torch_ext_la_CPPFLAGS)
tests_collector_fake_torch_ext_bundled_la_LDFLAGS = $(tests_collector_fake_torch_ext_la_LDFLAGS)
tests_collector_fake_torch_ext_bundled_la_LIBADD = tests/collector/libcudart-5f1c2a9e.la \
	tests/simgpu/libnccl.la tests/simgpu/libsimgpu.la -ldl

# The hardening cases (test-hardening.py): one job with a mode per case, on simgpu, and a
# library whose constructor sleeps holding the loader's lock.
check_PROGRAMS += tests/collector/harden-job
tests_collector_harden_job_SOURCES = tests/collector/harden-job.c
tests_collector_harden_job_CPPFLAGS = $(COLLTEST_CPPFLAGS) -I$(top_srcdir)/tests/simgpu
tests_collector_harden_job_LDADD = tests/simgpu/libcudart.la tests/simgpu/libcuda.la \
	tests/simgpu/libnccl.la tests/simgpu/libsimgpu.la $(PTHREAD_LIBS) -ldl
tests_collector_harden_job_LDFLAGS = -no-install $(AM_LDFLAGS)
check_LTLIBRARIES += tests/collector/libslowctor.la
check_LTLIBRARIES += tests/collector/libsqlfail.la
tests_collector_libsqlfail_la_SOURCES = tests/collector/sqlfail.c
tests_collector_libsqlfail_la_CPPFLAGS = $(AM_CPPFLAGS) $(SQLITE_CFLAGS)
tests_collector_libsqlfail_la_LIBADD = $(SQLITE_LIBS) -ldl
tests_collector_libsqlfail_la_LDFLAGS = -shared -avoid-version -rpath /nowhere $(AM_LDFLAGS)
tests_collector_libslowctor_la_SOURCES = tests/collector/slowctor.c
tests_collector_libslowctor_la_LDFLAGS = -shared -avoid-version -rpath /nowhere $(AM_LDFLAGS)

# The writer thread's growing map (collector/umap.c, linked alone): every key found as it
# grows past 512 and 4,096 entries, with removals.
check_PROGRAMS += tests/collector/test_umap
TESTS += tests/collector/test_umap
tests_collector_test_umap_SOURCES = tests/collector/test_umap.c collector/umap.c \
	tests/unit/testutil.h
tests_collector_test_umap_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/collector

COLLECTOR_TESTS = tests/collector/test-real-cudart.py tests/collector/test-awkward.py \
	tests/collector/test-dpro-run.py tests/collector/test-e2e-simgpu.py \
	tests/collector/test-python-dlopen.py tests/collector/test-hardening.py \
	tests/collector/test-fork-storm.py tests/collector/test-symlink-output.py \
	tests/collector/test-job-id.py tests/collector/test-cupti-share.py \
	tests/collector/test-stream-churn.py tests/collector/test-thread-sched.py
if HAVE_PYTHON3
TESTS += $(COLLECTOR_TESTS)
endif
EXTRA_DIST += $(COLLECTOR_TESTS) tests/collector/colltest.py

BENCHMARKS += tests/collector/coll-bench
noinst_PROGRAMS += tests/collector/coll-bench
tests_collector_coll_bench_SOURCES = tests/collector/coll-bench.c
tests_collector_coll_bench_CPPFLAGS = $(COLLTEST_CPPFLAGS) -DCOLL_BENCH_BUILDDIR='"$(abs_top_builddir)"'
tests_collector_coll_bench_LDADD = -ldl
endif
