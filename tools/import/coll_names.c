/*
 * coll_names.c: NCCL collectives named in text (coll_names.h), shared by the importers.
 */
#include <string.h>

#include "coll_names.h"
#include "dprotrace.h"

/* See coll_names.h. */
uint32_t
imp_coll_op_from_text(const char *s)
{
    char n[64];
    size_t j = 0;
    for (size_t i = 0; s[i] && j < sizeof(n) - 1; i++) {
        char c = s[i];
        if (c == '_' || c == ' ')
            continue;
        n[j++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    n[j] = '\0';
    static const struct {
        const char *prefix;
        uint32_t op;
    } ops[] = {
        {"allreduce", DPRO_COLL_ALLREDUCE},
        {"broadcast", DPRO_COLL_BROADCAST},
        {"reducescatter", DPRO_COLL_REDUCESCATTER},
        {"reduce", DPRO_COLL_REDUCE},
        {"allgather", DPRO_COLL_ALLGATHER},
        {"alltoall", DPRO_COLL_ALLTOALL},
        {"send", DPRO_COLL_SEND},
        {"recv", DPRO_COLL_RECV},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strncmp(n, ops[i].prefix, strlen(ops[i].prefix)) == 0)
            return ops[i].op;
    return 0;
}

/* Does name[0..end) hold "_tok" followed by '_', '(' or the end? */
static int
imp_has_token(const char *name, size_t end, const char *tok)
{
    size_t n = strlen(tok);
    for (size_t i = 0; i + n + 1 <= end; i++) {
        if (name[i] != '_' || memcmp(name + i + 1, tok, n) != 0)
            continue;
        size_t j = i + 1 + n;
        if (j == end || name[j] == '_' || name[j] == '(')
            return 1;
    }
    return 0;
}

/* See coll_names.h. */
void
imp_coll_from_kernel(const char *name, size_t len, uint32_t *op, uint32_t *redop, uint32_t *dtype)
{
    static const struct {
        const char *tok;
        uint32_t v;
    } ops[] = {{"AllReduce", DPRO_COLL_ALLREDUCE},
               {"Broadcast", DPRO_COLL_BROADCAST},
               {"Reduce", DPRO_COLL_REDUCE},
               {"AllGather", DPRO_COLL_ALLGATHER},
               {"ReduceScatter", DPRO_COLL_REDUCESCATTER},
               {"SendRecv", DPRO_COLL_SEND},
               {"Send", DPRO_COLL_SEND},
               {"Recv", DPRO_COLL_RECV},
               {"AllToAll", DPRO_COLL_ALLTOALL}},
      redops[] = {{"Sum", 0}, {"Prod", 1},      {"Max", 2},       {"Min", 3},
                  {"Avg", 4}, {"PreMulSum", 5}, {"SumPostDiv", 6}},
      types[] = {{"int8_t", 0},  {"i8", 0},
                 {"uint8_t", 1}, {"u8", 1},
                 {"int32_t", 2}, {"i32", 2},
                 {"int", 2},     {"uint32_t", 3},
                 {"u32", 3},     {"int64_t", 4},
                 {"i64", 4},     {"uint64_t", 5},
                 {"u64", 5},     {"half", 6},
                 {"f16", 6},     {"float", 7},
                 {"f32", 7},     {"double", 8},
                 {"f64", 8},     {"__nv_bfloat16", 9},
                 {"bf16", 9},    {"__nv_fp8_e4m3", 10},
                 {"f8e4m3", 10}, {"__nv_fp8_e5m2", 11},
                 {"f8e5m2", 11}};
    size_t end = 0;
    while (end < len && name[end] != '(')
        end++;
    /* the operation is the token after the "ncclKernel" / "ncclDevKernel" prefix */
    size_t b = 0;
    while (b < end && name[b] != '_')
        b++;
    size_t e = b < end ? b + 1 : end;
    while (e < end && name[e] != '_')
        e++;
    if (b < end && *op == 0) {
        for (size_t t = 0; t < sizeof(ops) / sizeof(ops[0]); t++)
            if (strlen(ops[t].tok) == e - b - 1 && memcmp(name + b + 1, ops[t].tok, e - b - 1) == 0)
                *op = ops[t].v;
    }
    for (size_t t = 0; t < sizeof(redops) / sizeof(redops[0]); t++)
        if (imp_has_token(name, end, redops[t].tok))
            *redop = redops[t].v;
    if (*dtype == IMP_DTYPE_UNKNOWN) {
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            if (imp_has_token(name, end, types[t].tok)) {
                *dtype = types[t].v;
                break;
            }
        }
    }
}
