/*
 * json_squeeze.h: the whitespace pre-pass of the JSON importers.
 *
 * Pretty-printed JSON is about a quarter whitespace, which yajl's lexer steps over a byte
 * at a time; an importer first copies the text without the whitespace that separates
 * nothing (outside strings, after a structural character or a closing quote; whitespace
 * after a number or a literal is kept, so "1 2" stays two tokens), sixteen or sixty-four
 * bytes at a time. The parser sees the same tokens in the same order; imp_squeeze_unmap
 * maps a position in the copy back to the original text, so that error positions (byte
 * offset, and line by imp_count_lines) are those of a plain parse.
 *
 * Levels: OFF (the text as is), SCALAR (a byte at a time: the reference, and any CPU),
 * SSSE3, AVX512 (AVX-512 BW + VBMI2 compress). A level the CPU lacks falls back to the
 * best one it has below it; AUTO is the best SIMD level the CPU has, else OFF (SCALAR
 * costs more than it saves yajl).
 */
#ifndef DPRO_IMPORT_JSON_SQUEEZE_H
#define DPRO_IMPORT_JSON_SQUEEZE_H

#include <stddef.h>
#include <stdint.h>

enum {
    IMP_SQUEEZE_AUTO = 0,
    IMP_SQUEEZE_OFF,
    IMP_SQUEEZE_SCALAR,
    IMP_SQUEEZE_SSSE3,
    IMP_SQUEEZE_AVX512,
};

/* Bytes past the end of the output that a squeeze may store (whole vectors): the output
 * of n input bytes needs n + IMP_PIECE_SLACK bytes. */
#define IMP_PIECE_SLACK 64u

/* Where the pre-pass is: inside a string, after its backslash, and whether whitespace
 * here is dropped (the last byte outside a string that was not whitespace is structural
 * or a quote, or nothing came yet: start with drop = 1). */
typedef struct imp_sq {
    unsigned in_str, esc, drop;
} imp_sq;

/* Copies in[0..n) to out without the whitespace that separates nothing, carrying *st from
 * the previous call; adds the newlines of in to *lines. Returns the bytes stored (out needs
 * n + IMP_PIECE_SLACK bytes). */
typedef size_t (*imp_squeeze_fn)(imp_sq *st, const unsigned char *in, size_t n, unsigned char *out,
                                 uint64_t *lines);

/* The function of an IMP_SQUEEZE_* level (NULL for OFF), the best this CPU has at or below
 * it (AUTO: the best SIMD level, else OFF); *level gets the level given. Thread-safe. */
imp_squeeze_fn imp_squeeze_pick(int *level);

/* Offset in the chunk in[0..n) (squeezed from state st) of a position pos of its squeezed
 * text: just after the byte that became byte pos - 1, or, with at_next (the parser stepped
 * back to the start of the token it rejects), at the byte that became byte pos. */
size_t imp_squeeze_unmap(imp_sq st, const unsigned char *in, size_t n, size_t pos, int at_next);

/* Newlines in p[0..n). */
uint64_t imp_count_lines(const unsigned char *p, size_t n);

#endif /* DPRO_IMPORT_JSON_SQUEEZE_H */
