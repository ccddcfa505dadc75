# tests/: unit tests of the format library, the trace benchmark, the demo's trace writer.
check_PROGRAMS += tests/unit/test_trace tests/unit/test_json tests/unit/test_classify
TESTS += tests/unit/test_trace tests/unit/test_json tests/unit/test_classify \
	tests/unit/test_dpro_info.sh
tests_unit_test_trace_SOURCES = tests/unit/test_trace.c tests/unit/testutil.h \
	tests/unit/trace_testlib.h
tests_unit_test_trace_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_trace_LDADD = schemas/libdprotrace.la $(SQLITE_LIBS) $(ZLIB_LIBS)
# the codec's batches, and its launch configurations coded by kernel name
check_PROGRAMS += tests/unit/test_trace_codec tests/unit/test_trace_launch
TESTS += tests/unit/test_trace_codec tests/unit/test_trace_launch
tests_unit_test_trace_codec_SOURCES = tests/unit/test_trace_codec.c tests/unit/testutil.h \
	tests/unit/trace_testlib.h
tests_unit_test_trace_codec_LDADD = schemas/libdprotrace.la $(ZLIB_LIBS)
tests_unit_test_trace_launch_SOURCES = tests/unit/test_trace_launch.c tests/unit/testutil.h \
	tests/unit/trace_testlib.h
tests_unit_test_trace_launch_LDADD = schemas/libdprotrace.la $(ZLIB_LIBS)
# the codec's own packer writes protobuf-c's bytes (it links the static archive: the packer
# is not exported)
check_PROGRAMS += tests/unit/test_trace_pack
TESTS += tests/unit/test_trace_pack
tests_unit_test_trace_pack_SOURCES = tests/unit/test_trace_pack.c tests/unit/testutil.h \
	tests/unit/trace_testlib.h
tests_unit_test_trace_pack_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_unit_test_trace_pack_LDADD = schemas/libdprotrace-pic.la $(PROTOBUF_C_LIBS) $(ZLIB_LIBS)
tests_unit_test_classify_SOURCES = tests/unit/test_classify.c tests/unit/testutil.h
tests_unit_test_classify_LDADD = schemas/libdprotrace.la
tests_unit_test_json_SOURCES = tests/unit/test_json.c tests/unit/testutil.h
tests_unit_test_json_LDADD = common/libdprocommon.la $(LIBM)
EXTRA_DIST += tests/unit/test_dpro_info.sh
# common/cpuset.h: a host's CPUs past 1,024 (a stand-in sched_getaffinity) and their
# cpulist text
check_PROGRAMS += tests/unit/test_cpuset
TESTS += tests/unit/test_cpuset
tests_unit_test_cpuset_SOURCES = tests/unit/test_cpuset.c tests/unit/testutil.h
tests_unit_test_cpuset_LDADD = -ldl
# one meaning in one place: no second copy of the FNV-1a constants or the NCCL size table
TESTS += tests/unit/test_one_meaning.sh
dist_check_SCRIPTS += tests/unit/test_one_meaning.sh
# the harness must be able to fail: REQUIRE stops a test (require_driver fails on purpose,
# run only by test_require.sh)
check_PROGRAMS += tests/unit/require_driver
tests_unit_require_driver_SOURCES = tests/unit/require_driver.c tests/unit/testutil.h
TESTS += tests/unit/test_require.sh
dist_check_SCRIPTS += tests/unit/test_require.sh
# test_trace under valgrind (no leak in the test or its forked writer)
TESTS += tests/unit/test_trace_leaks.sh
dist_check_SCRIPTS += tests/unit/test_trace_leaks.sh
# .ci/run's ThreadSanitizer stage reads it (TSAN_OPTIONS=suppressions=...)
EXTRA_DIST += tests/tsan.supp
if HAVE_PYTHON3
# dpro-info --kernels against an independent reading of the imported Kineto JSON
dist_check_SCRIPTS += tests/unit/test_dpro_info_kernels.py
TESTS += tests/unit/test_dpro_info_kernels.py
# every README/docs link to a .md file and its #anchor resolves (GitHub's anchor rule)
dist_check_SCRIPTS += tests/unit/test_doc_links.py
TESTS += tests/unit/test_doc_links.py
endif

# bench_trace: write/read throughput and bytes per event; also writes the demo trace.
BENCHMARKS += tests/bench/bench_trace
noinst_PROGRAMS += tests/bench/bench_trace
tests_bench_bench_trace_SOURCES = tests/bench/bench_trace.c
tests_bench_bench_trace_LDADD = $(DPROTRACE_LINK)

# Bounded fuzzing of the batch decoder, the NCCL kernel-name parser and the trace reader:
# FUZZ_SECONDS (default 60). Exit 77 without clang.
EXTRA_DIST += tests/fuzz/fuzz_batch_decode.c tests/fuzz/fuzz_ncclname.c \
	tests/fuzz/fuzz_cpulist.c tests/fuzz/fuzz_trace_reader.c tests/fuzz/run-batch-fuzz.sh
fuzz-batch: schemas/libdprotrace.la tests/replay/gen_traces
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	$(SHELL) $(srcdir)/tests/fuzz/run-batch-fuzz.sh $(FUZZ_SECONDS)
.PHONY: fuzz-batch
include $(srcdir)/tests/fidelity/local.mk
include $(srcdir)/tests/torch/local.mk
