/* ncclname.c: NCCL kernel names -> collective, algorithm (see ncclname.h). */
#include "ncclname.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"

#define NCCLNAME_MAX_TOKENS 12

static const struct {
    const char *name;
    int op;
} k_colls[] = {
    {"AllReduce", DPRO_COLL_ALLREDUCE},  {"Broadcast", DPRO_COLL_BROADCAST},
    {"Reduce", DPRO_COLL_REDUCE},        {"AllGather", DPRO_COLL_ALLGATHER},
    {"AllGatherV", DPRO_COLL_ALLGATHER}, {"ReduceScatter", DPRO_COLL_REDUCESCATTER},
    {"SendRecv", DPRO_COLL_SEND},        {"Generic", 0},
};

/* Algorithm names, two-token ones first (NVLS_TREE before NVLS). */
static const struct {
    const char *first, *second;
    int algo;
} k_algos[] = {
    {"COLLNET", "DIRECT", NCCLNAME_ALGO_COLLNET_DIRECT},
    {"COLLNET", "CHAIN", NCCLNAME_ALGO_COLLNET_CHAIN},
    {"NVLS", "TREE", NCCLNAME_ALGO_NVLS_TREE},
    {"NVLS", NULL, NCCLNAME_ALGO_NVLS},
    {"RING", NULL, NCCLNAME_ALGO_RING},
    {"TREE", NULL, NCCLNAME_ALGO_TREE},
    {"PAT", NULL, NCCLNAME_ALGO_PAT},
};

const char *
ncclname_algo_name(int algo)
{
    static const char *n[] = {"unknown",       "RING", "TREE",      "COLLNET_DIRECT",
                              "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
    return algo >= 0 && algo <= NCCLNAME_ALGO_PAT ? n[algo] : n[0];
}

/* Token i of the split name equals s. */
static int
tok_is(const char tok[][32], int n, int i, const char *s)
{
    return i < n && strcmp(tok[i], s) == 0;
}

/* Reads the algorithm and the kernel's protocol from the tokens after the collective's. */
static void
read_algo(const char tok[][32], int n, ncclname *out)
{
    for (int i = 1; i < n && !out->algo; i++)
        for (size_t k = 0; k < sizeof k_algos / sizeof k_algos[0] && !out->algo; k++) {
            if (!tok_is(tok, n, i, k_algos[k].first) ||
                (k_algos[k].second && !tok_is(tok, n, i + 1, k_algos[k].second)))
                continue;
            int p = i + (k_algos[k].second ? 2 : 1);
            if (tok_is(tok, n, p, "LL") || tok_is(tok, n, p, "LL128") ||
                tok_is(tok, n, p, "SIMPLE")) {
                out->algo = k_algos[k].algo;
                strcpy(out->kernel_proto, tok[p]);
            }
        }
}

int
ncclname_parse(const char *name, ncclname *out)
{
    int rc = 0;
    if (!name || !out)
        return -1;
    memset(out, 0, sizeof *out);
    const char *s = name;
    size_t len = strlen(s);
    if (s[0] == '_' && s[1] == 'Z') { /* mangled: _Z<length><identifier>... */
        char *end = NULL;
        unsigned long l = strtoul(s + 2, &end, 10);
        if (end && end != s + 2 && l <= strlen(end)) {
            s = end;
            len = l;
        }
    }
    size_t plen = 0;
    if (strncmp(s, "ncclKernel_", 11) == 0) {
        out->naming = NCCLNAME_OLD;
        plen = 11;
    } else if (strncmp(s, "ncclDevKernel_", 14) == 0) {
        out->naming = NCCLNAME_NEW;
        plen = 14;
    }
    char tok[NCCLNAME_MAX_TOKENS][32];
    int nt = 0;
    if (out->naming) {
        /* split the identifier (up to a parameter list or the end) at '_' */
        size_t i = plen;
        while (i < len && nt < NCCLNAME_MAX_TOKENS && s[i] != '(' &&
               !isspace((unsigned char)s[i])) {
            size_t j = i;
            while (j < len && s[j] != '_' && s[j] != '(' && !isspace((unsigned char)s[j]))
                j++;
            size_t l = j - i < 31 ? j - i : 31;
            memcpy(tok[nt], s + i, l);
            tok[nt++][l] = 0;
            i = j < len && s[j] == '_' ? j + 1 : j;
        }
        for (size_t k = 0; nt > 0 && k < sizeof k_colls / sizeof k_colls[0] && !rc; k++)
            if (strcmp(tok[0], k_colls[k].name) == 0) {
                out->op = k_colls[k].op;
                rc = 1;
            }
    }
    if (rc == 1) {
        read_algo(tok, nt, out);
        out->algo_exact =
            out->naming == NCCLNAME_OLD ? out->algo != 0 : out->algo == NCCLNAME_ALGO_TREE;
        if (out->op == DPRO_COLL_SEND) /* point to point: no collective algorithm */
            out->algo = NCCLNAME_ALGO_UNKNOWN, out->algo_exact = 0;
    } else {
        memset(out, 0, sizeof *out);
    }
    return rc;
}
