# optimizer/: what-if strategies on the replayed dataflow graph and the search over them
# (libdproopt, a convenience library, linked by dpro-optimize and the tests).
noinst_LTLIBRARIES += optimizer/libdproopt.la
optimizer_libdproopt_la_SOURCES = \
	optimizer/memest.c optimizer/memest.h \
	optimizer/workload.c optimizer/workload.h optimizer/workload_int.h \
	optimizer/workload_fit.c optimizer/workload_fusion.c optimizer/workload_buckets.c \
	optimizer/workload_layers.c optimizer/workload_capture.c optimizer/workload_fsdp.c \
	optimizer/workload_floor.c \
	optimizer/strategy.c optimizer/strategy_text.c optimizer/strategy.h \
	optimizer/framework.h optimizer/framework_ddp_sim.c optimizer/framework_torch.c \
	optimizer/framework_detect.c \
	optimizer/partition.c optimizer/partition.h \
	optimizer/search.c optimizer/search.h \
	optimizer/profile.c optimizer/profile.h
optimizer_libdproopt_la_CFLAGS = $(AM_CFLAGS) -O2
optimizer_libdproopt_la_LIBADD = replay/libdproreplay.la $(DPROTRACE_LINK) \
	common/libdprocommon.la $(LIBM)
# The search shared over an MPI job (dpro-optimize --mpi; search_mpi.h), only with MPI.
if HAVE_MPI
noinst_LTLIBRARIES += optimizer/libdproptmpi.la
optimizer_libdproptmpi_la_SOURCES = optimizer/search_mpi.c optimizer/search_mpi.h
optimizer_libdproptmpi_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS) -O2
optimizer_libdproptmpi_la_LIBADD = optimizer/libdproopt.la replay/libdprompi.la $(MPI_LIBS)
endif
