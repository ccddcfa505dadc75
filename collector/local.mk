# collector/: libdpro-collector.so, the LD_PRELOAD library (its launcher, dpro-run, is in tools/local.mk).
# Built only with the CUDA headers (HAVE_CUDA). The collector links libdprotrace statically
# (the PIC convenience archive) so the traced process gets no shared libdprotrace; it exports
# only the interposed functions (visibility hidden + collector/collector.map).
if HAVE_CUDA
lib_LTLIBRARIES += collector/libdpro-collector.la
collector_libdpro_collector_la_SOURCES = collector/collector.h collector/internal.h collector/core.c \
	collector/real.c collector/maps.c collector/ring.c collector/clock.c collector/output.c \
	collector/convert.c collector/umap.c collector/writer.c collector/lifecycle.c \
	collector/hook_cudart.c collector/hook_driver.c collector/hook_nccl.c \
	collector/cupti.c collector/cupti_share.h collector/cupti_share.c collector/nvtx.c \
	collector/stacks.c collector/cpuuse.c collector/threadsched.c
collector_libdpro_collector_la_CPPFLAGS = $(AM_CPPFLAGS) @CUDA_CPPFLAGS@ $(LIBUNWIND_CFLAGS)
collector_libdpro_collector_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
collector_libdpro_collector_la_LIBADD = schemas/libdprotrace-pic.la $(LIBUNWIND_LIBS) \
	$(PTHREAD_LIBS) -ldl
collector_libdpro_collector_la_LDFLAGS = -module -avoid-version -shared $(AM_LDFLAGS)
if HAVE_LD_VERSION_SCRIPT
collector_libdpro_collector_la_LDFLAGS += \
	-Wl,--version-script=$(srcdir)/collector/collector.map
endif
EXTRA_DIST += collector/collector.map collector/README.md
endif
