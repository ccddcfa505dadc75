/*
 * json_writer.h: a streaming JSON writer onto a FILE (dpro-info --json, dpro-replay
 * --json, Chrome trace export). It tracks nesting and commas itself and escapes strings
 * (quotes, backslashes, control characters, invalid UTF-8 replaced by U+FFFD), so C++
 * template names with quotes and angle brackets come out as valid JSON.
 */
#ifndef DPRO_JSON_WRITER_H
#define DPRO_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

typedef struct json_writer {
    FILE *out;
    int depth;
    int pretty;                          /* indent nested values */
    unsigned char first[JSON_MAX_DEPTH]; /* no value written yet at this depth */
    int after_key;                       /* a key was just written */
} json_writer;

/* Starts a writer on out; pretty != 0 indents. Nothing is written yet. */
void json_init(json_writer *w, FILE *out, int pretty);

/* Open and close an object or an array (as a value, or at the top level). */
void json_begin_object(json_writer *w);
void json_end_object(json_writer *w);
void json_begin_array(json_writer *w);
void json_end_array(json_writer *w);

/* Writes an object key; the next value written is its value. */
void json_key(json_writer *w, const char *key);

/* Values. json_string writes null for a NULL s; json_string_len takes len bytes of s,
 * which need not be NUL-terminated. */
void json_string(json_writer *w, const char *s);
void json_string_len(json_writer *w, const char *s, size_t len);
void json_int(json_writer *w, int64_t v);
void json_uint(json_writer *w, uint64_t v);
/* Non-finite doubles are written as null. */
void json_double(json_writer *w, double v);
void json_bool(json_writer *w, int v);
void json_null(json_writer *w);

/* key + value shorthands */
void json_kv_string(json_writer *w, const char *key, const char *s);
void json_kv_int(json_writer *w, const char *key, int64_t v);
void json_kv_uint(json_writer *w, const char *key, uint64_t v);
void json_kv_double(json_writer *w, const char *key, double v);
void json_kv_bool(json_writer *w, const char *key, int v);

/* Writes s escaped as a JSON string body (no quotes) to out. */
void json_escape(FILE *out, const char *s, size_t len);

#endif
