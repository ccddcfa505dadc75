# tools/: the commands. Each is a thin layer over a library; the importer's rules are in
# tools/import/local.mk, dpro-run's in collector/local.mk, dpro-replay/dpro-export's in
# replay/local.mk, dpro-optimize's in optimizer/local.mk.
bin_PROGRAMS += tools/dpro-info
tools_dpro_info_SOURCES = tools/dpro-info.c
tools_dpro_info_LDADD = $(DPROTRACE_LINK) common/libdprocommon.la
