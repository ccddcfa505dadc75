# tests/import: dpro-import (Kineto traces). Unit test of the importer library, the real
# shared traces (skipped when ../shared is absent), malformed inputs, the benchmark, and
# the fuzz target's bounded run (`make fuzz-import`, not part of `make check`).
if HAVE_YAJL
check_PROGRAMS += tests/import/test_import_kineto
tests_import_test_import_kineto_SOURCES = tests/import/test_import_kineto.c \
	tests/import/kineto_sample.h
tests_import_test_import_kineto_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import
tests_import_test_import_kineto_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	$(PTHREAD_LIBS)
# test_import_pipeline: the writer hand-off (writer thread against inline, a writer error
# on its thread, an importer freed early) and the whitespace pre-pass.
check_PROGRAMS += tests/import/test_import_pipeline
tests_import_test_import_pipeline_SOURCES = tests/import/test_import_pipeline.c \
	tests/import/kineto_sample.h
tests_import_test_import_pipeline_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import
tests_import_test_import_pipeline_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	$(PTHREAD_LIBS)
TESTS += tests/import/test_import_pipeline
# test_import_limits: long strings cost linear work and are refused while read; values
# that would overflow downstream arithmetic are refused or clamped.
check_PROGRAMS += tests/import/test_import_limits
tests_import_test_import_limits_SOURCES = tests/import/test_import_limits.c
tests_import_test_import_limits_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import
tests_import_test_import_limits_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	$(PTHREAD_LIBS)
TESTS += tests/import/test_import_limits
# test_import_generations: a trace in the spelling of each Kineto generation (gen_kineto.py:
# PyTorch 1.8 to today, CUDA and ROCm) against an independent reading of its JSON; one
# ProfilerStep is one iteration, ranks matched by step number, grouped transfers one
# collective matched across ranks. test_import_steps: the same on steps cut out of the
# shared real traces.
TESTS += tests/import/test_import_kineto tests/import/test_import_real.sh \
	tests/import/test_import_malformed.sh tests/import/test_import_export.sh \
	tests/import/test_import_jobid.sh tests/import/test_import_generations.sh \
	tests/import/test_import_steps.sh tests/import/test_import_symlink.sh
dist_check_SCRIPTS += tests/import/test_import_real.sh tests/import/test_import_malformed.sh \
	tests/import/test_import_export.sh tests/import/test_import_jobid.sh tests/import/count_kineto.py tests/import/run-fuzz.sh \
	tests/import/test_import_generations.sh tests/import/gen_kineto.py \
	tests/import/test_import_steps.sh tests/import/test_import_symlink.sh
# test_import_jobs: --jobs N imports files in parallel and writes what --jobs 1 writes
# (names, traces byte for byte, messages in input order), real and synthetic traces.
TESTS += tests/import/test_import_jobs.sh
dist_check_SCRIPTS += tests/import/test_import_jobs.sh
# test_import_sync: an imported trace is synced to disk once, at its close, not at every
# flush (the synccount shim, LD_PRELOAD, counts fsync and fdatasync).
check_LTLIBRARIES += tests/import/libsynccount.la
tests_import_libsynccount_la_SOURCES = tests/import/synccount.c
tests_import_libsynccount_la_LIBADD = -ldl
tests_import_libsynccount_la_LDFLAGS = -shared -avoid-version -rpath /nowhere $(AM_LDFLAGS)
TESTS += tests/import/test_import_sync.sh
dist_check_SCRIPTS += tests/import/test_import_sync.sh
# test_import_kill: an import killed at any moment leaves no file that reads as a whole
# trace unless it is one; one sync a trace (copy_ranks.py makes the ranks of one file).
TESTS += tests/import/test_import_kill.sh
dist_check_SCRIPTS += tests/import/test_import_kill.sh tests/import/copy_ranks.py
# test_import_roundtrip: import, then dpro-export --kineto, keeps every event's arguments,
# the flows and the memory events (roundtrip_kineto.py compares the two JSON files).
TESTS += tests/import/test_import_roundtrip.sh
dist_check_SCRIPTS += tests/import/test_import_roundtrip.sh tests/import/roundtrip_kineto.py
# test_import_nsys: Nsight Systems SQLite exports (gen_nsys.py: the documented schema, two
# ranks, one export per rank and both in one) against an independent reading of the SQLite;
# bad input (not SQLite, no nsys tables, truncated) refused with the file named.
TESTS += tests/import/test_import_nsys.sh
dist_check_SCRIPTS += tests/import/test_import_nsys.sh tests/import/gen_nsys.py
# test_import_et: dpro-import et, a PyTorch execution trace joined to the Kineto trace of
# the same steps (fixtures/et-mlp.*, made by et/make_et_fixture.py with real torch on the
# simulated device), against an independent reading of the two files (et/check_et.py);
# bad input refused with the place named.
TESTS += tests/import/test_import_et.sh
dist_check_SCRIPTS += tests/import/test_import_et.sh tests/import/et/check_et.py \
	tests/import/et/make_et_fixture.py
# compare_hta.py: dpro against Holistic Trace Analysis, time and memory (docs/figures.md;
# not run by make check: it needs HTA in a virtual environment of its own).
EXTRA_DIST += tests/import/compare_hta.py
EXTRA_DIST += tests/import/fixtures/et-mlp.et.json.gz tests/import/fixtures/et-mlp.kineto.json.gz
# test_import_oldformat: a trace of format 2.1 (fixtures/) reads as the build that wrote it
# read it.
TESTS += tests/import/test_import_oldformat.sh
dist_check_SCRIPTS += tests/import/test_import_oldformat.sh
EXTRA_DIST += tests/import/fixtures/README.md tests/import/fixtures/v2.1-gen2x.dpro \
	tests/import/fixtures/v2.1-gen2x.info.json tests/import/fixtures/v2.1-gen2x.chrome.json
EXTRA_DIST += tests/fuzz/fuzz_import_kineto.c tests/import/fuzz/kineto.dict \
	tests/import/fuzz/seed-full.json tests/import/fuzz/seed-array.json \
	tests/import/fuzz/seed-min.json tests/fuzz/fuzz_import_et.c tests/import/fuzz/et-seed.json

# bench_import_kineto: MB/s of JSON per core on the biggest shared trace, and bytes of
# the dpro traces against the gzip'd JSON.
BENCHMARKS += tests/import/bench_import_kineto
noinst_PROGRAMS += tests/import/bench_import_kineto
tests_import_bench_import_kineto_SOURCES = tests/import/bench_import_kineto.c
tests_import_bench_import_kineto_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import \
	-DDPRO_SRCDIR='"$(abs_top_srcdir)"'
tests_import_bench_import_kineto_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	$(ZLIB_LIBS) $(PTHREAD_LIBS)

# Bounded fuzzing of the importer: FUZZ_SECONDS (default 60). Exit 77 without clang.
fuzz-import: schemas/libdprotrace.la
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	$(SHELL) $(srcdir)/tests/import/run-fuzz.sh $(FUZZ_SECONDS)
endif
