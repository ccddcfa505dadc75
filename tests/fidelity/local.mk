# tests/fidelity: dpro's predictions against the simulated device's hidden physics (world
# physics). `make fidelity`: the full suite (>= 40 (world, what-if) pairs drawn from
# DPRO_FIDELITY_SEED; the table in fidelity/ of the build directory). make check runs a
# small sample of it (test_fidelity_sample.py). Without the simulated device (no CUDA
# headers) the suite says so and the target succeeds.
EXTRA_DIST += tests/fidelity/fidelity.py tests/fidelity/decompose_more_ranks.py \
	tests/fidelity/host_stalls.py
fidelity: all
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON3) $(srcdir)/tests/fidelity/fidelity.py || \
	test $$? -eq 77
.PHONY: fidelity
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/fidelity/test_fidelity_sample.py
TESTS += tests/fidelity/test_fidelity_sample.py
endif
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/fidelity/test_fidelity_lag.py
TESTS += tests/fidelity/test_fidelity_lag.py
endif
if HAVE_PYTHON3
dist_check_SCRIPTS += tests/fidelity/test_host_stalls.py
TESTS += tests/fidelity/test_host_stalls.py
endif
