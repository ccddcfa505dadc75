# schemas/: the trace format (trace.proto, trace.sql) and libdprotrace.
DPROTRACE_SOURCES = schemas/codec.c schemas/codec_decode.c schemas/codec_int.h schemas/codec_pack.c \
	schemas/deflate.c schemas/names.c schemas/writer.c \
	schemas/reader.c schemas/reader_open.c schemas/reader_pack.c schemas/reader_tables.c \
	schemas/classify.c schemas/iter.c schemas/path.c schemas/reader_internal.h \
	schemas/trace_internal.h schemas/dprotrace.h
nodist_DPROTRACE_SOURCES = schemas/trace.pb-c.c schemas/trace.pb-c.h schemas/trace_sql.c
DPROTRACE_LIBS = $(SQLITE_LIBS) $(PROTOBUF_C_LIBS) $(LIBDEFLATE_LIBS) $(ZLIB_LIBS)
DPROTRACE_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBDEFLATE_CFLAGS) \
	$(ZLIB_CFLAGS)

# The installed shared library: exactly the functions of dprotrace.h are exported
# (libdprotrace.map; tests/unit/test_exports.sh).
lib_LTLIBRARIES += schemas/libdprotrace.la
schemas_libdprotrace_la_SOURCES = $(DPROTRACE_SOURCES)
nodist_schemas_libdprotrace_la_SOURCES = $(nodist_DPROTRACE_SOURCES)
schemas_libdprotrace_la_CFLAGS = $(DPROTRACE_CFLAGS)
schemas_libdprotrace_la_LIBADD = $(DPROTRACE_LIBS)
# 4:0:1: format 2.2 grew dpro_event (sized: callers of 3:0:0 keep working), soname stays .3
schemas_libdprotrace_la_LDFLAGS = -version-info 4:0:1 $(AM_LDFLAGS)
if HAVE_LD_VERSION_SCRIPT
schemas_libdprotrace_la_LDFLAGS += -Wl,--version-script=$(srcdir)/schemas/libdprotrace.map
EXTRA_schemas_libdprotrace_la_DEPENDENCIES = schemas/libdprotrace.map
endif
pkginclude_HEADERS += schemas/dprotrace.h
pkgconfig_DATA += schemas/libdprotrace.pc
EXTRA_DIST += schemas/libdprotrace.map schemas/trace.proto schemas/trace.sql

# The same code as a static PIC archive, for the collector (which must not pull a shared
# libdprotrace into the traced process's namespace).
noinst_LTLIBRARIES += schemas/libdprotrace-pic.la
schemas_libdprotrace_pic_la_SOURCES = $(DPROTRACE_SOURCES)
nodist_schemas_libdprotrace_pic_la_SOURCES = $(nodist_DPROTRACE_SOURCES)
schemas_libdprotrace_pic_la_CFLAGS = $(DPROTRACE_CFLAGS) -fPIC -fvisibility=hidden
schemas_libdprotrace_pic_la_LIBADD = $(DPROTRACE_LIBS)

# What dpro's own commands, libraries and test programs link: the static PIC archive, so
# they are self-contained binaries (no libtool wrapper scripts, no uninstalled shared
# library to find at run time: a build tree can be copied to another machine as is).
# tests/unit/test_trace links the shared library, which is what third parties use.
DPROTRACE_LINK = schemas/libdprotrace-pic.la

BUILT_SOURCES += schemas/trace.pb-c.c schemas/trace.pb-c.h schemas/trace_sql.c
CLEANFILES += schemas/trace.pb-c.c schemas/trace.pb-c.h schemas/trace_sql.c

# One protoc-c run makes both files: the header is the product of the .c's rule (a rule
# with two targets would run twice side by side under make -j, the second rewriting the
# header while the first's users compile), remade through it when only the .c is there
# (the Multiple Outputs idiom of the automake manual).
schemas/trace.pb-c.c: schemas/trace.proto
	$(AM_V_GEN)$(MKDIR_P) schemas && \
	$(PROTOC_C) --proto_path=$(srcdir)/schemas --c_out=schemas $(srcdir)/schemas/trace.proto
schemas/trace.pb-c.h: schemas/trace.pb-c.c
	@test -f $@ || { rm -f schemas/trace.pb-c.c && $(MAKE) $(AM_MAKEFLAGS) schemas/trace.pb-c.c; }
# Every object of both libraries waits for the generated files: BUILT_SOURCES orders them
# first only for `make`, `make check` and `make install`, so a named target (`make
# schemas/libdprotrace-pic.la`, `make tools/dpro-info`) compiled codec.c before
# trace.pb-c.h existed, or while it was being written, as make -j ordered the jobs.
$(schemas_libdprotrace_la_OBJECTS) $(schemas_libdprotrace_pic_la_OBJECTS): \
	schemas/trace.pb-c.h schemas/trace.pb-c.c

schemas/trace_sql.c: schemas/trace.sql
	$(AM_V_GEN)$(MKDIR_P) schemas && { \
	echo '/* generated from trace.sql: do not edit */'; \
	echo '#include "trace_internal.h"'; \
	echo 'const char dpro_trace_sql[] ='; \
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$$/\\n"/' $(srcdir)/schemas/trace.sql; \
	echo ';'; } > $@-t && mv $@-t $@

# The shared library exports exactly what dprotrace.h declares.
TESTS += tests/unit/test_exports.sh
dist_check_SCRIPTS += tests/unit/test_exports.sh

# libdprotrace against damaged files, odd paths and file systems (links the shared library).
check_PROGRAMS += tests/unit/test_trace_robust
TESTS += tests/unit/test_trace_robust
tests_unit_test_trace_robust_SOURCES = tests/unit/test_trace_robust.c tests/unit/testutil.h
tests_unit_test_trace_robust_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_trace_robust_LDADD = schemas/libdprotrace.la $(SQLITE_LIBS)
# A trace one file after its writer's close while a reader held it across that close
# (links the static library: the hook it holds the reader's close with is not exported).
check_PROGRAMS += tests/unit/test_trace_fold
TESTS += tests/unit/test_trace_fold
tests_unit_test_trace_fold_SOURCES = tests/unit/test_trace_fold.c tests/unit/testutil.h
tests_unit_test_trace_fold_LDADD = $(DPROTRACE_LINK)
