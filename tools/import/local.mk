# tools/import/local.mk: the importers' library (Kineto / PyTorch profiler traces -> dpro
# traces), called by the fuzz target, the benchmark and the unit test directly; the command
# tools/dpro-import.c has its rule in tools/local.mk. Needs yajl; the importer
# writes on a thread of its own (pthreads).
if HAVE_YAJL
noinst_LTLIBRARIES += tools/libdproimport.la
# Generic pieces (no Kineto in them: for any importer), then the Kineto importer.
tools_libdproimport_la_SOURCES = \
	tools/import/json_squeeze.c tools/import/json_squeeze.h \
	tools/import/json_num.c tools/import/json_num.h \
	tools/import/join.c tools/import/join.h \
	tools/import/handoff.c tools/import/handoff.h \
	tools/import/coll_names.c tools/import/coll_names.h \
	tools/import/import_kineto.h tools/import/kineto_int.h \
	tools/import/kineto.c tools/import/kineto_parse.c tools/import/kineto_keys.c \
	tools/import/kineto_keys.h tools/import/kineto_map.c tools/import/kineto_coll.c \
	tools/import/kineto_args.c
# The PyTorch execution trace reader (import_et.h), joined to a Kineto import.
tools_libdproimport_la_SOURCES += tools/import/import_et.h tools/import/et.c
# The Nsight Systems importer (import_nsys.h): reads the export with SQLite.
tools_libdproimport_la_SOURCES += tools/import/import_nsys.h tools/import/nsys_int.h \
	tools/import/nsys.c tools/import/nsys_map.c
tools_libdproimport_la_CFLAGS = $(AM_CFLAGS) $(YAJL_CFLAGS) $(ZLIB_CFLAGS) $(SQLITE_CFLAGS)
tools_libdproimport_la_LIBADD = $(DPROTRACE_LINK) $(YAJL_LIBS) $(ZLIB_LIBS) \
	$(PTHREAD_LIBS) $(SQLITE_LIBS)

endif
