# common/: code several parts share that is not the format (log macros, JSON writer).
noinst_HEADERS += common/fnv1a.h common/varint.h common/order.h common/bytes.h common/cpuset.h
# A convenience library, linked into the commands and the replay/optimizer libraries;
# the collector links only dpro_log if anything.
noinst_LTLIBRARIES += common/libdprocommon.la
common_libdprocommon_la_SOURCES = common/log.c common/dpro_log.h \
	common/json_writer.c common/json_writer.h common/fs.c common/fs.h \
	common/pool.c common/pool.h
common_libdprocommon_la_CFLAGS = $(AM_CFLAGS) -fPIC
