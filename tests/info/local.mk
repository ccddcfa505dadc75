# tests/info: dpro-info's analyses (replay/analyses/) against an independent reading of
# the Kineto JSON (hta_reference.py), on synthetic traces with hand-known answers and on
# the real traces of ../shared/traces/kineto. Needs dpro-import kineto (yajl).
dist_check_SCRIPTS += tests/info/hta_reference.py tests/info/test_info_analyses.py
# the analyses on traces written with the trace writer, as the collector writes them
check_PROGRAMS += tests/info/test_info_unit
tests_info_test_info_unit_SOURCES = tests/info/test_info_unit.c
tests_info_test_info_unit_LDADD = replay/libdproreplay.la
TESTS += tests/info/test_info_unit
if HAVE_YAJL
if HAVE_PYTHON3
TESTS += tests/info/test_info_analyses.py
endif
endif
