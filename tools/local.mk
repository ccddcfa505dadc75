# tools/: the commands. Each is a thin layer over a library: it parses options, calls the
# library, prints. The importer's rules are in tools/import/local.mk and dpro-run's in
# collector/local.mk until their owners move them here.
bin_PROGRAMS += tools/dpro-info
tools_dpro_info_SOURCES = tools/dpro-info.c
tools_dpro_info_LDADD = replay/libdproreplay.la

bin_PROGRAMS += tools/dpro-replay tools/dpro-export
tools_dpro_replay_SOURCES = tools/dpro-replay.c
tools_dpro_replay_LDADD = replay/libdproreplay.la
tools_dpro_export_SOURCES = tools/dpro-export.c
tools_dpro_export_LDADD = replay/libdproreplay.la

bin_PROGRAMS += tools/dpro-optimize
tools_dpro_optimize_SOURCES = tools/dpro-optimize.c
tools_dpro_optimize_LDADD = optimizer/libdproopt.la

# The rules the commands share (--chrome FILE, --iterations windows, --partial), on
# synthetic traces from tests/replay/gen_traces.
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/unit/test_dpro_info_commands.py
TESTS += tests/unit/test_dpro_info_commands.py
endif
