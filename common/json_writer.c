/* json_writer.c: streaming JSON output (see json_writer.h). */
#include "json_writer.h"

#include <math.h>
#include <string.h>

void
json_init(json_writer *w, FILE *out, int pretty)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->pretty = pretty;
    w->first[0] = 1;
}

static void
newline_indent(json_writer *w)
{
    if (!w->pretty)
        return;
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->out);
}

/* Emits the separator due before a value (or key). */
static void
before_value(json_writer *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (!w->first[w->depth])
        fputc(',', w->out);
    w->first[w->depth] = 0;
    if (w->depth > 0)
        newline_indent(w);
}

static void
open_scope(json_writer *w, int c)
{
    before_value(w);
    fputc(c, w->out);
    if (w->depth < JSON_MAX_DEPTH - 1)
        w->depth++;
    w->first[w->depth] = 1;
}

static void
close_scope(json_writer *w, int c)
{
    int empty = w->first[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (!empty)
        newline_indent(w);
    fputc(c, w->out);
    if (w->depth == 0 && w->pretty)
        fputc('\n', w->out);
}

void
json_begin_object(json_writer *w)
{
    open_scope(w, '{');
}

void
json_end_object(json_writer *w)
{
    close_scope(w, '}');
}

void
json_begin_array(json_writer *w)
{
    open_scope(w, '[');
}

void
json_end_array(json_writer *w)
{
    close_scope(w, ']');
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), or 0 if invalid. */
static size_t
utf8_seq_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0) {
        len = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        len = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

void
json_escape(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            size_t j = i + 1;
            while (j < len && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
                j++;
            fwrite(s + i, 1, j - i, out);
            i = j;
            continue;
        }
        switch (c) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (c < 0x20) {
                fprintf(out, "\\u%04x", c);
            } else {
                size_t n = utf8_seq_len(s + i, len - i);
                if (n == 0) {
                    fputs("\\ufffd", out);
                    n = 1;
                } else {
                    fwrite(s + i, 1, n, out);
                }
                i += n;
                continue;
            }
        }
        i++;
    }
}

void
json_key(json_writer *w, const char *key)
{
    before_value(w);
    fputc('"', w->out);
    json_escape(w->out, key, strlen(key));
    fputs(w->pretty ? "\": " : "\":", w->out);
    w->after_key = 1;
}

void
json_string_len(json_writer *w, const char *s, size_t len)
{
    before_value(w);
    fputc('"', w->out);
    json_escape(w->out, s, len);
    fputc('"', w->out);
}

void
json_string(json_writer *w, const char *s)
{
    if (!s) {
        json_null(w);
        return;
    }
    json_string_len(w, s, strlen(s));
}

void
json_int(json_writer *w, int64_t v)
{
    before_value(w);
    fprintf(w->out, "%lld", (long long)v);
}

void
json_uint(json_writer *w, uint64_t v)
{
    before_value(w);
    fprintf(w->out, "%llu", (unsigned long long)v);
}

void
json_double(json_writer *w, double v)
{
    before_value(w);
    if (!isfinite(v))
        fputs("null", w->out);
    else if (v == (double)(int64_t)v && fabs(v) < 1e15)
        fprintf(w->out, "%lld", (long long)v);
    else
        fprintf(w->out, "%.17g", v);
}

void
json_bool(json_writer *w, int v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->out);
}

void
json_null(json_writer *w)
{
    before_value(w);
    fputs("null", w->out);
}

void
json_kv_string(json_writer *w, const char *key, const char *s)
{
    json_key(w, key);
    json_string(w, s);
}

void
json_kv_int(json_writer *w, const char *key, int64_t v)
{
    json_key(w, key);
    json_int(w, v);
}

void
json_kv_uint(json_writer *w, const char *key, uint64_t v)
{
    json_key(w, key);
    json_uint(w, v);
}

void
json_kv_double(json_writer *w, const char *key, double v)
{
    json_key(w, key);
    json_double(w, v);
}

void
json_kv_bool(json_writer *w, const char *key, int v)
{
    json_key(w, key);
    json_bool(w, v);
}
