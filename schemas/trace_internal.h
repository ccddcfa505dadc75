/* trace_internal.h: helpers shared by the files of libdprotrace (not installed). */
#ifndef DPRO_TRACE_INTERNAL_H
#define DPRO_TRACE_INTERNAL_H

#include <stddef.h>

/* The schema (trace.sql), generated into trace_sql.c at build time. */
extern const char dpro_trace_sql[];

/* printf into errbuf (NULL or errlen 0: nothing). */
void dpro_set_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
