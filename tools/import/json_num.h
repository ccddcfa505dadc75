/*
 * json_num.h: JSON number texts, as yajl hands them over (yajl_number: not converted),
 * parsed without floating point.
 */
#ifndef DPRO_IMPORT_JSON_NUM_H
#define DPRO_IMPORT_JSON_NUM_H

#include <stddef.h>
#include <stdint.h>

/* Parses a JSON integer text s[0..len). Returns 0 and stores *out, or -1 (not an
 * integer, out of int64 range). */
int imp_parse_i64(const char *s, size_t len, int64_t *out);

/* Parses an integer written as a JSON string, as some profilers write numbers ("7",
 * "-3", "0x1f": decimal, or hexadecimal after 0x / 0X, at most 16 hex digits). Returns 0
 * and stores *out, or -1 (empty, another text, out of int64 range). */
int imp_parse_int_text(const char *s, size_t len, int64_t *out);

/* Parses a JSON number text of microseconds ("1234", "1234.5678", "1.5e3") into whole
 * nanoseconds, rounding half up past the nanosecond. Returns 0 and stores *ns, or -1 for a
 * negative, malformed or out of range (> UINT64_MAX ns) value. */
int imp_parse_us(const char *s, size_t len, uint64_t *ns);

#endif /* DPRO_IMPORT_JSON_NUM_H */
