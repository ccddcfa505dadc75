/*
 * fuzz_batch_decode.c: libFuzzer target for the batch decoder (schemas/codec_decode.c),
 * the parser of what a trace file's batches hold.
 *
 * Input byte 0 picks the path: odd, the rest is a raw protobuf batch that the target
 * compresses itself (so the fuzzer explores protobuf and column validation directly);
 * even, bytes 1-4 are the claimed uncompressed size and the rest the zlib stream (so it
 * explores inflate limits and bombs). Any error status is fine; a crash, a leak or
 * undefined behaviour is not. A batch that decodes is re-encoded and decoded again, and
 * must give the same events.
 *
 * Built and run by tests/fuzz/run-batch-fuzz.sh (clang -fsanitize=fuzzer,address).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dprotrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dpro_event *ev = NULL, *again = NULL;
    size_t n = 0, n2 = 0, rawlen;
    char err[256];
    uint8_t *z = NULL, *blob = NULL;
    int rc;

    if (size < 1)
        return 0;
    if (data[0] & 1) {
        uLongf zl = compressBound(size - 1);
        z = malloc(zl);
        if (!z || compress2(z, &zl, data + 1, size - 1, 1) != Z_OK) {
            free(z);
            return 0;
        }
        rc = dpro_batch_decode(z, zl, size - 1, &ev, &n, err, sizeof err);
    } else {
        if (size < 5)
            return 0;
        rawlen = (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16 |
                 (size_t)(data[4] & 0x3f) << 24;
        rc = dpro_batch_decode(data + 5, size - 5, rawlen, &ev, &n, err, sizeof err);
    }
    if (rc == DPRO_OK && n && n <= 2048) { /* the check below is quadratic */
        size_t bl, rl;
        if (dpro_batch_encode(ev, n, 1, &blob, &bl, &rl) == DPRO_OK &&
            dpro_batch_decode(blob, bl, rl, &again, &n2, err, sizeof err) == DPRO_OK) {
            /* the codec keeps the order of events within a kind (groups may come in
             * another order): match the i-th event of a kind with the i-th of that kind */
            size_t matched = 0;
            for (size_t i = 0; i < n; i++) {
                size_t seen = 0;
                for (size_t k = 0; k < i; k++)
                    seen += ev[k].kind == ev[i].kind;
                for (size_t j = 0; j < n2; j++) {
                    if (again[j].kind != ev[i].kind)
                        continue;
                    if (seen-- == 0) {
                        matched += !memcmp(&ev[i], &again[j], sizeof *ev);
                        break;
                    }
                }
            }
            if (n2 != n || matched != n)
                abort();
        }
    }
    free(again);
    free(blob);
    free(ev);
    free(z);
    return 0;
}
