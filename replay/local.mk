# replay/: trace -> global dataflow graph -> simulation; clock alignment, iteration
# detection, the collective cost model, Chrome trace export. A convenience library
# linked by dpro-replay, dpro-export, dpro-info (kernels.c, analyses/), the optimizer and
# the tests.
noinst_LTLIBRARIES += replay/libdproreplay.la
replay_libdproreplay_la_SOURCES = \
	replay/dfg.c replay/dfg.h replay/dfg_int.h replay/dfg_edit.c replay/dfg_fold.c replay/dfg_sparse.c \
	replay/sim.c replay/sim.h replay/sim_int.h replay/sim_analysis.c \
	replay/align.c replay/align.h \
	replay/iter.c replay/iter.h replay/period.c replay/period.h \
	replay/costmodel.c replay/costmodel.h replay/ncclname.c replay/ncclname.h \
	replay/contention.c replay/contention.h \
	replay/hmap.c replay/hmap.h \
	replay/job.c replay/job.h replay/job_int.h replay/job_read.c replay/job_share.c replay/job_share_fold.c replay/job_wire.c replay/job_wire.h replay/job_share_order.c replay/job_fold.c replay/job_iters.c \
	replay/job_fold.h \
	replay/build.c replay/build.h replay/build_int.h replay/build_p2p.c \
	replay/build_queue.c replay/build_timing.c replay/build_wakeup.c replay/build_repair.c \
	replay/launch_queue.c replay/launch_queue.h \
	replay/replay.c replay/replay.h replay/critpath.c replay/fidelity.c replay/fidelity_int.h \
	replay/drawn.c replay/fold.c \
	replay/whatif.c replay/hostshare.c replay/hostshare_cpus.c replay/hostshare.h replay/threadsched.c replay/threadsched.h \
	replay/chrome.c replay/chrome.h \
	replay/kernels.c replay/kernels.h replay/diff.c replay/diff.h \
	replay/analyses/analyses.h replay/analyses/ana_int.h replay/analyses/collect.c \
	replay/analyses/launch.c replay/analyses/idle.c replay/analyses/memcpy.c \
	replay/analyses/ops.c replay/analyses/queue.c replay/analyses/sequences.c \
	replay/inputs.c replay/inputs.h
replay_libdproreplay_la_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS) -O2
replay_libdproreplay_la_LIBADD = $(DPROTRACE_LINK) common/libdprocommon.la $(ZLIB_LIBS) $(LIBM) \
	$(PTHREAD_LIBS) $(DEMANGLE_LIBS)

# The simulation as an MPI job (dpro-replay --mpi; mpi_sim.h), only with MPI (configure
# --with-mpi).
if HAVE_MPI
noinst_LTLIBRARIES += replay/libdprompi.la
replay_libdprompi_la_SOURCES = replay/mpi_sim.c replay/mpi_graph.c replay/mpi_share.c \
	replay/mpi_sim.h replay/mpi_open.c replay/mpi_open.h
replay_libdprompi_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS) -O2
replay_libdprompi_la_LIBADD = replay/libdproreplay.la $(MPI_LIBS)
endif
