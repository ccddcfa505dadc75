# tools/: the build rules of every command. Each is a thin layer over a library: it parses
# options, calls the library, prints.
if HAVE_CUDA
# the collector's launcher: it needs no CUDA, but is useless without the collector
bin_PROGRAMS += tools/dpro-run
tools_dpro_run_SOURCES = tools/dpro-run.c
tools_dpro_run_CPPFLAGS = $(AM_CPPFLAGS) -DDPRO_LIBDIR='"$(libdir)"' \
	-DDPRO_PKGLIBDIR='"$(pkglibdir)"'
tools_dpro_run_LDADD = common/libdprocommon.la
endif

if HAVE_YAJL
bin_PROGRAMS += tools/dpro-import
tools_dpro_import_SOURCES = tools/dpro-import.c
tools_dpro_import_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import
tools_dpro_import_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	common/libdprocommon.la $(YAJL_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)
endif

bin_PROGRAMS += tools/dpro-info
tools_dpro_info_SOURCES = tools/dpro-info.c
tools_dpro_info_LDADD = replay/libdproreplay.la

bin_PROGRAMS += tools/dpro-replay tools/dpro-export
dpro_replay_c = tools/dpro-replay.c tools/dpro-replay-json.c
tools_dpro_replay_SOURCES = $(dpro_replay_c) tools/dpro-replay.h
tools_dpro_replay_LDADD = replay/libdproreplay.la
if HAVE_MPI
tools_dpro_replay_LDADD += replay/libdprompi.la
endif
tools_dpro_export_SOURCES = tools/dpro-export.c
tools_dpro_export_LDADD = replay/libdproreplay.la

bin_PROGRAMS += tools/dpro-diff
tools_dpro_diff_SOURCES = tools/dpro-diff.c
tools_dpro_diff_LDADD = replay/libdproreplay.la

bin_PROGRAMS += tools/dpro-optimize
dpro_optimize_c = tools/dpro-optimize.c tools/dpro-optimize-json.c
tools_dpro_optimize_SOURCES = $(dpro_optimize_c) tools/dpro-optimize.h
tools_dpro_optimize_LDADD = optimizer/libdproopt.la
if HAVE_MPI
tools_dpro_optimize_LDADD += optimizer/libdproptmpi.la
endif

# The build without MPI (configure --without-mpi), checked in a build with it: make check
# compiles dpro-replay and dpro-optimize again with a config.h that lacks HAVE_MPI,
# warnings as errors, and links them without the MPI libraries; test_nompi.sh runs them
# (--mpi: exit 2 saying why) and, in a build without MPI, the commands themselves. The
# MPI code outside replay/libdprompi.la and optimizer/libdproptmpi.la is in these two
# commands only (the libraries include no MPI header).
nompi_dir = tests/unit/nompi
nompi_link = $(LIBTOOL) $(AM_V_lt) --tag=CC $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) --mode=link \
	$(CC) -I$(nompi_dir) $(AM_CPPFLAGS) $(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS) -Werror \
	$(AM_LDFLAGS) $(LDFLAGS)
if HAVE_MPI
check_SCRIPTS += $(nompi_dir)/dpro-replay $(nompi_dir)/dpro-optimize
CLEANFILES += $(nompi_dir)/config.h $(nompi_dir)/dpro-replay $(nompi_dir)/dpro-optimize
$(nompi_dir)/config.h: config.h
	$(AM_V_GEN)$(MKDIR_P) $(nompi_dir) && grep -v 'HAVE_MPI' config.h > $@
# Each also follows the command built with MPI, whose tracked dependencies name every
# header the sources include.
$(nompi_dir)/dpro-replay: $(nompi_dir)/config.h $(dpro_replay_c) replay/libdproreplay.la \
	tools/dpro-replay$(EXEEXT)
	$(AM_V_CCLD)$(nompi_link) -o $@ \
	    `for f in $(dpro_replay_c); do echo $(srcdir)/$$f; done` replay/libdproreplay.la $(LIBS)
$(nompi_dir)/dpro-optimize: $(nompi_dir)/config.h $(dpro_optimize_c) optimizer/libdproopt.la \
	tools/dpro-optimize$(EXEEXT)
	$(AM_V_CCLD)$(nompi_link) -o $@ \
	    `for f in $(dpro_optimize_c); do echo $(srcdir)/$$f; done` optimizer/libdproopt.la $(LIBS)
endif
TESTS += tests/unit/test_nompi.sh
dist_check_SCRIPTS += tests/unit/test_nompi.sh

# The rules the commands share (--chrome FILE, --iterations windows, --partial), on
# synthetic traces from tests/replay/gen_traces; every long option --help lists is parsed.
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/unit/test_dpro_info_commands.py tests/unit/test_long_options.py
TESTS += tests/unit/test_dpro_info_commands.py tests/unit/test_long_options.py
endif

# longfuncs.sh: the C files and functions over the house limits (run by hand)
EXTRA_DIST += tools/dev/longfuncs.sh
