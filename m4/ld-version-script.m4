# DPRO_LD_VERSION_SCRIPT: does the linker take --version-script?
# Sets HAVE_LD_VERSION_SCRIPT (automake conditional).
AC_DEFUN([DPRO_LD_VERSION_SCRIPT], [
  AC_CACHE_CHECK([whether the linker accepts --version-script],
    [dpro_cv_ld_version_script], [
    save_LDFLAGS=$LDFLAGS
    cat > conftest.map <<_EOF
VERS_1 { global: main; local: *; };
_EOF
    LDFLAGS="$LDFLAGS -Wl,--version-script=conftest.map"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
      [dpro_cv_ld_version_script=yes], [dpro_cv_ld_version_script=no])
    rm -f conftest.map
    LDFLAGS=$save_LDFLAGS])
  AM_CONDITIONAL([HAVE_LD_VERSION_SCRIPT], [test "x$dpro_cv_ld_version_script" = xyes])
])
