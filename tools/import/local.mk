# tools/import/local.mk: dpro-import (Kineto / PyTorch profiler traces -> dpro traces).
# The importer is a library (tools/import/) so the fuzz target, the benchmark and the
# unit test call it directly; tools/dpro-import.c is the command. Needs yajl; the importer
# writes on a thread of its own (pthreads).
if HAVE_YAJL
noinst_LTLIBRARIES += tools/libdproimport.la
tools_libdproimport_la_SOURCES = tools/import/kineto.c tools/import/import_kineto.h
tools_libdproimport_la_CFLAGS = $(AM_CFLAGS) $(YAJL_CFLAGS) $(ZLIB_CFLAGS)
tools_libdproimport_la_LIBADD = $(DPROTRACE_LINK) $(YAJL_LIBS) $(ZLIB_LIBS) \
	$(PTHREAD_LIBS)

bin_PROGRAMS += tools/dpro-import
tools_dpro_import_SOURCES = tools/dpro-import.c
tools_dpro_import_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/import
tools_dpro_import_LDADD = tools/libdproimport.la $(DPROTRACE_LINK) \
	common/libdprocommon.la $(YAJL_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)
endif
